# Two entry points: `make demo` (the main job) and `make test`. Both build .venv first.
PYTHON ?= python3
VENV   ?= .venv
# The CPU build of PyTorch is installed first and pinned, so that nothing pulls CUDA packages.
# Elsewhere than a machine with the local wheel, add:  TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_SPEC  ?= torch==2.13.0
TORCH_INDEX ?=
BIN := $(VENV)/bin

.PHONY: setup demo test lint docs bench device-check clean
setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml lab/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(TORCH_SPEC) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/python -m pip install -q -e ".[dev,docs,data]" -e ./lab  # the library and the lab beside it (opct-lab)
	touch $@

demo: setup
	$(BIN)/opct demo

test: setup
	$(BIN)/python -m pytest -q -n auto

lint: setup
	$(BIN)/ruff check opct tests benchmarks lab

docs: setup
	$(BIN)/mkdocs build --strict

bench: setup
	$(BIN)/python -m pip install -q -e ".[bench]"
	$(BIN)/python benchmarks/opct_step.py

# The GPU check (docs/development.md): no venv, nothing from the network; ARGS e.g. --dry-run, --tokenizer DIR
device-check:
	benchmarks/device_check.sh $(ARGS)

clean:
	rm -rf $(VENV) build site *.egg-info

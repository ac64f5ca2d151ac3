# Two entry points: `make demo` (the main job) and `make test`. Both build .venv first.
PYTHON ?= python3
VENV   ?= .venv
# The CPU build of PyTorch is installed first and pinned, so that nothing pulls CUDA packages.
# Elsewhere than a machine with the local wheel, add:  TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_SPEC  ?= torch==2.13.0
TORCH_INDEX ?=
# The tested versions (constraints.txt); `make test-latest` sets it empty to test the newest that pyproject.toml allows.
CONSTRAINTS ?= constraints.txt
LATEST_VENV ?= .venv-latest
BIN := $(VENV)/bin

.PHONY: setup demo test test-latest constraints lint docs bench device-check device-wheels clean
setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml lab/pyproject.toml $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(TORCH_SPEC) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/python -m pip install -q $(if $(CONSTRAINTS),-c $(CONSTRAINTS)) -e ".[dev,docs,data]" -e ./lab  # the library and the lab beside it (opct-lab)
	touch $@

demo: setup
	$(BIN)/opct demo

test: setup
	$(BIN)/python -m pytest -q -n auto

# The suite on the newest versions pyproject.toml allows, in a venv of its own built anew: drift found on purpose.
test-latest:
	rm -rf $(LATEST_VENV)
	$(MAKE) VENV=$(LATEST_VENV) CONSTRAINTS= test

# After `make test-latest` passes: its versions become the tested ones (then `make test` on a fresh .venv).
constraints:
	test -x $(LATEST_VENV)/bin/python || { echo "run make test-latest first"; exit 2; }
	{ sed -n '/^#/p' constraints.txt; $(LATEST_VENV)/bin/python -m pip freeze --exclude-editable | grep -viE '^(torch|opct|opct-lab)=='; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

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

# The wheels the GPU machine's image lacks (benchmarks/device_wheels.txt), for its Python 3.12, at the tested versions:
# carry .whl with the device check (docs/development.md, "The device check").
device-wheels: setup
	rm -rf .whl && mkdir -p .whl
	$(BIN)/python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
	  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
	  $$(grep -v '^#' benchmarks/device_wheels.txt | sed 's/[-_]/[-_]/g; s/^/^/; s/$$/==/' | grep -ihf - constraints.txt)
	ls .whl

clean:
	rm -rf $(VENV) $(LATEST_VENV) build site *.egg-info

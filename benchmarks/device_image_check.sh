#!/usr/bin/env bash
# The device check as the GPU machine's image would run it, here on the CPU (issue 70, item 1):
#   - a venv of the image's versions (transformers 5.17.0, accelerate 1.15.0, huggingface_hub 1.33.0,
#     tokenizers 0.23.2, safetensors 0.8.0; torch 2.13.0 CPU stands in for the image's 2.11.0+cu130, which is
#     not on this machine's index) with no pydantic;
#   - what the device tool sends (tracked files and untracked ones git does not ignore), copied to a folder with
#     no ../shared beside it, so the tree's own Qwen3 tokenizer is the one found; its size against the 64 MiB;
#   - pydantic and its needs only from wheels, as `make device-wheels` carries them (here for this Python);
#   - the dry run, then `--smoke` (every section on the tiny model, on the CPU).
# Writes $RESULTS (default benchmarks/results/device-image/): summary.txt, device-check.md/.json.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
VENV="${IMAGE_VENV:-$ROOT/.venv-device-image}"
RESULTS="${RESULTS:-$ROOT/benchmarks/results/device-image}"
IMAGE_PACKAGES="transformers==5.17.0 accelerate==1.15.0 huggingface_hub==1.33.0 tokenizers==0.23.2 safetensors==0.8.0 peft typer rich pyyaml psutil"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q torch==2.13.0
  # shellcheck disable=SC2086
  "$VENV/bin/python" -m pip install -q $IMAGE_PACKAGES
  # typer 0.29 asks for pydantic; the image's typer imports without it, and so does this one
  "$VENV/bin/python" -m pip uninstall -y -q pydantic pydantic_core annotated_types typing_inspection || true
fi
if "$VENV/bin/python" -c "import pydantic" 2>/dev/null; then echo "the image venv has pydantic: remove $VENV"; exit 2; fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/wheels" "$WORK/send/main"
# shellcheck disable=SC2046
"$VENV/bin/python" -m pip download -q --no-deps --only-binary=:all: -d "$WORK/wheels" \
  $(grep -v '^#' benchmarks/device_wheels.txt | sed 's/[-_]/[-_]/g; s/^/^/; s/$/==/' | grep -ihf - constraints.txt)
git ls-files -co --exclude-standard -z | tar --null --ignore-failed-read -cf - -T - 2>/dev/null | tar -xf - -C "$WORK/send/main"
SENT=$(du -sb "$WORK/send/main" | cut -f1)
mkdir -p "$RESULTS"
cd "$WORK/send/main"
PYTHON="$VENV/bin/python" OUT="$WORK/dry" bash benchmarks/device_check.sh --dry-run > "$WORK/dry.txt"
env -u OPCT_TOKENIZER PYTHON="$VENV/bin/python" OUT="$RESULTS" DEVICE_CHECK_WHEELS="$WORK/wheels" \
  DEVICE_CHECK_SITE="$WORK/site" bash benchmarks/device_check.sh --smoke > "$WORK/smoke.txt" 2>&1 || true
{
  echo "device check in a venv of the GPU image's versions, on this machine's CPU ($(date -u +%FT%TZ), $(git -C "$ROOT" rev-parse --short HEAD))"
  echo "venv: $("$VENV/bin/python" -m pip list --format=freeze 2>/dev/null | grep -iE '^(torch|transformers|accelerate|huggingface.hub|tokenizers|safetensors|peft|typer|pydantic)==' | tr '\n' ' ')"
  echo "pydantic in the venv: no (from the carried wheels only: $(ls "$WORK/wheels" | tr '\n' ' '))"
  echo "sent tree: $SENT bytes of 67108864 (64 MiB): $((67108864 - SENT)) free"
  echo "smoke: $("$VENV/bin/python" -c "import json,sys; d=json.load(open(sys.argv[1])); print({k: v['status'] for k, v in d['sections'].items()}, 'tokenizer:', d.get('tokenizer'))" "$RESULTS/device-check.json")"
  echo "--- dry run"
  cat "$WORK/dry.txt"
  echo "--- smoke (tail)"
  tail -4 "$WORK/smoke.txt"
} > "$RESULTS/summary.txt"
rm -rf "$RESULTS/logs"
cat "$RESULTS/summary.txt"

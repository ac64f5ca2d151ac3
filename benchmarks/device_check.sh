#!/usr/bin/env bash
# The GPU check (benchmarks/device_check.py): what opct does on a lent GPU, in at most 8 minutes, offline.
#
#   benchmarks/device_check.sh --dry-run                      # what it would measure
#   benchmarks/device_check.sh --tokenizer .qwen3-tokenizer   # results in $OUT, or ./device-check/
#
# Installs nothing from the network: the wheels in .whl/ (if that folder exists: opct's dependencies
# the machine lacks, e.g. pydantic; `make device-wheels` fetches them) go into a private folder with pip
# --no-index --no-deps, and opct itself is imported from this checkout (PYTHONPATH). PYTHON picks the
# interpreter (default python3), DEVICE_CHECK_WHEELS the wheel folder (default .whl). With no --tokenizer,
# the tree's own Qwen3 tokenizer (opct/testing/tokenizers/qwen3) is unpacked into the work folder.
set -u
cd "$(dirname "$0")/.." || exit 2
PY="${PYTHON:-python3}"
if ! command -v "$PY" >/dev/null 2>&1; then
  echo "device check: no Python interpreter '$PY' (set PYTHON)"; exit 2
fi
SITE="${DEVICE_CHECK_SITE:-${TMPDIR:-/tmp}/opct-device-check-site}"
case " $* " in *" --dry-run "*) DRY=1 ;; *) DRY=0 ;; esac
WHEELS="${DEVICE_CHECK_WHEELS:-.whl}"
if [ "$DRY" = 0 ] && compgen -G "$WHEELS/*.whl" >/dev/null; then
  if "$PY" -m pip --version >/dev/null 2>&1; then HAS_PIP=1; else HAS_PIP=0; fi
  for wheel in "$WHEELS"/*.whl; do  # one at a time: a wheel for another Python does not stop the others
    if [ "$HAS_PIP" = 1 ]; then
      if "$PY" -m pip install -q --no-index --no-deps --disable-pip-version-check --upgrade --target "$SITE" "$wheel" 2>/dev/null; then
        echo "device check: installed $(basename "$wheel") into $SITE (offline, without dependencies)"
      else
        echo "device check: pip could not install $(basename "$wheel") (another Python or platform?); going on without it"
      fi
    else  # no pip: a wheel without scripts or data is its files, unpacked
      mkdir -p "$SITE" && "$PY" -m zipfile -e "$wheel" "$SITE" \
        && echo "device check: no pip here: unpacked $(basename "$wheel") into $SITE"
    fi
  done
fi
export PYTHONPATH="$PWD${SITE:+:$SITE}${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec "$PY" benchmarks/device_check.py "$@"

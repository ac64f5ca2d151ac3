#!/bin/bash
# Issue 40: is the LoRA step slower at 8545533 than at 6fe7b9a (2026-11-24)? opct only, ABAB, same venv.
for r in 1 2; do
  for side in old new; do
    if [ $side = old ]; then cd /work/ab; else cd /work/main; fi
    PYTHONPATH=$PWD /work/main/.venv/bin/python benchmarks/opct_step.py --only opct --out /tmp/ab/$side-$r > /tmp/ab/$side-$r.log 2>&1
    echo "$side-$r rc=$? $(date +%T)"
  done
done

#!/usr/bin/env bash
# The wall time of an `opct run` that is interrupted once and then resumed by the same command: what the
# issue-41 study's "resumes after an interruption, finishes within 3 hours" is measured with.
#
# usage: bash benchmarks/interrupted_run.sh EXPERIMENT.yaml OUT.txt INTERRUPT_AFTER_S [term|crash] [-- opct run options]
#   term  (default) SIGTERM to `opct run`, as a scheduler's stop or Ctrl-C: it stops its workers and exits;
#   crash SIGKILL to `opct run` and every process under it at once, as a power cut: nothing gets to clean up.
# Then the same command runs again to the end. OUT.txt gets a header, both parts' logs and their wall
# seconds; `python benchmarks/stage_times.py OUT.txt` sums its stages. A training run finished before the
# stop is kept by the second part without a worker; a finished eval or attack gets a worker that finds it
# done in a few seconds (stage_times.py adds them to its first attempt); a stage stopped while running
# appears once, with the second part's seconds only. Run from the repository root; PYTHON picks the
# interpreter (default: python).
set -u
if [ $# -lt 3 ]; then sed -n '5,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; fi
experiment=$1; out=$2; after=$3; shift 3
mode=term
if [ $# -gt 0 ] && [ "$1" != "--" ]; then mode=$1; shift; fi
[ "${1:-}" = "--" ] && shift
case $mode in term|crash) ;; *) echo "mode must be term or crash, not '$mode'" >&2; exit 2;; esac
[ -f "$experiment" ] || { echo "$experiment: no such experiment file" >&2; exit 2; }
py=${PYTHON:-python}
command=("$py" -m opct.cli run "$experiment" --no-progress "$@")

descendants() {  # every process under $1, deepest last
    local child
    for child in $(pgrep -P "$1"); do echo "$child"; descendants "$child"; done
}

{
    echo "An interrupted and resumed run: ${command[*]}"
    echo "at $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u +%FT%T), $(nproc) cores; interrupted ($mode) after ${after} s, then run again to the end"
    uptime
    start=$(date +%s)
    echo "== part 1: start $(date -u +%FT%T)"
    "${command[@]}" &
    pid=$!
    waited=0
    while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt "$after" ]; do sleep 1; waited=$((waited + 1)); done
    if kill -0 "$pid" 2>/dev/null; then
        if [ "$mode" = crash ]; then
            victims="$pid $(descendants "$pid")"
            kill -9 $victims 2>/dev/null
            echo "== crashed at $(date -u +%FT%T): SIGKILL to $(echo $victims | wc -w) processes"
        else
            kill -TERM "$pid"
            echo "== stopped at $(date -u +%FT%T): SIGTERM to opct run"
        fi
    fi
    wait "$pid"
    rc1=$?
    part1=$(( $(date +%s) - start ))
    echo "== part 1: rc=$rc1 wall_seconds_part $part1"
    second=$(date +%s)
    echo "== part 2 (the same command): start $(date -u +%FT%T)"
    "${command[@]}"
    rc=$?
    part2=$(( $(date +%s) - second ))
    echo "== part 2: rc=$rc wall_seconds_part $part2"
    echo "rc=$rc wall_seconds $(( $(date +%s) - start )) end $(date -u +%FT%T)"
} > "$out" 2>&1
tail -1 "$out"

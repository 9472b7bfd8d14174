#!/usr/bin/env bash
# A prepared GPU check (issue 14, part 5): on a machine with one data-centre GPU, at most 8 minutes in all,
# it writes results/bench/gpu.json and results/bench/gpu.md:
#   * benchmarks/gpu_check.py, one section at a time: environment, masked == pruned at bf16, realised vs
#     theoretical speed-up of pruning at the paper LM width, batched ablation vs one pass per head, fp32 vs
#     bf16 training throughput;
#   * the smoke DAG (`snakemake --cores 8 --config preset=smoke`) in a fresh copy of the repository, so
#     results/ here is left alone; its runs pick the GPU through train.device=auto.
# Every part runs under its own `timeout`; one that fails or runs out of time is recorded as such in the
# JSON and the next part still runs. The exit status is 0 only when every part was ok.
#
#   bash benchmarks/gpu_check.sh                      # on the GPU machine, from anywhere in the checkout
#   DEVICE=cpu SCALE=small bash benchmarks/gpu_check.sh   # the same plumbing on a CPU, in a minute or two
#                                                       # (plus the smoke DAG, minutes on 2 cores)
set -euo pipefail

self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$self")/.."
if [[ -z "${VIRTUAL_ENV:-}" && -f .venv/bin/activate ]]; then
    # shellcheck disable=SC1091
    . .venv/bin/activate
fi

# The smoke DAG part (the script calls itself under timeout): a fresh copy of the project (tracked and new
# files; no results/, resources/ or run state, as the slow tests make one), where the DAG prepares its own
# data and writes its runs; the caller deletes the copy. Without git (a bare copy of the tree) tar copies it.
if [[ "${1:-}" == --smoke-dag ]]; then
    dest=$2
    if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        python -c 'import sys; from pathlib import Path; sys.path.insert(0, "tests")
from smoke_dag import copy_repo; copy_repo(Path(sys.argv[1]))' "$dest"
    else
        mkdir -p "$dest"
        tar -cf - --exclude=./results --exclude=./resources --exclude=./.snakemake --exclude=./logs \
            --exclude=./.venv --exclude=./.git . | tar -xf - -C "$dest"
    fi
    cd "$dest"
    exec snakemake --cores "${CORES:-8}" --config preset=smoke
fi

DEVICE=${DEVICE:-cuda}
SCALE=${SCALE:-paper}
OUT=${OUT:-results/bench/gpu.json}
BUDGET=${BUDGET:-465}  # seconds for every part together: 8 minutes less room for the last kill and record
CORES=${CORES:-8}
SMOKE=${SMOKE:-1}      # 0: leave the smoke DAG out

start=$SECONDS
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$(dirname "$OUT")"
rm -f "$OUT" "${OUT%.json}.md"  # a record left from an earlier run must not pass for this one's
failures=0

check=(python benchmarks/gpu_check.py --device "$DEVICE" --scale "$SCALE" --out "$OUT")  # an array: timeout runs it

# part NAME CAP COMMAND...: run COMMAND under CAP seconds (less when the budget has less left), its output in
# $work/NAME.log, then record its exit status and wall time; never stops the script.
part() {
    local name=$1 cap=$2 rc=0 began=$SECONDS left
    shift 2
    left=$((BUDGET - (SECONDS - start)))
    if ((left < cap)); then cap=$left; fi
    if ((cap < 10)); then
        echo "# $name: skipped, ${left}s of the budget left"
        "${check[@]}" --mark "$name" --rc 124 --seconds 0 --cap "$cap" || true
        failures=$((failures + 1))
        return 0
    fi
    echo "# $name (cap ${cap}s) ..."
    # timeout kills the whole process group (snakemake's jobs too); KILL 5 s after TERM if need be.
    timeout --kill-after=5 "$cap" "$@" >"$work/$name.log" 2>&1 || rc=$?
    echo "# $name: exit $rc after $((SECONDS - began))s"
    ((rc == 0)) || { tail -n 20 "$work/$name.log"; failures=$((failures + 1)); }
    "${check[@]}" --mark "$name" --rc "$rc" --seconds "$((SECONDS - began))" --cap "$cap" \
        --log "$work/$name.log" "${runs[@]}" || true
}

# Caps add up to 300 s; the smoke DAG gets what is left (at least 165 s, usually far more).
runs=()
part environment 30 "${check[@]}" --sections environment
part masked_vs_pruned 45 "${check[@]}" --sections masked_vs_pruned
part pruned_speedup 120 "${check[@]}" --sections pruned_speedup
part ablation 60 "${check[@]}" --sections ablation
part throughput 45 "${check[@]}" --sections throughput

if [[ "$SMOKE" == 1 ]]; then
    runs=(--runs "$work/repo/results/smoke/runs")
    part smoke_dag $((BUDGET - (SECONDS - start))) env CORES="$CORES" bash "$self" --smoke-dag "$work/repo"
fi

echo "# $((SECONDS - start))s in all; $failures part(s) not ok"
cat "${OUT%.json}.md"
((failures == 0))

#!/usr/bin/env bash
# Issue 12 (search at scale) on one GPU, in one slot of under 10 minutes:
#   bash benchmarks/run_gpu_issue12.sh OUTDIR
# Steps, in order, each under `timeout` (and all within DEADLINE seconds, default 570), with
# the H100 (16 cores) estimate of each:
#   1. search_tests      tests/gpu/test_search_gpu.py: budgets and choices per strategy  ~50 s
#   2. cold_anchor       bench_cold_tune.py, the anchor's 48 configurations              ~75 s
#   3. cold_tutorial03   bench_cold_tune.py, tutorial 03's 16 configurations             ~40 s
#   4. search_skinny     bench_search.py --shape skinny (the reference is built when
#                        missing: ~200 s of the ~260 s; ~60 s when it is there)         ~260 s
#   5. search_softmax    bench_search.py --family softmax (reference included: ~55 s)  ~100 s
# Logs in OUTDIR/<step>.log, the reference tables copied to OUTDIR, a summary at the end.
# ISSUE12_SKINNY_FAMILY=splitk runs step 4 on the split-K family (1,020 configurations:
# about the same cost).
set -uo pipefail
out=${1:?output directory}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 TUNEDSL_QUIET=1
export TUNEDSL_CACHE_DIR=${TUNEDSL_CACHE_DIR:-$(mktemp -d)/tunedsl}
py=${PYTHON:-python3}
deadline=${DEADLINE:-570}
start=$SECONDS
step() {  # step NAME LIMIT COMMAND...: LIMIT seconds, or what is left before the deadline
    local name=$1 limit=$2; shift 2
    local left=$((deadline - (SECONDS - start) - 15))
    if [ "$left" -lt 20 ]; then
        echo "== $name: skipped, $((SECONDS - start)) s spent of $deadline" | tee -a "$out/summary.txt"
        return
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    local t0=$SECONDS
    # timeout signals the whole process group: the benchmarks' child processes end too
    timeout -k 10 "$limit" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    local what="rc=$rc"
    { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && what="TIMED OUT after $limit s"
    echo "== $name: $what, $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
    tail -n "${TAIL:-14}" "$out/$name.log"
}
"$py" -c "import torch, triton, sys, os; print('torch', torch.__version__, '| triton', triton.__version__, '| python', sys.version.split()[0], '|', torch.cuda.get_device_name(), 'x', torch.cuda.device_count(), '|', os.cpu_count(), 'CPUs')" | tee "$out/summary.txt"
TAIL=16 step search_tests 110 "$py" -m pytest -q -p no:cacheprovider -rA tests/gpu/test_search_gpu.py
step cold_anchor 120 "$py" benchmarks/bench_cold_tune.py --space anchor --rounds 3 --rep 100
step cold_tutorial03 70 "$py" benchmarks/bench_cold_tune.py --space tutorial03 --rounds 3 --rep 100
step search_skinny 300 "$py" benchmarks/bench_search.py --family "${ISSUE12_SKINNY_FAMILY:-mm}" --shape skinny --budget 10 --triton-subset 16
step search_softmax 150 "$py" benchmarks/bench_search.py --family softmax --budget 5 --triton-subset 12 --ref-leaders 16 --ref-budget 15
cp benchmarks/data/*.json "$out/" 2>/dev/null
echo "== total $((SECONDS - start)) s" | tee -a "$out/summary.txt"
echo "-- summary"; cat "$out/summary.txt"

#!/usr/bin/env bash
# Every GPU test and benchmark of tunedsl, in two parts that each fit a 10-minute slot.
#   bash benchmarks/run_gpu_suite.sh a OUTDIR   # GPU tests, launch overhead, warm start, cold tuning
#   bash benchmarks/run_gpu_suite.sh b OUTDIR   # the gallery at GPU sizes, compile pool, front end
# Each step's full output goes to OUTDIR/<step>.log; the tables are echoed at the end.
set -uo pipefail
part=${1:?part a or b}
out=${2:?output directory}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
export TUNEDSL_CACHE_DIR=${TUNEDSL_CACHE_DIR:-$(mktemp -d)/tunedsl}
py=${PYTHON:-python3}

step() {  # step NAME TIMEOUT COMMAND...
    local name=$1 limit=$2; shift 2
    local t0=$SECONDS
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    echo "== $name: rc=$rc, $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
}

"$py" -c "import torch, triton, sys; print('torch', torch.__version__, '| triton', triton.__version__, '| python', sys.version.split()[0], '|', torch.cuda.get_device_name())" | tee "$out/summary.txt"
if [ "$part" = a ]; then
    step gpu_tests 240 "$py" -m pytest -q -p no:cacheprovider tests/gpu
    step bench_launch 150 "$py" benchmarks/bench_launch.py
    step bench_warm_start 200 "$py" benchmarks/bench_warm_start.py
    step bench_cold_tune 300 "$py" benchmarks/bench_cold_tune.py
    tails=(gpu_tests:3 bench_launch:12 bench_warm_start:6 bench_cold_tune:8)
else
    step gallery 420 "$py" -m tunedsl gallery --out "$out/gallery"
    step bench_compile_pool 150 "$py" benchmarks/bench_compile_pool.py --workers 16
    step bench_frontend 120 "$py" benchmarks/bench_frontend.py
    cp "$out/gallery/report.md" "$out/gallery_report.md" 2>/dev/null
    tails=(gallery:14 bench_compile_pool:12 bench_frontend:16)
fi
for t in "${tails[@]}"; do
    echo "---- ${t%%:*}"
    tail -n "${t##*:}" "$out/${t%%:*}.log"
done

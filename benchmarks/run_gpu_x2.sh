#!/usr/bin/env bash
# Issue 14 on a host with two GPUs (2 x H200), in one go of about 8 minutes:
#   bash benchmarks/run_gpu_x2.sh OUTDIR
# 1. one GPU against two: the 48-configuration anchor and the large space under a 20 s budget,
#    each row a fresh process with empty caches, in the order 1 2 2 1 (matched pairs)
# 2. two ranks over NCCL agree (tests/gpu/test_distributed_gpu.py, broadcast and allreduce)
# 3. a sweep on Ray, one actor per GPU (tests/gpu/test_sweep_gpu.py; prints SWEEP throughput)
# 4. the large space without a budget, in the time left of TOTAL_S (default 460 s; a row is
#    printed as soon as it is measured, so a cut run still has its one-GPU row)
# Each step has its own timeout and log in OUTDIR; OUTDIR/summary.txt has the rc and seconds of
# each step and the benchmark tables. Ray comes from .whl/ when it is not installed.
set -uo pipefail
out=${1:?output directory}
mkdir -p "$out"
total=${TOTAL_S:-460}
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 TUNEDSL_QUIET=1 NCCL_NVLS_ENABLE=0 RAY_ENABLE_UV_RUN_RUNTIME_ENV=0
export TUNEDSL_CACHE_DIR=${TUNEDSL_CACHE_DIR:-$(mktemp -d)/tunedsl}
if ! "$py" -c "import ray" 2>/dev/null && ls .whl/ray-*.whl >/dev/null 2>&1; then
    "$py" -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >"$out/install.log" 2>&1
    export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
start=$SECONDS
step() {  # step NAME TIMEOUT COMMAND... (the timeout is cut to the time left of TOTAL_S)
    local name=$1 limit=$2; shift 2
    local left=$((total - (SECONDS - start)))
    [ "$limit" -gt "$left" ] && limit=$left
    if [ "$limit" -lt 20 ]; then
        echo "== $name: skipped, ${left} s left of TOTAL_S=$total" | tee -a "$out/summary.txt"
        return
    fi
    local t0=$SECONDS
    timeout -k 10 "$limit" "$@" >"$out/$name.log" 2>&1
    echo "== $name: rc=$?, $((SECONDS - t0)) s (limit $limit s)" | tee -a "$out/summary.txt"
    tail -n "${TAIL:-12}" "$out/$name.log" | tee -a "$out/summary.txt"
}
"$py" -c "import torch, triton, sys; print('torch', torch.__version__, '| triton', triton.__version__, '| python', sys.version.split()[0], '|', torch.cuda.get_device_name(), 'x', torch.cuda.device_count())" 2>&1 | tee "$out/summary.txt"
"$py" -c "import ray; print('ray', ray.__version__)" 2>&1 | tail -1 | tee -a "$out/summary.txt"
nproc | sed 's/^/cpus /' | tee -a "$out/summary.txt"
TAIL=42 step multi_gpu 300 "$py" benchmarks/bench_multi_gpu.py --spaces anchor-48,large@20 --order 1221 --json "$out/multi_gpu.json"
TAIL=8 step distributed_gpu 150 "$py" -m pytest -q -p no:cacheprovider -rA tests/gpu/test_distributed_gpu.py tests/gpu/test_multi_gpu.py tests/gpu/test_multi_gpu_pipeline.py
TAIL=8 step sweep_gpu 100 "$py" -m pytest -q -s -p no:cacheprovider -rA tests/gpu/test_sweep_gpu.py
TAIL=20 step multi_gpu_large 400 "$py" benchmarks/bench_multi_gpu.py --spaces large --order 12 --json "$out/multi_gpu_large.json"
echo "== total $((SECONDS - start)) s" | tee -a "$out/summary.txt"

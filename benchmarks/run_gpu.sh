#!/usr/bin/env bash
# The GPU checks of tunedsl, as named suites that each fit in one 10-minute slot:
#
#   bash benchmarks/run_gpu.sh tests OUTDIR      # every GPU test (tests/gpu, the gallery on the GPU)
#   bash benchmarks/run_gpu.sh speed OUTDIR      # per-call cost against the launch floor, warm
#                                                # start, cold tuning (anchor and tutorial 03), next sizes
#   bash benchmarks/run_gpu.sh search OUTDIR     # search at scale on the stored tables
#   bash benchmarks/run_gpu.sh rules OUTDIR      # rules on shapes never swept, capture at 32 sizes
#   bash benchmarks/run_gpu.sh pytorch OUTDIR    # a compiled step with a DSL site against a raw
#                                                # launch; the in-place watch's cost
#   bash benchmarks/run_gpu.sh multi-gpu OUTDIR  # one GPU against two, one table: the anchor, the
#                                                # large space under a 20 s budget, a 16-shape sweep
#   bash benchmarks/run_gpu.sh multi-gpu-large OUTDIR  # the large space with no budget: one pair
#                                                # (each row compiles 1,104 configurations cold)
#   bash benchmarks/run_gpu.sh multi-gpu-tests OUTDIR  # the two-GPU tests: several GPUs, ranks, Ray
#   bash benchmarks/run_gpu.sh flagship OUTDIR   # the gallery's persistent TMA matmul and fused
#                                                # attention: tuned cold by tunedsl and by
#                                                # triton.autotune, beside cuBLAS and SDPA
#
# Several suites run in one call: `bash benchmarks/run_gpu.sh tests,speed OUTDIR`. Each step has
# its own timeout and log (OUTDIR/<step>.log); OUTDIR/summary.txt holds each step's exit status,
# seconds and the tail of its log, so the table a benchmark prints last is there too.
# DEADLINE (seconds, default 570) bounds the whole run: a step that cannot start in the time left
# is skipped and says so. A Ray wheel in .whl/ is installed for the multi-GPU tests when Ray is
# missing.
set -uo pipefail
suites=${1:?suites: tests, speed, search, rules, pytorch, multi-gpu, multi-gpu-large, multi-gpu-tests, flagship (comma-separated)}
out=${2:?output directory}
mkdir -p "$out"
py=${PYTHON:-python3}
deadline=${DEADLINE:-570}
export PYTHONUNBUFFERED=1 TUNEDSL_QUIET=1 NCCL_NVLS_ENABLE=0 RAY_ENABLE_UV_RUN_RUNTIME_ENV=0
export TUNEDSL_CACHE_DIR=${TUNEDSL_CACHE_DIR:-$(mktemp -d)/tunedsl}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
start=$SECONDS

step() {  # step NAME LIMIT COMMAND...: LIMIT seconds, or what is left before the deadline
    local name=$1 limit=$2; shift 2
    local left=$((deadline - (SECONDS - start) - 10))
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
    tail -n "${TAIL:-14}" "$out/$name.log" | tee -a "$out/summary.txt"
}

# The C fused launch is built at install: build it here, in place, for this Python.
"$py" -m pip install -q --no-deps --no-build-isolation -e . >"$out/install.log" 2>&1 \
    || "$py" setup.py -q build_ext --inplace >>"$out/install.log" 2>&1 \
    || echo "building the C extension failed (the generic path runs): see install.log" | tee -a "$out/summary.txt"
"$py" -c "import torch, triton, sys, os; print('torch', torch.__version__, '| triton', triton.__version__, '| python', sys.version.split()[0], '|', torch.cuda.get_device_name(), 'x', torch.cuda.device_count(), '|', os.cpu_count(), 'CPUs')" 2>&1 | tee "$out/summary.txt"

for suite in ${suites//,/ }; do
    case "$suite" in
    tests)
        TAIL=40 step gpu_tests 430 "$py" -m pytest -q -p no:cacheprovider -rfEs tests/gpu
        # the integration conftest sets TRITON_INTERPRET=1 unless it is set already
        TAIL=10 step gallery_gpu 130 env TRITON_INTERPRET=0 "$py" -m pytest -q -p no:cacheprovider \
            -rfEs tests/integration/test_gallery_gpu.py
        ;;
    speed)
        TAIL=30 step per_call 150 "$py" benchmarks/bench_launch.py --kernel all --repeats 7
        TAIL=10 step warm_start 90 "$py" benchmarks/bench_warm_start.py
        for i in 1 2; do
            TAIL=12 step "cold_tutorial03_$i" 120 "$py" benchmarks/bench_cold_tune.py \
                --space tutorial03 --rounds 3 --rep 100
            TAIL=12 step "cold_anchor_$i" 150 "$py" benchmarks/bench_cold_tune.py \
                --space anchor --rounds 3 --rep 100
        done
        TAIL=12 step next_key 120 "$py" benchmarks/bench_next_key.py --repeats 2
        ;;
    rules)
        TAIL=40 step rules 420 "$py" benchmarks/bench_rules.py --json "$out/rules.json"
        ;;
    pytorch)
        TAIL=14 step compile_site 150 "$py" benchmarks/bench_compile_site.py
        TAIL=10 step inplace_watch 150 "$py" benchmarks/bench_inplace_watch.py --runs 5
        ;;
    search)
        step search_splitk 200 "$py" benchmarks/bench_search.py --family splitk --shape skinny \
            --budget 10 --triton-subset 0 --strategies auto
        step search_softmax 150 "$py" benchmarks/bench_search.py --family softmax --budget 5 \
            --triton-subset 0 --strategies auto
        ;;
    multi-gpu)
        # One GPU against two, one table: every row a fresh process with its own caches, the
        # pairs of each space in the order 1 2 2 1; rows that cannot finish before the step's
        # deadline are skipped (the table says so). The RESULT lines decide.
        TAIL=30 step multi_gpu 520 "$py" benchmarks/bench_multi_gpu.py --deadline 480 \
            --spaces anchor-48,large@20,sweep-16 --json "$out/multi_gpu.json" --detail
        ;;
    multi-gpu-large)
        # Compiling the 1,104 configurations takes minutes on 32 cores (2xH100: 230 s with two
        # GPUs, 274 s with one): one matched pair, two GPUs first, so the one-GPU row gets the
        # rest of the step (a row past it is reported as such).
        TAIL=30 step multi_gpu_large 580 "$py" benchmarks/bench_multi_gpu.py --deadline 565 \
            --row-timeout 565 --spaces large:21 --json "$out/multi_gpu_large.json" --detail
        ;;
    multi-gpu-tests)
        # Ray from .whl/: its wheels, or (Ray's own wheel being larger than a device call
        # carries) a zip of the wheel's contents without the Java, dashboard and library
        # parts a local cluster does not load, made with
        # `unzip ray-*.whl -d t && rm -r t/ray/{jars,dashboard/client/build,rllib,data,serve,train,tune}`.
        if ! "$py" -c "import ray" 2>/dev/null && ls .whl/ray-* >/dev/null 2>&1; then
            {
                if ls .whl/*.whl >/dev/null 2>&1; then
                    "$py" -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
                fi
                for zip in .whl/*.zip; do
                    [ -e "$zip" ] && "$py" -m zipfile -e "$zip" /tmp/site
                done
                chmod +x /tmp/site/ray/core/src/ray/gcs/gcs_server \
                    /tmp/site/ray/core/src/ray/raylet/raylet 2>/dev/null || true
            } >"$out/ray_install.log" 2>&1
            export PYTHONPATH=/tmp/site:$PYTHONPATH
        fi
        TAIL=12 step multi_gpu_tests 240 "$py" -m pytest -q -p no:cacheprovider -rA \
            tests/gpu/test_multi_gpu.py tests/gpu/test_multi_gpu_pipeline.py
        TAIL=8 step ranks 90 "$py" -m pytest -q -p no:cacheprovider -rA \
            tests/gpu/test_distributed_gpu.py
        TAIL=8 step ray_sweep 100 "$py" -m pytest -q -s -p no:cacheprovider -rA \
            tests/gpu/test_sweep_gpu.py
        ;;
    flagship)
        # one table; --budget keeps it inside the step (rows it cannot start are listed)
        TAIL=40 step flagship 560 "$py" benchmarks/bench_flagship.py --budget 500 \
            --json "$out/flagship.json"
        ;;
    *)
        echo "unknown suite '$suite': choose from tests, speed, search, rules, pytorch, multi-gpu, multi-gpu-large, multi-gpu-tests, flagship" >&2
        exit 2
        ;;
    esac
done
echo "== total $((SECONDS - start)) s" | tee -a "$out/summary.txt"

#!/usr/bin/env bash
# The checks only a GPU shows, in one run of bounded length (README, "On a GPU"):
#   1. the executor, precision and CUDA tests with the tiny federation on the GPU;
#   2. `make bench`'s round, precision, local-step and memory benchmarks with BENCH_DEVICE=cuda;
#   3. the vectorised executor's peak device memory at 10, 100 and 1,000 clients (TwoNN);
#   4. `fedbench cost` of the heaviest paper cells (FedEvg's ResNet-10 at K = 10 on CIFAR-10 and
#      on 64 px DermaMNIST; SuPerFed's Shakespeare LSTM) on the GPU;
#   5. the smoke quick grid end to end (device auto = cuda);
#   6. the whole test suite (runs and workflows pick the GPU: device auto), 8 workers by file.
# Usage: benchmarks/gpu_check.sh OUTDIR [SECONDS]   (default 450 s; each step stops at the deadline)
# Where the machine lacks packages, wheels in .whl/ are installed into /tmp/site first.
set -u
out=${1:?usage: benchmarks/gpu_check.sh OUTDIR [SECONDS]}
deadline=$(($(date +%s) + ${2:-450}))
mkdir -p "$out" /tmp/gpu_bench
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 MPLCONFIGDIR=/tmp/mpl
PY=${PYTHON:-python3}
if [ -d .whl ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PATH=/tmp/site/bin:$PATH
fi
export PYTHONPATH=/tmp/site:$PWD
# `python` for Snakemake and the steps below: a wrapper, since a link to a venv's python3 loses the venv.
mkdir -p /tmp/bin && printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v $PY)" >/tmp/bin/python
chmod +x /tmp/bin/python && export PATH=/tmp/bin:$PATH
only=${STEPS:-tests bench memory cost smoke suite}  # STEPS="tests cost" runs those steps alone

step() {  # step NAME CAP_SECONDS COMMAND...: runs within min(CAP, time left), logs to OUTDIR
    local name=$1 cap=$2 left
    shift 2
    case " $only " in *" $name "*) ;; *) return ;; esac
    left=$((deadline - $(date +%s)))
    [ "$left" -lt "$cap" ] && cap=$left
    if [ "$cap" -le 5 ]; then
        echo "== $name: skipped (deadline)" | tee -a "$out/steps.txt"
        return
    fi
    local t0=$(date +%s)
    timeout "$cap" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    echo "== $name: rc=$rc in $(($(date +%s) - t0)) s (cap $cap s)" | tee -a "$out/steps.txt"
    tail -4 "$out/$name.log"
}

{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    $PY -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))'
} >"$out/steps.txt" 2>&1
cat "$out/steps.txt"

step tests 90 env FEDBENCH_TEST_DEVICE=cuda $PY -m pytest -q -p no:cacheprovider -n 8 \
    tests/engine/test_cuda.py tests/engine/test_executors.py tests/engine/test_precision.py
step bench 170 env BENCH_DEVICE=cuda $PY -m pytest -q -p no:cacheprovider benchmarks/test_round.py \
    benchmarks/test_precision.py benchmarks/test_pfedbred_round.py benchmarks/test_fedevg_round.py \
    benchmarks/test_memory.py benchmarks/test_local_step.py --benchmark-enable \
    ${BENCH_ARGS:-} --benchmark-json=/tmp/gpu_bench/bench_cuda.json --benchmark-columns=min,median,rounds
# The summary writes its JSON and profile beside the input: kept off OUTDIR (8 files come back).
[ -f /tmp/gpu_bench/bench_cuda.json ] && cp /tmp/gpu_bench/bench_cuda.json "$out/" &&
    $PY benchmarks/summary.py /tmp/gpu_bench/bench_cuda.json >"$out/bench_summary.txt" 2>&1
step memory 30 bash -c 'cd benchmarks && for k in 10 100 1000; do
    python bench_memory.py --clients $k --device cuda; done'
step cost 100 bash -c '
    python -m fedbench.cost fedevg --device cuda --rounds 1 --budget 10 --out /tmp/c1.csv \
        --match "fedevg-cifar10 fedevg-k10-a1 fedevg-resnet10 fedevg T"
    python -m fedbench.cost fedevg --device cuda --rounds 1 --budget 10 --out /tmp/c2.csv \
        --match "fedevg-dermamnist fedevg-k10-a1 fedevg-resnet10 fedevg T"
    python -m fedbench.cost superfed --device cuda --rounds 1 --budget 10 --out /tmp/c3.csv \
        --match "shakespeare superfed-shakespeare-k660 nextchar-lstm fedavg T"'
step smoke 45 python -m snakemake --cores 8 quick --config scale=smoke --quiet rules
step suite 150 $PY -m pytest -q -p no:cacheprovider -n 8 --dist loadfile tests
cat "$out/steps.txt"

"""One FedAvg round per model under float32 and bfloat16 mixed precision (training.precision),
through each executor that runs the model; the summary prints bf16's speed-up over fp32."""

import pytest
from bench_lib import BATCH, DEVICE, PrecisionCase, engine_round

# (arch, clients, samples per client): the small models at the round of test_round.py, the
# image networks at 20 samples a client (two steps) to keep `make bench` short.
CASES = (
    ("twonn", 10, 50),
    ("twocnn", 10, 50),
    ("pfedbred_dnn", 10, 50),
    ("resnet9", 10, 20),
    ("mobilenet", 10, 20),
    ("resnet18_gn", 10, 20),
)
# BatchNorm models train on the sequential executor only (per-client batch statistics).
SEQUENTIAL_ONLY = {"resnet9", "mobilenet"}
PARAMS = [
    pytest.param(arch, clients, samples, executor, precision, id=f"{arch}-{executor}-{precision}")
    for arch, clients, samples in CASES
    for executor in ("sequential", "vectorised")
    if not (executor == "vectorised" and arch in SEQUENTIAL_ONLY)
    # tf32 switches on a CUDA device's tensor-core matmuls (an error elsewhere): GPU runs only.
    for precision in ("fp32", "bf16", *(("tf32",) if DEVICE.type == "cuda" else ()))
]


@pytest.mark.parametrize("arch,clients,samples,executor,precision", PARAMS)
def test_precision_round(benchmark, arch, clients, samples, executor, precision):
    # Disabled (CI's plain run of each body): two clients with one batch each, the same paths.
    case = (
        PrecisionCase(arch, clients, samples, precision)
        if benchmark.enabled
        else PrecisionCase(arch, 2, BATCH, precision)
    )
    fed, model, cfg, flops = case.build()
    benchmark.extra_info.update(
        kind="precision",
        arch=arch,
        clients=case.clients,
        samples=case.per_client,
        executor=executor,
        precision=precision,
        flops=flops,
    )
    benchmark.pedantic(engine_round(fed, model, cfg, executor), rounds=3, warmup_rounds=1)

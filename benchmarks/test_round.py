"""One full FedAvg round (50 samples per client, E = 1, B = 10) under the naive reference loop
and both executors, at 10 and 100 clients per round for TwoNN and TwoCNN and 1,000 for TwoNN;
and the vectorised TwoNN round at 100 clients per chunk size (how the default chunk compares)."""

import dataclasses

import pytest
from bench_lib import BATCH, LR, SAMPLES_PER_CLIENT, RoundCase, engine_round, synced
from bench_naive import client_loaders, naive_round

EXECUTORS = ("naive", "sequential", "vectorised")
# (timed rounds, warm-up rounds) per case: enough repeats for a stable minimum, within budget.
REPEATS = {
    ("twonn", 10): (15, 2),
    ("twonn", 100): (5, 1),
    ("twocnn", 10): (3, 1),
    ("twocnn", 100): (2, 1),
}
CASES = [("twonn", 10), ("twonn", 100), ("twonn", 1000), ("twocnn", 10), ("twocnn", 100)]
CHUNKS = (5, 10, 25, 50, 100)  # beside the default (None: the memory budget and CPU cache)


# The naive loop at 1,000 clients keeps 1,000 state_dicts for its average and takes minutes a
# round even at one batch a client: that case compares the two executors only.
PARAMS = [
    (arch, clients, executor)
    for arch, clients in CASES
    for executor in EXECUTORS
    if not (clients == 1000 and executor == "naive")
]


@pytest.mark.parametrize("arch,clients,executor", PARAMS)
def test_round(benchmark, arch, clients, executor):
    # Disabled (CI's plain run of each body): one batch per client, the same code paths at a fifth
    # of the cost; enabled, the 50 samples per client the targets are stated on.
    case = RoundCase(arch, clients, SAMPLES_PER_CLIENT if benchmark.enabled else BATCH)
    fed, model, cfg, flops = case.build()
    if executor == "naive":
        loaders = client_loaders(fed, cfg.batch_size)

        @synced
        def fn():
            return naive_round(model, loaders, LR, cfg.local_epochs)
    else:
        fn = engine_round(fed, model, cfg, executor)
    rounds, warmup = REPEATS.get((arch, clients), (1, 1))
    benchmark.extra_info.update(
        kind="round", arch=arch, clients=clients, executor=executor, flops=flops
    )
    benchmark.pedantic(fn, rounds=rounds, warmup_rounds=warmup)


@pytest.mark.parametrize("chunk", [None, *CHUNKS])
def test_chunk(benchmark, chunk):
    case = RoundCase("twonn", 100, SAMPLES_PER_CLIENT if benchmark.enabled else BATCH)
    fed, model, cfg, flops = case.build()
    fn = engine_round(fed, model, dataclasses.replace(cfg, chunk_size=chunk), "vectorised")
    benchmark.extra_info.update(kind="chunk", arch="twonn", clients=100, chunk=chunk or "default")
    state = benchmark.pedantic(fn, rounds=5, warmup_rounds=1)
    benchmark.extra_info["resolved"] = state.executor_info["chunk_size"]
    assert chunk is None or state.executor_info["chunk_size"] == chunk


@pytest.mark.parametrize("clients", [10, 100])
@pytest.mark.parametrize("conv_kernel", ["channels_last", "gemm", "fastest"])
def test_conv_kernel(benchmark, conv_kernel, clients):
    """The vectorised TwoCNN round with training.conv_kernel channels_last, gemm or fastest
    (per_client, the default, is test_round's case)."""
    case = RoundCase("twocnn", clients, SAMPLES_PER_CLIENT if benchmark.enabled else BATCH)
    fed, model, cfg, _ = case.build()
    fn = engine_round(fed, model, dataclasses.replace(cfg, conv_kernel=conv_kernel), "vectorised")
    benchmark.extra_info.update(
        kind="conv_kernel", arch="twocnn", clients=clients, conv_kernel=conv_kernel
    )
    state = benchmark.pedantic(fn, rounds=3 if clients == 10 else 2, warmup_rounds=1)
    conv = state.executor_info["vectorised_conv"]
    assert conv["setting"] == conv_kernel
    if conv_kernel == "fastest":
        benchmark.extra_info["chosen"] = {
            name: sorted({p["kernel"] for p in probes}) for name, probes in conv["layers"].items()
        }

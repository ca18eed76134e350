"""One full FedAvg round (50 samples per client, E = 1, B = 10) under the naive reference loop
and both executors, at 10 and 100 clients per round, for TwoNN and TwoCNN."""

import pytest
from bench_lib import BATCH, LR, SAMPLES_PER_CLIENT, RoundCase, engine_round
from bench_naive import client_loaders, naive_round

EXECUTORS = ("naive", "sequential", "vectorised")
# (timed rounds, warm-up rounds) per case: enough repeats for a stable minimum, within budget.
REPEATS = {("twonn", 10): (15, 2), ("twonn", 100): (5, 1), ("twocnn", 10): (3, 1)}


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("clients", [10, 100])
@pytest.mark.parametrize("arch", ["twonn", "twocnn"])
def test_round(benchmark, arch, clients, executor):
    # Disabled (CI's plain run of each body): one batch per client, the same code paths at a fifth
    # of the cost; enabled, the 50 samples per client the targets are stated on.
    case = RoundCase(arch, clients, SAMPLES_PER_CLIENT if benchmark.enabled else BATCH)
    fed, model, cfg, flops = case.build()
    if executor == "naive":
        loaders = client_loaders(fed, cfg.batch_size)

        def fn():
            return naive_round(model, loaders, LR, cfg.local_epochs)
    else:
        fn = engine_round(fed, model, cfg, executor)
    rounds, warmup = REPEATS.get((arch, clients), (1, 1))
    benchmark.extra_info.update(
        kind="round", arch=arch, clients=clients, executor=executor, flops=flops
    )
    benchmark.pedantic(fn, rounds=rounds, warmup_rounds=warmup)

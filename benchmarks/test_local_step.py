"""One local SGD step (batch 10) through the engine's step loop, for every registered model."""

import time

import pytest
from bench_lib import (
    BATCH,
    DEVICE,
    build_for,
    federation,
    model_input,
    registered_models,
    synced,
    train_flops,
)

from fedbench.algorithms import build_algorithm
from fedbench.engine.functional import make_apply, params_of
from fedbench.engine.local import local_train

TIME_PER_MODEL = 0.5  # seconds of timed rounds per model (at least 3 rounds)


@pytest.mark.parametrize("arch", registered_models())
def test_local_step(benchmark, arch):
    spec = model_input(arch)
    fed = federation(
        1, per_client=BATCH, shape=spec.shape, values=spec.values, classes=spec.classes
    )
    model = build_for(arch).to(DEVICE)
    apply, params = make_apply(model), params_of(model)
    algo = build_algorithm("fedavg")
    batches = [fed.train[0]]
    benchmark.extra_info.update(
        kind="local_step",
        arch=arch,
        input=list(spec.shape),
        values=spec.values,
        classes=spec.classes,
        params=sum(v.numel() for v in params.values()),
        flops=train_flops(model, spec.shape, BATCH, spec.values),
    )
    args = (algo, apply, params, {}, fed.x, fed.y, batches, 0.01, 0.0, 0.0)
    rounds = 1
    if benchmark.enabled:  # disabled, pedantic runs the step once as a plain test: no estimate
        started = time.perf_counter()
        synced(local_train)(*args)  # warm-up, and a time estimate for the number of rounds
        once = time.perf_counter() - started
        rounds = int(min(max(TIME_PER_MODEL / max(once, 1e-6), 3), 200))
    benchmark.pedantic(synced(local_train), args, rounds=rounds, warmup_rounds=1)

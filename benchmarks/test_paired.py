"""The targets' ratios measured in pairs: the variants a target compares (naive loop, sequential
and vectorised executors; fp32 and bf16) run in turn, round after round, in one benchmark.

On a shared VM a round's time drifts by 20-30 % within seconds (the same sequential TwoCNN round
took 5.0, 6.1 and 6.0 s in three consecutive calls), so two best-of minima measured minutes
apart (test_round.py, test_precision.py) can disagree on which variant is faster. Here the
variants alternate (a, b, c, a, b, c, ...), so each repetition's variants share the machine's
state; the summary's targets read the median over repetitions of each repetition's ratio. The
per-variant times are in the benchmark's extra_info ("times"); pytest-benchmark's own statistic
is the time of the whole alternation.
"""

import copy
import time

import numpy as np
import pytest
import torch
from bench_lib import (
    BATCH,
    DEVICE,
    LR,
    SAMPLES_PER_CLIENT,
    PrecisionCase,
    RoundCase,
    build_for,
    engine_round,
    model_input,
    sample_inputs,
    synced,
)
from bench_naive import client_loaders, naive_round, plain_steps

# (arch, clients): repetitions of the alternation when enabled (after one warm-up alternation).
EXECUTOR_CASES = {("twonn", 10): 9, ("twonn", 100): 5, ("twocnn", 10): 5, ("twocnn", 100): 3}
# (arch, executor, clients, samples per client): fp32 vs bf16, as test_precision.py's cases.
PRECISION_CASES = {("twocnn", "vectorised", 10, 50): 5, ("resnet9", "sequential", 10, 20): 5}
# arch: repetitions of the bf16 ceiling's alternation (plain-PyTorch steps at batch B; each
# variant takes CEILING_STEPS steps a repetition).
CEILING_CASES = {"twocnn": 5, "resnet9": 5}
CEILING_STEPS = 10
# (name, dtype, memory format) of the ceiling's variants: the whole model in that dtype and layout.
CEILING_VARIANTS = (
    ("fp32", torch.float32, torch.contiguous_format),
    ("fp32_cl", torch.float32, torch.channels_last),
    ("bf16", torch.bfloat16, torch.contiguous_format),
    ("bf16_cl", torch.bfloat16, torch.channels_last),
)


def _alternate(fns: dict, repeats: int) -> dict[str, list[float]]:
    """Each callable once per repetition, in turn, after one untimed warm-up of each."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return times


@pytest.mark.parametrize("arch,clients", list(EXECUTOR_CASES))
def test_executors_paired(benchmark, arch, clients):
    # Disabled (CI's plain run of each body): one batch a client, one repetition.
    per_client = SAMPLES_PER_CLIENT if benchmark.enabled else BATCH
    repeats = EXECUTOR_CASES[(arch, clients)] if benchmark.enabled else 1
    case = RoundCase(arch, clients, per_client)
    fed, model, cfg, _ = case.build()
    # The naive loop overwrites its model's weights each round: its own copy, so the engine's
    # rounds start from the same initial weights every time.
    naive_model = case.build()[1]
    loaders = client_loaders(fed, cfg.batch_size)
    fns = {
        "naive": synced(lambda: naive_round(naive_model, loaders, cfg.lr, cfg.local_epochs)),
        "sequential": engine_round(fed, model, cfg, "sequential"),
        "vectorised": engine_round(fed, model, cfg, "vectorised"),
    }
    out: dict[str, list[float]] = {}
    benchmark.pedantic(lambda: out.update(_alternate(fns, repeats)), rounds=1, iterations=1)
    assert all(len(t) == repeats and min(t) > 0 for t in out.values())
    benchmark.extra_info.update(
        kind="paired_executors", arch=arch, clients=clients, per_client=per_client, times=out
    )


@pytest.mark.parametrize("arch,executor,clients,samples", list(PRECISION_CASES))
def test_precision_paired(benchmark, arch, executor, clients, samples):
    repeats = PRECISION_CASES[(arch, executor, clients, samples)] if benchmark.enabled else 1
    if not benchmark.enabled:
        clients, samples = 2, BATCH
    fns = {}
    for precision in ("fp32", "bf16"):
        fed, model, cfg, _ = PrecisionCase(arch, clients, samples, precision).build()
        fns[precision] = engine_round(fed, model, cfg, executor)
    out: dict[str, list[float]] = {}
    benchmark.pedantic(lambda: out.update(_alternate(fns, repeats)), rounds=1, iterations=1)
    assert all(len(t) == repeats and min(t) > 0 for t in out.values())
    benchmark.extra_info.update(
        kind="paired_precision",
        arch=arch,
        executor=executor,
        clients=clients,
        samples=samples,
        device=DEVICE.type,
        times=out,
    )


@pytest.mark.parametrize("arch", list(CEILING_CASES))
def test_bf16_ceiling_paired(benchmark, arch):
    """What bf16 can give a step on this device at most: the whole model (weights, activations,
    gradients) in bfloat16, in NCHW and in channels-last, beside float32 in both layouts, each
    taking the same plain-PyTorch SGD steps on one batch of B. training.precision bf16 keeps
    float32 master weights and casts every step, so its speed-up over fp32 stays below this."""
    repeats = CEILING_CASES[arch] if benchmark.enabled else 1
    steps = CEILING_STEPS if benchmark.enabled else 1
    spec = model_input(arch)
    rng = np.random.default_rng(0)
    x = torch.from_numpy(sample_inputs(spec.shape, BATCH, rng, spec.values)).to(DEVICE)
    y = torch.from_numpy(rng.integers(0, spec.classes, BATCH)).to(DEVICE)
    base = build_for(arch).to(DEVICE).train()
    fns = {}
    for name, dtype, layout in CEILING_VARIANTS:
        model = copy.deepcopy(base).to(dtype=dtype, memory_format=layout)
        xv = x.to(dtype).contiguous(memory_format=layout)
        fns[name] = synced(lambda m=model, xv=xv: plain_steps(m, xv, y, LR, steps))
    out: dict[str, list[float]] = {}
    benchmark.pedantic(lambda: out.update(_alternate(fns, repeats)), rounds=1, iterations=1)
    assert all(len(t) == repeats and min(t) > 0 for t in out.values())
    benchmark.extra_info.update(
        kind="paired_ceiling", arch=arch, steps=steps, batch=BATCH, device=DEVICE.type, times=out
    )

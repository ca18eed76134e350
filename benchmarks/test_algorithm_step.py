"""One local step of every registered algorithm (its own objective: prox loops, priors, two
models, ...) on pFedBreD's 784-100-10 DNN at batch 20, through the engine's step loop.

The per-algorithm counterpart of test_local_step.py (which runs FedAvg on every model): the inner
loops of pFedMe and pFedBreD make their steps several times FedAvg's.
"""

import time

import pytest
import torch
from bench_lib import NUM_CLASSES, federation

from fedbench.algorithms import ALGORITHMS, build_algorithm
from fedbench.algorithms.base import ClientContext, ServerSetup
from fedbench.algorithms.opt_in import LocalSteps, OwnNetwork, opt_in
from fedbench.engine.functional import make_apply, params_of
from fedbench.engine.local import local_train
from fedbench.models import build_model

BATCH = 20
SHAPE = (1, 28, 28)
TIME_PER_ALGORITHM = 0.5  # seconds of timed rounds (at least 3)
# Settings a benchmark needs: FedEvg's FID reads Inception weights that a CI machine lacks (and
# is not part of a local step).
PARAMS = {"fedevg": {"fid": "none"}}


# FedCGAN and FedCVAE train their own generative networks, not this DNN:
# test_fedevg_round.py::test_baseline_round times their rounds.
OWN_NETWORK = {n for n in ALGORITHMS if getattr(ALGORITHMS[n], "ARCH", "")}


@pytest.mark.parametrize("name", sorted(set(ALGORITHMS) - OWN_NETWORK))
def test_algorithm_step(benchmark, name):
    fed = federation(1, per_client=BATCH, shape=SHAPE)
    model = build_model("pfedbred_dnn", SHAPE, NUM_CLASSES, init_seed=0)
    algo = build_algorithm(name, **PARAMS.get(name, {}))
    init = params_of(model)
    gen = torch.Generator().manual_seed(0)

    def fresh():
        return {k: 0.1 * torch.randn(v.shape, generator=gen) for k, v in init.items()}

    # As the engine starts a run: the algorithm's own network and round-1 global parameters.
    own = opt_in(algo, OwnNetwork)
    apply = own.model(make_apply(model))
    g = own.init_global(init, lambda i: fresh(), torch.Generator().manual_seed(2), 1)

    ctx = ClientContext(
        0, 1, 0.01, 10, num_train=BATCH, num_steps=1, steps_per_epoch=1, pre_loss=1.0,
        batch_size=BATCH, algorithm_stream=lambda *key: torch.Generator().manual_seed(3),
        apply=apply, fresh=fresh, input_shape=SHAPE, num_classes=NUM_CLASSES,
    )  # fmt: skip
    state = algo.init_client_state(0, g, fresh)
    server = algo.init_server_state(g, ServerSetup(SHAPE, NUM_CLASSES, torch.Generator()))
    params, carry = algo.client_begin(g, server, state, ctx)
    noise = opt_in(algo, LocalSteps).step_noise(torch.Generator().manual_seed(1), ctx, g)
    if isinstance(noise, dict):
        noise = {k: v[:1] for k, v in noise.items()}
    elif noise is not None:
        noise = noise[:1]
    args = (algo, apply, params, carry, fed.x, fed.y, [fed.train[0]], 0.01, 0.0, 0.0, noise)
    benchmark.extra_info.update(
        kind="algorithm_step", algorithm=name, arch="pfedbred_dnn", batch=BATCH,
        params=sum(v.numel() for v in g.values()),
    )  # fmt: skip
    started = time.perf_counter()
    local_train(*args)  # warm-up, and a time estimate for the number of rounds
    once = time.perf_counter() - started
    rounds = int(min(max(TIME_PER_ALGORITHM / max(once, 1e-6), 3), 200))
    benchmark.pedantic(local_train, args, rounds=rounds, warmup_rounds=1)

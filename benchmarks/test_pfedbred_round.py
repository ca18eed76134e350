"""One pFedBreD round on its MNIST DNN (784-100-10) with K = 100 clients that all train
(train_all, the release), R = 20 local steps of B = 20: the engine's heaviest per-step objective
(prior, K prox steps, envelope; FT adds one gradient), under the vectorised executor (the one
`auto` picks for this model)."""

import pytest
from bench_lib import DEVICE, NUM_CLASSES, federation, synced

from fedbench.algorithms import build_algorithm
from fedbench.engine.build import Run
from fedbench.engine.functional import make_apply, params_of
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.models import build_model
from fedbench.rng import Streams

SHAPE = (1, 28, 28)
CLIENTS = 100
STEPS = 20


@pytest.mark.parametrize("ft", [False, True])
def test_pfedbred_round(benchmark, ft):
    fed = federation(CLIENTS, per_client=100, shape=SHAPE)
    model = build_model("pfedbred_dnn", SHAPE, NUM_CLASSES, init_seed=0).to(DEVICE)
    apply, p0 = make_apply(model), params_of(model)
    # Disabled (CI's plain run of each body): R = 2, the same code paths at a tenth of the cost.
    steps = STEPS if benchmark.enabled else 2
    cfg = TrainConfig(rounds=1, batch_size=20, lr=0.01, local_steps=steps, clients_per_round=20)
    algo = build_algorithm("pfedbred", ft=ft)
    benchmark.extra_info.update(
        kind="pfedbred_round", executor="vectorised", ft=ft, clients=CLIENTS, steps=steps
    )
    benchmark.pedantic(
        synced(run_rounds), (Run(algo, apply, cfg, p0, "vectorised"), fed, Streams(0)),
        rounds=3, warmup_rounds=1,
    )  # fmt: skip

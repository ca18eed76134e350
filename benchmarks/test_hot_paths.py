"""Per-round hot paths: one local step, one aggregation, one FedAvg round (sequential executor)."""

import numpy as np
import pytest
import torch

from fedbench.algorithms import build_algorithm
from fedbench.engine.config import TrainConfig
from fedbench.engine.federation import Federation
from fedbench.engine.functional import make_apply, params_of, stack_trees
from fedbench.engine.local import local_train
from fedbench.engine.loop import run_rounds
from fedbench.models import build_model
from fedbench.rng import Streams

torch.set_num_threads(2)


def _federation(num_clients, per_client=50, shape=(1, 28, 28)):
    rng = np.random.default_rng(0)
    n = num_clients * per_client
    x = rng.random((n, *shape), dtype=np.float32)
    y = rng.integers(0, 10, n)
    idx = np.arange(n).reshape(num_clients, per_client)
    empty = np.zeros((0, *shape), np.float32)
    return Federation.from_arrays(
        x,
        y,
        list(idx),
        [i[:0] for i in idx],
        empty,
        np.zeros(0, np.int64),
        10,
        torch.device("cpu"),
    )


@pytest.mark.parametrize("arch", ["twonn", "twocnn"])
def test_local_step(benchmark, arch):
    fed = _federation(1)
    model = build_model(arch, (1, 28, 28), 10, init_seed=0)
    apply, params = make_apply(model), params_of(model)
    algo = build_algorithm("fedavg")
    batches = [fed.train[0][:10]]
    benchmark(local_train, algo, apply, params, {}, fed.x, fed.y, batches, 0.01, 0.0, 0.0)


@pytest.mark.parametrize("clients", [10, 1000])
@pytest.mark.parametrize("algorithm", ["fedavg", "scaffold"])
def test_aggregation(benchmark, clients, algorithm):
    model = build_model("twonn", (1, 28, 28), 10, init_seed=0)
    g = params_of(model)
    algo = build_algorithm(algorithm)
    deltas = stack_trees([{k: torch.randn_like(v) * 0.01 for k, v in g.items()}] * clients)
    messages = {"delta": deltas, "weight": torch.ones(clients, dtype=torch.float64)}
    if algorithm == "scaffold":
        messages["delta_c"] = deltas
    from fedbench.algorithms.base import ServerContext

    ctx = ServerContext(round=1, num_clients=clients, client_ids=tuple(range(clients)), lr=0.1)
    state = algo.init_server_state(g)
    benchmark(algo.aggregate, g, messages, state, ctx)


@pytest.mark.parametrize("arch", ["twonn", "twocnn"])
@pytest.mark.parametrize("clients", [10])
def test_fedavg_round(benchmark, arch, clients):
    fed = _federation(clients)
    model = build_model(arch, (1, 28, 28), 10, init_seed=0)
    cfg = TrainConfig(
        rounds=1, batch_size=10, lr=0.01, local_epochs=1, clients_per_round=clients, eval_every=10
    )
    algo, apply, p0 = build_algorithm("fedavg"), make_apply(model), params_of(model)
    benchmark(run_rounds, algo, apply, fed, cfg, Streams(0), p0)

"""fedbench/engine/server_training.py: the server's own training (the ServerTraining capability)
is the engine's: one Adam loop, on the run's network or on one the algorithm names."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F

from fedbench.algorithms.base import Algorithm, ServerContext
from fedbench.algorithms.opt_in import ServerFit, ServerNetwork, ServerTraining
from fedbench.engine.functional import params_of
from fedbench.engine.server_training import fit, server_net, train_server
from fedbench.models import build_model


def linear(params, x):
    return x @ params["w"].T + params["b"]


def test_one_full_batch_step_is_adams_first_step_on_the_cross_entropy_gradient():
    """Adam's first step is −lr·g/(|g| + ε) (bias corrections cancel): from zero weights the
    logits are uniform, so ∂CE/∂W = (softmax − onehot)ᵀx / n, computed here by hand."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 3, generator=g, dtype=torch.float64)
    y = torch.tensor([0, 1, 2, 0, 1])
    init = {"w": torch.zeros(3, 3, dtype=torch.float64), "b": torch.zeros(3, dtype=torch.float64)}
    task = ServerFit(x, y, epochs=1, batch=5, lr=0.01, init=init)
    out = fit(task, linear, init, torch.Generator().manual_seed(1))
    resid = torch.full((5, 3), 1 / 3, dtype=torch.float64) - F.one_hot(y, 3)
    grad_w, grad_b = resid.T @ x / 5, resid.mean(0)
    torch.testing.assert_close(out["w"], -0.01 * grad_w / (grad_w.abs() + 1e-8))
    torch.testing.assert_close(out["b"], -0.01 * grad_b / (grad_b.abs() + 1e-8))
    assert torch.equal(init["w"], torch.zeros(3, 3, dtype=torch.float64))  # init untouched


def test_the_orders_come_from_the_given_stream():
    x, y = torch.randn(8, 3), torch.arange(8) % 3
    init = {"w": torch.zeros(3, 3), "b": torch.zeros(3)}
    task = ServerFit(x, y, epochs=2, batch=3, lr=0.1, init=init)

    def run(seed):
        return fit(task, linear, init, torch.Generator().manual_seed(seed))

    a, b, c = run(4), run(4), run(5)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a)


@dataclass(frozen=True)
class OwnClassifier(ServerTraining, Algorithm):
    """FedAvg whose server trains a classifier of its own on two rows, kept in its state."""

    name = "own_classifier"

    def server_network(self):
        return ServerNetwork("fedevg_resnet10", {"hidden": 4, "activation": "relu"})

    def server_fit(self, global_params, server_state, ctx):
        x = torch.rand(2, 1, 8, 8, generator=ctx.rng)
        return ServerFit(x, torch.tensor([0, 1]), epochs=1, batch=2, lr=1e-3, seed=7)

    def server_fitted(self, fit, params, state, ctx):
        return None, {**state, "classifier": params, "x": fit.x}


def test_a_network_of_its_own_is_built_by_the_engine_from_the_tasks_seed():
    algo = OwnClassifier()
    net = server_net(algo, (1, 8, 8), 2, torch.device("cpu"))
    assert net is not None and server_net(Algorithm(), (1, 8, 8), 2, torch.device("cpu")) is None
    want0 = params_of(build_model("fedevg_resnet10", (1, 8, 8), 2, 7, hidden=4, activation="relu"))
    assert all(torch.equal(net.init(7)[k], want0[k]) for k in want0)
    ctx = ServerContext(round=1, num_clients=1, client_ids=(0,), lr=0.1)
    with pytest.raises(ValueError, match="ServerContext.rng"):
        train_server(algo, {}, {}, ctx, net)
    ctx = ServerContext(**{**ctx.__dict__, "rng": torch.Generator().manual_seed(3)})
    glob = {"w": torch.ones(1)}
    kept, state = train_server(algo, glob, {}, ctx, net)
    assert kept is glob
    # The same fit by hand: the task's rows drawn first from the stream, then its orders.
    rng = torch.Generator().manual_seed(3)
    x = torch.rand(2, 1, 8, 8, generator=rng)
    assert torch.equal(state["x"], x)
    task = ServerFit(x, torch.tensor([0, 1]), epochs=1, batch=2, lr=1e-3, seed=7)
    want = fit(task, net.apply, want0, rng)
    assert all(torch.equal(state["classifier"][k], want[k]) for k in want)
    assert any(not torch.equal(want[k], want0[k]) for k in want)


def test_fedavg_trains_nothing_on_the_server():
    ctx = ServerContext(
        round=1, num_clients=1, client_ids=(0,), lr=0.1, rng=torch.Generator().manual_seed(0)
    )
    glob, state = {"w": torch.ones(1)}, {"k": 1}
    assert train_server(Algorithm(), glob, state, ctx, None) == (glob, state)

"""DQN-Fed in the engine (specs/qffl-dqnfed.md §B.3): one client at round 1 is one full-gradient
step (FedAvg's full-batch GD at lr 1); at round 2 its decrement is the inverse-BFGS value of
full-pass gradients at θ^t and θ^{t−1} computed by hand; the server's step meets every client's
decrement (G u = d̃, Thm 4.1); E = 2 adds the local SGD epoch's pair (B.3.7) by hand, either
gradient sent (B-D5); both executors agree."""

import pytest
import torch

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import ServerContext
from fedbench.algorithms.dqnfed_math import curvature_ok, decrement
from fedbench.engine.build import Run
from fedbench.engine.functional import make_apply, params_of
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.models import build_model
from fedbench.rng import Streams


def _cfg(**kw):
    base = dict(rounds=1, batch_size=4, lr=0.1, local_epochs=1, participation=1.0)
    return TrainConfig(**{**base, **kw})


def _pass_grad(apply, params, x, y, batches):
    """The mean of the batches' mean-loss gradients (the client's pass)."""
    total = {k: torch.zeros_like(v) for k, v in params.items()}
    for idx in batches:
        leaves = {k: v.clone().requires_grad_() for k, v in params.items()}
        loss = torch.nn.functional.cross_entropy(apply(leaves, x[idx]), y[idx])
        for k, g in zip(leaves, torch.autograd.grad(loss, list(leaves.values()))):
            total[k] += g
    return {k: v / len(batches) for k, v in total.items()}


def _flat(tree, keys):
    return torch.cat([tree[k].reshape(-1) for k in keys]).double()


@pytest.fixture
def solo(federation_factory):
    fed = federation_factory(num_clients=1, per_client=16)
    model = build_model("mlp", (6,), 3, init_seed=1, hidden=5)
    return fed, make_apply(model), params_of(model)


@pytest.mark.parametrize("executor", ["sequential", "vectorised"])
def test_one_client_steps_by_its_gradient_then_by_its_quasi_newton_decrement(solo, executor):
    fed, apply, p0 = solo
    cfg = _cfg(batch_size=len(fed.train[0]))  # full batch: one step a round
    algo = build_algorithm("dqnfed")
    idx = [fed.train[0]]
    r1 = run_rounds(Run(algo, apply, cfg, p0, executor=executor), fed, Streams(0))
    g0 = _pass_grad(apply, p0, fed.x, fed.y, idx)
    # Round 1: no curvature pair, d̃ = ‖g‖², u = d̃·g/‖g‖² = g (FedAvg's full GD at lr 1).
    p1 = {k: p0[k] - g0[k] for k in p0}
    for k in p0:
        torch.testing.assert_close(r1.global_params[k], p1[k], rtol=1e-5, atol=1e-6)
    r2 = run_rounds(
        Run(algo, apply, _cfg(rounds=2, batch_size=cfg.batch_size), p0, executor=executor),
        fed,
        Streams(0),
    )
    keys = list(p0)
    g1 = _pass_grad(apply, p1, fed.x, fed.y, idx)
    s = _flat(p1, keys) - _flat(p0, keys)
    y = _flat(g1, keys) - _flat(g0, keys)
    assert curvature_ok(s, y)
    h0 = float(s @ y) / float(y @ y)
    rho = 1.0 / float(s @ y)
    gf = _flat(g1, keys)
    d = h0 * float((gf - rho * float(s @ gf) * y).norm() ** 2) + rho * float(s @ gf) ** 2
    assert decrement(gf, [(s, y)]) == pytest.approx(d, rel=1e-9)
    want = {k: p1[k] - d * g1[k] / float(gf @ gf) for k in keys}
    for k in keys:
        torch.testing.assert_close(r2.global_params[k], want[k], rtol=1e-4, atol=1e-5)
    server = r2.records[-1]["server"]
    assert server["d_min"] == pytest.approx(d, rel=1e-4)
    assert server["eta"] == pytest.approx(d**2 / float(gf @ gf), rel=1e-4)  # η = ‖u‖²


def test_the_server_step_meets_every_clients_decrement():
    gen = torch.Generator().manual_seed(0)
    g0 = {"w": torch.randn(4, 5, generator=gen), "b": torch.randn(5, generator=gen)}
    grads = {k: torch.randn((3, *v.shape), generator=gen) for k, v in g0.items()}
    d = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)
    algo = build_algorithm("dqnfed")
    state = algo.init_server_state(g0)
    ctx = ServerContext(round=1, num_clients=3, client_ids=(0, 1, 2), lr=0.1)
    messages = {"grad": grads, "d": d, "weight": torch.ones(3, dtype=torch.float64)}
    new, new_state = algo.aggregate(g0, messages, state, ctx)
    keys = list(g0)
    u = _flat(g0, keys) - _flat(new, keys)
    G = torch.cat([grads[k].flatten(1) for k in keys], 1).double()
    torch.testing.assert_close(G @ u, d, rtol=1e-5, atol=1e-6)
    assert new_state["prev"]["w"] is g0["w"]  # θ^{t−1} for the next round's pairs
    half, _ = build_algorithm("dqnfed", server_lr_scale=0.5).aggregate(g0, messages, state, ctx)
    torch.testing.assert_close(_flat(g0, keys) - _flat(half, keys), u / 2)
    capped, s2 = build_algorithm("dqnfed", max_update_norm=0.1).aggregate(g0, messages, state, ctx)
    assert float((_flat(g0, keys) - _flat(capped, keys)).norm()) == pytest.approx(0.1, rel=1e-5)
    assert s2["update_norm"] == pytest.approx(0.1, rel=1e-6)


def _by_hand_e2(apply, p0, x, y, idx, lr, rounds, send):
    """E = 2 by B.3.7: pass at θ^t (pairs with θ^{t−1}), one SGD epoch, pass at θ̂^2."""
    keys = list(p0)
    prev, theta = p0, p0
    for _ in range(rounds):
        g0 = _pass_grad(apply, theta, x, y, idx)
        gp = _pass_grad(apply, prev, x, y, idx)
        hat = {k: theta[k] - lr * g0[k] for k in keys}  # full batch: the epoch is one step
        g1 = _pass_grad(apply, hat, x, y, idx)
        pairs = []
        for s, yy in [
            (_flat(theta, keys) - _flat(prev, keys), _flat(g0, keys) - _flat(gp, keys)),
            (_flat(hat, keys) - _flat(theta, keys), _flat(g1, keys) - _flat(g0, keys)),
        ]:
            if curvature_ok(s, yy):
                pairs.append((s, yy))
        sent = g1 if send == "last_grad" else {k: (theta[k] - hat[k]) / lr for k in keys}
        gf = _flat(sent, keys)
        d = decrement(gf, pairs)
        prev, theta = theta, {k: theta[k] - d * sent[k] / float(gf @ gf) for k in keys}
    return theta, len(pairs)


@pytest.mark.parametrize("send", ["last_grad", "pseudo_grad"])
@pytest.mark.parametrize("executor", ["sequential", "vectorised"])
def test_two_local_epochs_add_the_pair_of_a_local_sgd_epoch(solo, executor, send):
    fed, apply, p0 = solo
    full = len(fed.train[0])
    algo = build_algorithm("dqnfed", send=send)
    for rounds, n_pairs in [(1, 1), (2, 2)]:  # round 1 has no θ^{t−1}: only the local pair
        cfg = _cfg(rounds=rounds, batch_size=full, local_epochs=2)
        got = run_rounds(Run(algo, apply, cfg, p0, executor=executor), fed, Streams(0))
        want, kept = _by_hand_e2(apply, p0, fed.x, fed.y, [fed.train[0]], 0.1, rounds, send)
        assert kept == n_pairs
        for k in p0:
            torch.testing.assert_close(got.global_params[k], want[k], rtol=1e-4, atol=1e-5)


def test_two_local_epochs_with_minibatches_agree_across_executors(tiny):
    fed, apply, p0 = tiny
    cfg = _cfg(rounds=2, local_epochs=2)
    seq = run_rounds(
        Run(build_algorithm("dqnfed"), apply, cfg, p0, executor="sequential"), fed, Streams(0)
    )
    vec = run_rounds(
        Run(build_algorithm("dqnfed"), apply, cfg, p0, executor="vectorised"), fed, Streams(0)
    )
    for k in p0:
        torch.testing.assert_close(seq.global_params[k], vec.global_params[k], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "kw, key",
    [({"bfgs_form": "dense"}, "bfgs_form"), ({"server_lr_scale": 0}, "server_lr_scale"),
     ({"max_update_norm": -1.0}, "max_update_norm"), ({"ridge_eps": -1.0}, "ridge_eps"),
     ({"send": "delta"}, "send")],
)  # fmt: skip
def test_bad_settings_name_their_key(kw, key):
    with pytest.raises(ValueError, match=key):
        build_algorithm("dqnfed", **kw)


def test_an_overflowing_run_stops_as_diverged_not_with_an_error(tiny):
    fed, apply, p0 = tiny
    algo = build_algorithm("dqnfed", server_lr_scale=1e30)  # θ blows up, then its gradients
    run = run_rounds(Run(algo, apply, _cfg(rounds=6), p0), fed, Streams(0))
    assert run.status == "diverged" and run.diverged_round is not None

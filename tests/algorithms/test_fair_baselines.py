"""Fair-FL baselines and server optimisers: hand-computed coefficients, FedAvg equivalences."""

import dataclasses
import math

import numpy as np
import pytest
import torch

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import ServerContext
from fedbench.algorithms.fair_baselines import (
    afl_step,
    fedmgda_weights,
    propfair_loss,
    propfair_weights,
    qfedavg_update,
    term_weights,
)
from fedbench.algorithms.server_opt import server_step
from fedbench.engine.build import Run
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams


def _msgs(deltas, losses, sizes=None):
    d = torch.as_tensor(deltas, dtype=torch.float32)
    n = len(d)
    return {
        "delta": {"w": d},
        "weight": torch.as_tensor(sizes if sizes is not None else [1.0] * n, dtype=torch.float64),
        "pre_loss": torch.as_tensor(losses, dtype=torch.float64),
    }


def _ctx(n, K=None, lr=0.1, ids=None):
    K = n if K is None else K
    return ServerContext(round=1, num_clients=K, client_ids=tuple(ids or range(n)), lr=lr)


# ---- q-FedAvg ----


def test_qfedavg_hand_example():
    # δ = θ_k - θ = [-0.1], [0.2]; L = 10: Δw = -Lδ = [1], [-2]; F = [1, 4], q = 1:
    # h = q F^0 ‖Δw‖² + L F = [1 + 10, 4 + 40] = [11, 44]; θ ← θ - (1·1 + 4·(-2)) / 55 = θ + 7/55.
    m = _msgs([[-0.1], [0.2]], [1.0, 4.0])
    up = qfedavg_update(m["delta"], m["pre_loss"], q=1.0, L=10.0)
    assert up["w"].item() == pytest.approx(7 / 55, rel=1e-6)
    algo = build_algorithm("qfedavg", q=1.0)
    new, state = algo.aggregate({"w": torch.zeros(1)}, m, {}, _ctx(2, lr=0.1))
    assert new["w"].item() == pytest.approx(7 / 55, rel=1e-6)
    # L stays the first round's 1/η even when the learning rate decays.
    again, _ = algo.aggregate({"w": torch.zeros(1)}, m, state, _ctx(2, lr=0.05))
    assert state["L"] == pytest.approx(10.0) and again["w"].item() == pytest.approx(7 / 55)


def test_qfedavg_q0_weighted_is_the_size_weighted_mean():
    # q = 0: h_k = L, so the update is Σ (n_k/n) L δ_k / Σ (n_k/n) L = FedAvg's mean.
    m = _msgs([[1.0], [4.0]], [0.3, 2.0], sizes=[3.0, 1.0])
    up = qfedavg_update(m["delta"], m["pre_loss"], q=0.0, L=7.0, sizes=m["weight"])
    assert up["w"].item() == pytest.approx((3 * 1 + 1 * 4) / 4)
    plain = qfedavg_update(m["delta"], m["pre_loss"], q=0.0, L=7.0)
    assert plain["w"].item() == pytest.approx((1 + 4) / 2)  # the release: no n_k


CFG = TrainConfig(rounds=2, batch_size=4, lr=0.1, local_epochs=1, clients_per_round=3)


@pytest.mark.parametrize("weighted", [True, False])
def test_qfedavg_q0_equals_fedavg_through_the_engine(weighted, tiny):
    # The tiny federation's clients hold 9 training samples each, so the unweighted (release)
    # form also equals FedAvg; `weighted` equals it for any sizes.
    fed, apply, p0 = tiny
    cfg = dataclasses.replace(CFG, clients_per_round=3)
    a = run_rounds(
        Run(build_algorithm("fedavg"), apply, cfg, p0, executor="sequential"), fed, Streams(2)
    )
    q = build_algorithm("qfedavg", q=0.0, weighted=weighted)
    b = run_rounds(Run(q, apply, cfg, p0, executor="sequential"), fed, Streams(2))
    for k in a.global_params:
        torch.testing.assert_close(a.global_params[k], b.global_params[k], rtol=0, atol=1e-6)


# ---- TERM, AFL, PropFair, FedMGDA+ ----


def test_term_weights_hand_example():
    # λ = 1, F = [0, ln 2]: exp(λF) = [1, 2] -> [1/3, 2/3]; with n = [2, 1]: [2, 2] -> [1/2, 1/2].
    F = torch.tensor([0.0, math.log(2.0)], dtype=torch.float64)
    np.testing.assert_allclose(term_weights(F, 1.0).numpy(), [1 / 3, 2 / 3])
    np.testing.assert_allclose(term_weights(F, 1.0, torch.tensor([2.0, 1.0])).numpy(), [0.5, 0.5])
    algo = build_algorithm("term", lam=1.0)
    new, _ = algo.aggregate({"w": torch.zeros(1)}, _msgs([[3.0], [6.0]], F), {}, _ctx(2))
    assert new["w"].item() == pytest.approx(3 / 3 + 2 * 6 / 3)


def test_afl_projected_ascent_hand_example():
    # λ = [1/2, 1/2], γ = 0.1, F = [1, 3]: λ + γF = [0.6, 0.8]; projecting subtracts 0.2.
    lam = afl_step(np.array([0.5, 0.5]), np.array([1.0, 3.0]), np.array([0, 1]), 0.1)
    np.testing.assert_allclose(lam, [0.4, 0.6])
    algo = build_algorithm("afl", gamma=0.1)
    new, state = algo.aggregate(
        {"w": torch.zeros(1)}, _msgs([[1.0], [2.0]], [1.0, 3.0]), {}, _ctx(2)
    )
    assert new["w"].item() == pytest.approx(0.4 * 1 + 0.6 * 2)
    # A large step puts all weight on the worse client: [0.5 + 10, 0.5 + 30] -> [0, 1].
    lam = afl_step(np.array([0.5, 0.5]), np.array([1.0, 3.0]), np.array([0, 1]), 10.0)
    np.testing.assert_allclose(lam, [0.0, 1.0])


def test_propfair_loss_and_implied_weights():
    # M = 2: ℓ = 1 -> -log(1 - 1/2) = ln 2; ℓ = 1.9 (M - ℓ < 0.2) -> the linear branch 1.9/2.
    got = propfair_loss(torch.tensor([1.0, 1.9]), 2.0)
    np.testing.assert_allclose(got.numpy(), [math.log(2.0), 0.95], rtol=1e-6)
    # p ∝ n / (M - F): n = [1, 1], F = [0, 1], M = 2 -> [1/2, 1] -> [1/3, 2/3].
    w = propfair_weights(torch.tensor([0.0, 1.0]), 2.0, torch.tensor([1.0, 1.0]))
    np.testing.assert_allclose(w.numpy(), [1 / 3, 2 / 3])


def test_fedmgda_min_norm_hand_example():
    # d1 = e1, d2 = d3 = e2: ‖λ1 e1 + (λ2 + λ3) e2‖² is least at λ1 = 1/2, λ2 + λ3 = 1/2.
    d = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    lam = fedmgda_weights(d, eps=1.0)
    assert lam[0] == pytest.approx(0.5, abs=1e-9) and lam[1] + lam[2] == pytest.approx(0.5)
    # ε = 0.1 caps λ1 at 1/3 + 0.1: the rest (0.5667) goes to e2, each λ within [0.2333, 0.4333].
    lam = fedmgda_weights(d, eps=0.1)
    assert lam[0] == pytest.approx(1 / 3 + 0.1, abs=1e-9)
    assert lam[1] + lam[2] == pytest.approx(2 / 3 - 0.1, abs=1e-9)
    # The server steps along the normalised directions: updates [3, 0] and [0, 0.5] (norms 3 and
    # 0.5) with ε = 1 give λ = [1/2, 1/2] and the step 0.5 e1 + 0.5 e2, whatever their sizes.
    algo = build_algorithm("fedmgda", eps=1.0)
    m = _msgs([[3.0, 0.0], [0.0, 0.5]], [1.0, 1.0])
    new, _ = algo.aggregate({"w": torch.zeros(2)}, m, {}, _ctx(2))
    np.testing.assert_allclose(new["w"].numpy(), [0.5, 0.5], atol=1e-6)


def test_baselines_with_equal_losses_are_uniform():
    F = torch.full((4,), 0.8, dtype=torch.float64)
    np.testing.assert_allclose(term_weights(F, 10.0).numpy(), np.full(4, 0.25))
    lam = afl_step(np.full(4, 0.25), F.numpy(), np.arange(4), 1.0)
    np.testing.assert_allclose(lam, np.full(4, 0.25))
    np.testing.assert_allclose(propfair_weights(F, 3.0, torch.ones(4)).numpy(), np.full(4, 0.25))


# ---- server optimisers ----


def test_server_step_hand_values():
    p, u = {"w": torch.tensor([1.0])}, {"w": torch.tensor([0.5])}
    new, _ = server_step("sgd", p, u, {}, lr=2.0)
    assert new["w"].item() == pytest.approx(2.0)
    # avgm: m = 0.9·0 + 0.5, θ = 1 + 0.1·0.5; again: m = 0.45 + 0.5 = 0.95.
    new, st = server_step("avgm", p, u, {}, lr=0.1, beta1=0.9)
    assert new["w"].item() == pytest.approx(1.05)
    new, st = server_step("avgm", new, u, st, lr=0.1, beta1=0.9)
    assert new["w"].item() == pytest.approx(1.05 + 0.095)
    tau, b1, b2 = 1e-3, 0.9, 0.99
    m = (1 - b1) * 0.5
    v = {
        "adam": b2 * tau**2 + (1 - b2) * 0.25,
        "yogi": tau**2 - (1 - b2) * 0.25 * math.copysign(1.0, tau**2 - 0.25),
        "adagrad": tau**2 + 0.25,
    }
    for kind, vk in v.items():
        new, st = server_step(kind, p, u, {}, lr=0.1, beta1=b1, beta2=b2, tau=tau)
        assert new["w"].item() == pytest.approx(1.0 + 0.1 * m / (math.sqrt(vk) + tau), rel=1e-5)
        assert st["v"]["w"].item() == pytest.approx(vk, rel=1e-5)
    with pytest.raises(ValueError, match="adam"):
        server_step("lamb", p, u, {})


def test_fedopt_state_kept_or_reset():
    u = _msgs([[1.0]], [1.0])
    kept = build_algorithm("fedadam")
    reset = build_algorithm("fedadam", reset_server_state=True)
    s1 = s2 = {}
    g1 = g2 = {"w": torch.zeros(1)}
    for _ in range(3):
        g1, s1 = kept.aggregate(g1, u, s1, _ctx(1))
        g2, s2 = reset.aggregate(g2, u, s2, _ctx(1))
    # Reset: each round is a fresh first step of size lr·0.1/(√(0.999τ² + 0.001) + τ).
    first = 1e-2 * 0.1 / (math.sqrt(0.999 * 1e-8 + 0.001) + 1e-4)
    assert g2["w"].item() == pytest.approx(3 * first, rel=1e-5)
    assert g1["w"].item() > g2["w"].item()  # momentum builds up when the state is kept


def test_fedopt_sgd_lr1_equals_fedavg(tiny):
    fed, apply, p0 = tiny
    a = run_rounds(
        Run(build_algorithm("fedavg"), apply, CFG, p0, executor="sequential"), fed, Streams(4)
    )
    algo = build_algorithm("fedavgm", beta1=0.0, server_lr=1.0)
    b = run_rounds(Run(algo, apply, CFG, p0, executor="sequential"), fed, Streams(4))
    for k in a.global_params:
        torch.testing.assert_close(a.global_params[k], b.global_params[k], rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", ["term", "afl", "qfedavg", "fedmgda", "fedavgm", "aaggff_s"])
def test_server_lr_compensation_follows_the_client_decay(name):
    # Client lr 0.1 in round 1, 0.05 later (one decay by φ = 1/2): the release divides the server
    # lr by φ, so the same messages move the model twice as far; off, the step is unchanged.
    extra = {"beta1": 0.0} if name == "fedavgm" else {}
    m = _msgs([[1.0], [1.0]], [0.5, 0.5])  # equal updates and losses: every rule's step is 1·η
    steps = {}
    for on in (False, True):
        algo = build_algorithm(name, server_lr_compensation=on, **extra)
        glob, state = {"w": torch.zeros(1)}, {}
        glob, state = algo.aggregate(glob, m, state, _ctx(2, lr=0.1))
        first = glob["w"].item()
        glob, state = algo.aggregate(glob, m, state, _ctx(2, lr=0.05))
        steps[on] = (first, glob["w"].item() - first)
    assert steps[False][0] == pytest.approx(steps[False][1], rel=1e-6)
    assert steps[True][0] == pytest.approx(steps[False][0], rel=1e-6)
    assert steps[True][1] == pytest.approx(2 * steps[True][0], rel=1e-6)


def test_fedopt_uniform_weights():
    m = _msgs([[1.0], [4.0]], [1.0, 1.0], sizes=[3.0, 1.0])
    sized, _ = build_algorithm("fedadagrad", server_opt="sgd", server_lr=1.0).aggregate(
        {"w": torch.zeros(1)}, m, {}, _ctx(2)
    )
    uniform, _ = build_algorithm("propfair", uniform_weights=True).aggregate(
        {"w": torch.zeros(1)}, m, {}, _ctx(2)
    )
    assert sized["w"].item() == pytest.approx(7 / 4) and uniform["w"].item() == pytest.approx(2.5)


def test_fedprox_opt_composes_fedprox_and_the_server(tiny):
    # Defaults (squared prox, sgd at lr 1, size weights) are FedProx exactly; mu = 0 is FedAvg.
    fed, apply, p0 = tiny
    cfg = dataclasses.replace(CFG, rounds=1)
    runs = {
        name: run_rounds(
            Run(build_algorithm(name, **kw), apply, cfg, p0, "sequential"), fed, Streams(6)
        ).global_params
        for name, kw in (("fedprox", {"mu": 0.5}), ("fedprox_opt", {"mu": 0.5}))
    }  # fmt: skip
    for k, v in runs["fedprox"].items():
        torch.testing.assert_close(v, runs["fedprox_opt"][k], rtol=0, atol=1e-6)
    algo = build_algorithm("fedprox_opt", mu=0.1, uniform_weights=True)
    m = _msgs([[1.0], [4.0]], [1.0, 1.0], sizes=[3.0, 1.0])
    new, _ = algo.aggregate({"w": torch.zeros(1)}, m, {}, _ctx(2))
    assert new["w"].item() == pytest.approx(2.5)
    assert algo.local_loss.__func__ is build_algorithm("fedprox").local_loss.__func__

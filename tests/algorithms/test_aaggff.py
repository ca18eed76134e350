"""AAggFF-S / -D: CDFs, the exact simplex QP, the spec's worked numbers, DR unbiasedness, engine."""

import dataclasses
import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.aaggff import (
    AAggFFD,
    cdf,
    dr_estimate,
    dr_lipschitz,
    eg_decision,
    linearised_grad,
    ons_constants,
    ons_step,
    responses,
    sampled_weights,
)
from fedbench.algorithms.base import Batch, ServerContext
from fedbench.algorithms.simplex import project_simplex, qp_objective, simplex_qp
from fedbench.engine.build import Run
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams

# ---- CDFs (thesis §5.1 formulas, evaluated by hand at chosen points) ----


def test_cdfs_at_hand_points():
    x = np.array([0.5, 1.0, 2.0])
    np.testing.assert_allclose(cdf("weibull", x), 1 - np.exp(-np.array([0.25, 1.0, 4.0])))
    np.testing.assert_allclose(cdf("exponential", x), 1 - np.exp(-x))
    np.testing.assert_allclose(cdf("frechet", x), np.exp(-np.array([2.0, 1.0, 0.5])))
    np.testing.assert_allclose(cdf("gumbel", x), np.exp(-np.exp(np.array([0.5, 0.0, -1.0]))))
    np.testing.assert_allclose(cdf("logistic", x), 1 / (1 + np.exp(np.array([0.5, 0.0, -1.0]))))
    # Normal(1, 1): Φ(-0.5), Φ(0) = 1/2, Φ(1); Φ(1) = 0.841344746... (standard tables).
    normal = cdf("normal", x)
    assert normal[1] == pytest.approx(0.5)
    assert normal[2] == pytest.approx(0.8413447460685429)
    assert normal[0] == pytest.approx(1 - 0.6914624612740131)
    assert cdf("frechet", np.array([0.0]))[0] == 0.0


def test_code_normal_cdf_is_the_decreasing_erfc_form():
    # The release: 0.5 (1 + erfc((x-1)/√2)) = 1.5 - Φ(x - 1)·1 ... i.e. 1 + 0.5 - Φ: at x = 1 it is
    # 1.0, at x = 2 it is 1.5 - 0.8413 = 0.6587; it decreases, range (0.5, 1.5).
    x = np.array([1.0, 2.0, 50.0, -50.0])
    got = cdf("normal", x, variant="code")
    np.testing.assert_allclose(got[:2], [1.0, 1.5 - 0.8413447460685429], rtol=1e-12)
    assert got[2] == pytest.approx(0.5) and got[3] == pytest.approx(1.5)
    for name in ("weibull", "exponential", "frechet", "gumbel", "logistic"):
        np.testing.assert_array_equal(cdf(name, x[:2], "code"), cdf(name, x[:2], "thesis"))


def test_unknown_cdf_names_the_valid_ones():
    with pytest.raises(ValueError, match="weibull"):
        cdf("cauchy", np.ones(2))
    with pytest.raises(ValueError, match="cdf"):
        build_algorithm("aaggff_s", cdf="cauchy")
    with pytest.raises(ValueError, match="variant"):
        build_algorithm("aaggff_d", variant="paper")


# ---- the exact simplex QP ----


def _brute_force_qp(Q, c, lo, hi):
    """Enumerate every assignment of coordinates to {lo, hi, free}; keep the best KKT-feasible."""
    K = len(c)
    best, best_x = math.inf, None
    for assign in itertools.product((-1, 0, 1), repeat=K):
        x = np.where(np.array(assign) == -1, lo, np.where(np.array(assign) == 1, hi, 0.0))
        free = [i for i in range(K) if assign[i] == 0]
        if free:
            n = len(free)
            kkt = np.zeros((n + 1, n + 1))
            kkt[:n, :n] = Q[np.ix_(free, free)]
            kkt[:n, n] = kkt[n, :n] = 1.0
            fixed = [i for i in range(K) if assign[i] != 0]
            rhs = np.concatenate(
                [-c[free] - Q[np.ix_(free, fixed)] @ x[fixed], [1.0 - x[fixed].sum()]]
            )
            x[free] = np.linalg.solve(kkt, rhs)[:n]
        if abs(x.sum() - 1) > 1e-9 or np.any(x < lo - 1e-9) or np.any(x > hi + 1e-9):
            continue
        val = qp_objective(Q, c, x)
        if val < best - 1e-12:
            best, best_x = val, x
    return best_x


@pytest.mark.parametrize("seed", range(8))
def test_simplex_qp_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    K = int(rng.integers(2, 6))
    M = rng.normal(size=(K, K))
    Q = M @ M.T + 0.1 * np.eye(K)
    c = rng.normal(size=K) * 3
    lo, hi = (0.0, 1.0) if seed % 2 == 0 else (0.05, 0.5)
    got = simplex_qp(Q, c, lo=lo, hi=hi)
    want = _brute_force_qp(Q, c, lo, hi)
    np.testing.assert_allclose(got, want, atol=1e-10)


def test_projection_is_the_identity_qp():
    v = np.array([0.9, -0.3, 0.6, 0.1])
    # Euclidean projection = argmin ½‖x‖² - vᵀx over the simplex; by hand: subtract τ = 0.25
    # from the two largest (0.9 + 0.6 - 2τ = 1), the rest clip to 0.
    np.testing.assert_allclose(project_simplex(v), [0.65, 0.0, 0.35, 0.0], atol=1e-12)
    np.testing.assert_allclose(simplex_qp(np.eye(4), -v), project_simplex(v), atol=1e-12)


# ---- spec aaggff.md §14 worked numbers (computed there with numpy/scipy and the release) ----

F3 = np.array([0.01, 0.10, 0.02])


def test_aaggff_s_first_step_thesis_and_code():
    r = responses(F3, "weibull", 0.0, 1 / 3)
    x = F3 / F3.mean()
    np.testing.assert_allclose(r, (1 - np.exp(-(x**2))) / 3)
    np.testing.assert_allclose(r, [0.01729, 0.33171, 0.06395], atol=5e-6)
    alpha, beta = ons_constants(1 / 3, 3)
    assert (alpha, beta) == pytest.approx((4.0, 0.75))
    zeros = (np.zeros(3), np.zeros((3, 3)), np.zeros(3))
    p_t, *_ = ons_step(np.full(3, 1 / 3), r, *zeros, alpha, beta, "thesis")
    np.testing.assert_allclose(p_t, [0.30710, 0.37563, 0.31727], atol=5e-6)
    p_c, *_ = ons_step(np.full(3, 1 / 3), r, *zeros, alpha, beta, "code")
    np.testing.assert_allclose(p_c, [0.31966, 0.35539, 0.32496], atol=5e-6)
    # The release starts from p = C·1 = 1 (C = 1): checked there by running the released code.
    p_r, *_ = ons_step(np.ones(3), r, *zeros, alpha, beta, "code")
    np.testing.assert_allclose(p_r, [0.32209, 0.35146, 0.32645], atol=5e-6)


def test_aaggff_d_first_step_thesis_and_code():
    K, C, S = 5, 0.4, np.array([0, 2])
    r = responses(np.array([0.5, 1.5]), "weibull", 0.0, C)
    np.testing.assert_allclose(r, [0.08848, 0.35784], atol=5e-6)
    L = dr_lipschitz(0.0, C, C)
    assert L == pytest.approx(2.4)
    est, rbar = dr_estimate(r, S, K, C, "thesis")
    np.testing.assert_allclose(est, [-0.11354, 0.22316, 0.55986, 0.22316, 0.22316], atol=5e-6)
    g = linearised_grad(est, rbar, np.full(K, 0.2))
    np.testing.assert_allclose(g, [0.09283, -0.18245, -0.45772, -0.18245, -0.18245], atol=5e-6)
    p = eg_decision(g, 1, L)
    np.testing.assert_allclose(p, [0.18006, 0.19958, 0.22121, 0.19958, 0.19958], atol=5e-6)
    np.testing.assert_allclose(sampled_weights(p, S), [0.44874, 0.55126], atol=5e-6)
    est_c, _ = dr_estimate(r, S, K, C, "code")
    np.testing.assert_allclose(est_c, [-0.33670, 0.22316, 0.33670, 0.22316, 0.22316], atol=5e-6)
    p_c = eg_decision(linearised_grad(est_c, rbar, np.full(K, 0.2)), 1, L)
    np.testing.assert_allclose(p_c, [0.17276, 0.20500, 0.21224, 0.20500, 0.20500], atol=5e-6)
    p_r = eg_decision(linearised_grad(est_c, rbar, np.full(K, C)), 1, L)  # release: p = C·1
    np.testing.assert_allclose(p_r, [0.17677, 0.20429, 0.21037, 0.20429, 0.20429], atol=5e-6)
    np.testing.assert_allclose(sampled_weights(p_r, S), [0.45660, 0.54340], atol=5e-6)


# ---- the doubly-robust estimate (Lemma 3.2) ----


def test_dr_estimate_is_unbiased_with_a_fixed_imputation():
    # Lemma 3.2's setting: the imputed value does not depend on the sample. 20,000 rounds of
    # |S| = 3 of K = 10: each r̆_i has std ≤ |r_i - ref| √((1-C)/C) ≤ 0.8·1.53 = 1.22, so the
    # mean's standard error is ≤ 1.22/√20000 = 0.0087; we allow 5 standard errors (0.044).
    rng = np.random.default_rng(0)
    K, m, rounds = 10, 3, 20_000
    r = np.linspace(0.1, 0.9, K)
    total = np.zeros(K)
    for _ in range(rounds):
        S = np.sort(rng.choice(K, size=m, replace=False))
        est, _ = dr_estimate(r[S], S, K, m / K, "thesis", reference=0.3)
        total += est
    np.testing.assert_allclose(total / rounds, r, atol=0.044)


def test_dr_estimate_with_in_sample_mean_has_the_derived_bias():
    # With r̄ taken over S (the algorithm as written), enumerate every S exactly: E[r̆_i] - r_i =
    # (1/m - 1/K)(mean_{j≠i} r_j - r_i) (derivation in dr_estimate's docstring); 0 when m = K.
    K, m = 5, 2
    r = np.array([0.1, 0.4, 0.2, 0.9, 0.5])
    subsets = list(itertools.combinations(range(K), m))
    mean = sum(dr_estimate(r[list(S)], np.array(S), K, m / K)[0] for S in subsets) / len(subsets)
    others = (r.sum() - r) / (K - 1)
    np.testing.assert_allclose(mean - r, (1 / m - 1 / K) * (others - r), atol=1e-12)
    full, _ = dr_estimate(r, np.arange(K), K, 1.0)
    np.testing.assert_allclose(full, r)


# ---- equal responses keep equal coefficients (the FedAvg equivalence) ----


def _messages(K, losses, deltas):
    return {
        "delta": {"w": torch.as_tensor(deltas, dtype=torch.float32)},
        "weight": torch.full((K,), 5.0, dtype=torch.float64),
        "pre_loss": torch.as_tensor(losses, dtype=torch.float64),
    }


@pytest.mark.parametrize("variant", ["thesis", "code"])
@pytest.mark.parametrize("name", ["normal", "weibull", "frechet"])
def test_aaggff_s_identical_losses_keep_uniform_weights(variant, name):
    K = 4
    algo = build_algorithm("aaggff_s", cdf=name, variant=variant)
    deltas = np.arange(K * 2, dtype=np.float64).reshape(K, 2)
    glob, state = {"w": torch.zeros(2)}, algo.init_server_state({})
    for t in range(1, 4):
        ctx = ServerContext(round=t, num_clients=K, client_ids=tuple(range(K)), lr=0.1)
        new, state = algo.aggregate(glob, _messages(K, [0.7] * K, deltas), state, ctx)
        np.testing.assert_allclose(state["p"].numpy(), np.full(K, 0.25), atol=1e-12)
        # Uniform p: the global model moves by the plain mean of the updates (3, 4).
        np.testing.assert_allclose(new["w"].numpy(), [3.0, 4.0], atol=1e-6)


def test_aaggff_d_identical_losses_keep_uniform_weights():
    # thesis DR: every client's estimate is r̄ whatever the sample, so Σğ stays constant across
    # clients and p stays uniform over all K; the sampled clients share the update equally.
    K, m = 6, 2
    algo = build_algorithm("aaggff_d", variant="thesis")
    glob, state = {"w": torch.zeros(1)}, {}
    for t, ids in enumerate([(0, 1), (2, 5), (1, 3)], start=1):
        ctx = ServerContext(round=t, num_clients=K, client_ids=ids, lr=0.1)
        new, state = algo.aggregate(glob, _messages(m, [2.0] * m, [[1.0], [3.0]]), state, ctx)
        np.testing.assert_allclose(state["p"].numpy(), np.full(K, 1 / K), atol=1e-12)
        assert new["w"].item() == pytest.approx(2.0)
    # code DR (r̆_S = 0): within a round the sampled clients still get equal weights.
    code = AAggFFD(variant="code")
    ctx = ServerContext(round=1, num_clients=K, client_ids=(1, 4), lr=0.1)
    new, state = code.aggregate(glob, _messages(m, [2.0] * m, [[1.0], [3.0]]), {}, ctx)
    assert new["w"].item() == pytest.approx(2.0)


def test_aaggff_s_rejects_partial_participation():
    algo = build_algorithm("aaggff_s")
    ctx = ServerContext(round=1, num_clients=3, client_ids=(0, 1), lr=0.1)
    with pytest.raises(ValueError, match="full participation"):
        algo.aggregate({"w": torch.zeros(1)}, _messages(2, [1.0, 2.0], [[1.0], [2.0]]), {}, ctx)


def test_aaggff_s_aggregates_with_the_new_p():
    # Round 1 of the §14 example through `aggregate`: the weights are p^(2) (same-round use).
    algo = build_algorithm("aaggff_s", variant="thesis")
    ctx = ServerContext(round=1, num_clients=3, client_ids=(0, 1, 2), lr=0.1)
    eye = np.eye(3)
    new, state = algo.aggregate({"w": torch.zeros(3)}, _messages(3, F3, eye), {}, ctx)
    np.testing.assert_allclose(new["w"].numpy(), [0.30710, 0.37563, 0.31727], atol=5e-6)
    # Figure 3.1's objective accumulates Σ p^(1) F = mean(F).
    assert state["objective"] == pytest.approx(F3.mean())


def test_plug_and_play_feeds_p_to_the_server_optimiser():
    # AAggFF-S + FedAdam, one step from zero state: m = 0.1 u, v = 0.999 τ² + 0.001 u², the step is
    # lr m / (√v + τ), with u = the p-weighted update (p = uniform here: equal losses).
    algo = build_algorithm("aaggff_s", server_opt="adam", server_lr=0.01, beta1=0.9, tau=1e-4)
    ctx = ServerContext(round=1, num_clients=2, client_ids=(0, 1), lr=0.1)
    new, _ = algo.aggregate(
        {"w": torch.zeros(1)}, _messages(2, [1.0, 1.0], [[0.2], [0.4]]), {}, ctx
    )
    u, tau = 0.3, 1e-4
    want = 0.01 * 0.1 * u / (math.sqrt(0.999 * tau**2 + 0.001 * u**2) + tau)
    assert new["w"].item() == pytest.approx(want, rel=1e-5)


# ---- through the engine ----

CFG = TrainConfig(rounds=2, batch_size=4, lr=0.1, local_epochs=1, clients_per_round=4)


@pytest.mark.parametrize("name", ["aaggff_d", "qfedavg"])
def test_engine_passes_the_pre_training_loss(name, tiny):
    fed, apply, p0 = tiny
    seen = []
    cls = type(build_algorithm(name))

    class Recording(cls):
        def aggregate(self, global_params, messages, server_state, ctx):
            seen.append((dict(global_params), ctx.client_ids, messages["pre_loss"].clone()))
            return super().aggregate(global_params, messages, server_state, ctx)

    cfg = CFG if name != "aaggff_d" else dataclasses.replace(CFG, clients_per_round=2)
    for executor in ("sequential", "vectorised"):
        seen.clear()
        run_rounds(Run(Recording(), apply, cfg, p0, executor=executor), fed, Streams(3))
        assert len(seen) == 2
        for params, ids, got in seen:
            want = [
                F.cross_entropy(apply(params, fed.x[fed.train[i]]), fed.y[fed.train[i]]).item()
                for i in ids
            ]
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)


@pytest.mark.parametrize(
    "name,params,per_round",
    [
        ("aaggff_d", {}, 2),
        ("aaggff_d", {"variant": "thesis", "cdf": "normal"}, 2),
        ("aaggff_s", {"cdf": "frechet"}, 4),
        ("qfedavg", {"q": 1.0}, 3),
    ],
)
def test_sequential_and_vectorised_agree(name, params, per_round, tiny, assert_executors_agree):
    fed, apply, p0 = tiny
    fed.train[1] = fed.train[1][:5]  # uneven clients: padded batches under vmap
    cfg = dataclasses.replace(CFG, rounds=3, clients_per_round=per_round)
    algo = build_algorithm(name, **params)
    seq, vec = (
        run_rounds(Run(algo, apply, cfg, p0, executor=ex), fed, Streams(5))
        for ex in ("sequential", "vectorised")
    )
    assert_executors_agree(seq, vec)
    if "p" in seq.server_state:
        torch.testing.assert_close(seq.server_state["p"], vec.server_state["p"], atol=1e-6, rtol=0)


def test_prox_variant_adds_the_release_half_norm_term():
    # AAggFF + FedProx: loss + μ·½ Σ_tensors ‖w - w_g‖₂; ‖(3, 4)‖ = 5, ‖(0, 1)‖ = 1: ½·6 = 3.
    algo = build_algorithm("aaggff_d_prox", mu=0.1)
    glob = {"a": torch.zeros(2), "b": torch.zeros(2)}
    params = {"a": torch.tensor([3.0, 4.0]), "b": torch.tensor([0.0, 1.0])}
    _, carry = algo.client_begin(glob, {}, {}, None)

    def apply(p, x):
        return torch.zeros(len(x), 2)  # uniform logits: cross-entropy ln 2

    batch = Batch(torch.zeros(1, 1), torch.zeros(1, dtype=torch.long))
    loss = algo.local_loss(apply, params, batch, carry, None)
    assert loss.item() == pytest.approx(math.log(2.0) + 0.1 * 3.0)
    plain = build_algorithm("aaggff_d")
    assert plain.local_loss(apply, params, batch, {}, None).item() == pytest.approx(math.log(2.0))


def test_records_carry_figure_3_1_objective(tiny):
    # Each evaluation record's "server" holds the cumulative objective through that round, equal to
    # Figure 3.1's sum recomputed (fedbench.metrics.fairness) from the p in force and the losses.
    from fedbench.metrics.fairness import cumulative_objective

    fed, apply, p0 = tiny
    K, rows = fed.num_clients, []

    class Recording(AAggFFD):
        def aggregate(self, global_params, messages, server_state, ctx):
            p = (
                server_state["p"].numpy()
                if "p" in server_state
                else np.full(K, len(ctx.client_ids) / K)
            )
            F = np.full(K, np.nan)
            F[list(ctx.client_ids)] = messages["pre_loss"].numpy()
            rows.append((p.copy(), F))
            return super().aggregate(global_params, messages, server_state, ctx)

    cfg = dataclasses.replace(CFG, rounds=3, clients_per_round=2, eval_every=1)
    state = run_rounds(Run(Recording(), apply, cfg, p0, executor="sequential"), fed, Streams(1))
    P, F = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
    for form, key in (("thesis", "objective"), ("code", "objective_code")):
        want = cumulative_objective(F, P, form)
        got = [rec["server"][key] for rec in state.records]
        np.testing.assert_allclose(got, want, rtol=1e-5)

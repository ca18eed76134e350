"""FedPAC: equivalence to FedRep without alignment and collaboration, the alignment term, the
classifier-combination QP, exact statistics, executors, bad settings."""

import numpy as np
import pytest
import torch

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import ClientContext, ServerContext
from fedbench.algorithms.fedpac import (
    HEADS,
    alignment,
    combination_weights,
    features_and_logits,
    simplex_qp,
)
from fedbench.engine.batches import batch_plan
from fedbench.engine.build import Run
from fedbench.engine.local import local_train_carry
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams

PLAIN = dict(batch_size=4, lr=0.1, momentum=0.0, weight_decay=0.0)


def _run(algo, tiny, epochs, rounds=3, m=3, executor="sequential", **cfg):
    fed, apply, p0 = tiny
    cfg = TrainConfig(rounds=rounds, clients_per_round=m, local_epochs=epochs, **{**PLAIN, **cfg})
    return run_rounds(Run(algo, apply, cfg, p0, executor=executor), fed, Streams(5))


@pytest.mark.parametrize("objective", ["cross_entropy", "class_weighted_ce"])
def test_without_alignment_and_collaboration_fedpac_is_fedrep(tiny, objective):
    # λ = 0 and α = identity: 1 classifier epoch then E = 2 extractor epochs, extractor averaged
    # by sample size, each client keeps its head: FedRep with E = 1 head epoch and tau = 2, under
    # the run's objective too.
    pac = _run(
        build_algorithm("fedpac", lam=0.0, collaborate=False), tiny, epochs=2, objective=objective
    )
    rep = _run(build_algorithm("fedrep", tau=2), tiny, epochs=1, objective=objective)
    for k, v in rep.global_params.items():
        if k.startswith("body."):
            torch.testing.assert_close(pac.global_params[k], v, rtol=0, atol=1e-6)
    algo = build_algorithm("fedpac")
    for c, state in rep.client_states.items():
        mine = algo.personal_params("personal", pac.global_params, pac.client_states[c])
        for k, v in (
            build_algorithm("fedrep").personal_params("personal", rep.global_params, state).items()
        ):
            torch.testing.assert_close(mine[k], v, rtol=0, atol=1e-6)


def test_alignment_value_and_gradient_by_hand():
    f = torch.tensor([[1.0, 2.0], [0.0, -1.0], [3.0, 3.0]], requires_grad=True)
    y = torch.tensor([0, 1, 2])
    c = torch.tensor([[0.0, 1.0], [1.0, 1.0], [9.0, 9.0]])
    has = torch.tensor([1.0, 1.0, 0.0])  # class 2 has no centroid: no pull
    # ||(1, 1)||² = 2, ||(-1, -2)||² = 5, 0: mean over 3 samples = 7/3; per dim: 7/6.
    r = alignment(f, y, c, has, None, per_dim=False)
    assert r.item() == pytest.approx(7 / 3)
    (g,) = torch.autograd.grad(r, f)
    # d/df_i = 2 (f_i - c_y) / 3 for samples with a centroid.
    torch.testing.assert_close(g, torch.tensor([[2, 2], [-2, -4], [0, 0]]) / 3.0)
    assert alignment(f, y, c, has, None, per_dim=True).item() == pytest.approx(7 / 6)
    # A padded sample (mask 0) neither counts nor pulls.
    masked = alignment(f, y, c, has, torch.tensor([1.0, 0.0, 1.0]), per_dim=False)
    assert masked.item() == pytest.approx(2 / 2)


def _qp_objective(p, a):
    return float(a @ p @ a)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_simplex_qp_matches_a_brute_force_grid_on_three_clients(seed):
    rng = np.random.default_rng(seed)
    v = torch.tensor(rng.uniform(0.01, 0.5, 3))
    h = torch.tensor(rng.normal(size=(3, 2, 4)))
    steps = 300
    grid = np.array(
        [
            (i / steps, j / steps, 1 - (i + j) / steps)
            for i in range(steps + 1)
            for j in range(steps + 1 - i)
        ]
    )
    alpha = combination_weights(v, h).numpy()
    for i in range(3):
        g = (h[i] - h).reshape(3, -1).numpy()
        p = np.diag(v.numpy()) + g @ g.T
        exact = simplex_qp(p)
        values = np.einsum("nj,jk,nk->n", grid, p, grid)
        best = grid[values.argmin()]
        assert exact.min() >= 0 and exact.sum() == pytest.approx(1)
        assert _qp_objective(p, exact) <= values.min() + 1e-12
        # The objective is strongly convex here (V > 0): the grid's best point is near α*.
        assert np.abs(exact - best).max() <= 3 / steps
        kept = np.where(exact > 1e-3, exact, 0.0)
        np.testing.assert_allclose(alpha[i], kept / kept.sum(), atol=1e-9)


def test_simplex_qp_closed_forms():
    # Diagonal P: α_j ∝ 1/P_jj (all interior).
    np.testing.assert_allclose(simplex_qp(np.diag([1.0, 2.0, 4.0])), np.array([4, 2, 1]) / 7)
    # Rank one P = aaᵀ with a = (1, -1, 2): zero objective on the face a·α = 0, e.g. (½, ½, 0).
    a = np.array([1.0, -1.0, 2.0])
    alpha = simplex_qp(np.outer(a, a))
    assert alpha @ a == pytest.approx(0, abs=1e-9) and alpha.min() >= 0
    assert simplex_qp(np.array([[3.0]])).tolist() == [1.0]


@pytest.mark.parametrize("momentum, weight_decay", [(0.0, 0.0), (0.9, 1e-2)])
def test_statistics_are_exact_over_a_head_epoch(momentum, weight_decay, tiny):
    # One classifier epoch sees every training sample once with the received extractor: V and h
    # equal the release's statistics over the whole training split. The statistics ride in the
    # carry, so momentum and weight decay (which move the models) leave them exact.
    fed, apply, p0 = tiny
    algo = build_algorithm("fedpac")
    net = algo.model(apply)
    glob = algo.init_global(p0, None, None, fed.num_clients)
    server = algo.init_server_state(glob)
    idx = fed.train[0]
    plan = batch_plan(idx, 4, np.random.default_rng(0), epochs=algo.local_epochs(1))
    ctx = ClientContext(0, 1, 0.1, 3, len(idx), num_steps=len(plan), steps_per_epoch=3)
    params, carry = algo.client_begin(glob, server, algo.init_client_state(0, glob, None), ctx)
    noise = algo.step_noise(None, ctx, glob)
    args = (fed.x, fed.y, plan, 0.1, momentum, weight_decay, noise)
    out, carry, _ = local_train_carry(algo, net, params, carry, *args)
    assert not torch.equal(out["body.1.weight"], p0["body.1.weight"])
    msg, _ = algo.client_end(glob, out, carry, {"id": 0}, ctx)
    with torch.no_grad():
        f, _ = features_and_logits(net, "head", p0, fed.x[idx])
    y, n = fed.y[idx], len(idx)
    h = torch.stack([f[y == k].sum(0) / n for k in range(3)])
    torch.testing.assert_close(msg["stats"]["h"], h, rtol=1e-5, atol=1e-6)
    p = torch.stack([(y == k).float().mean() for k in range(3)])
    mu = torch.stack([f[y == k].mean(0) if (y == k).any() else torch.zeros(5) for k in range(3)])
    sq = torch.stack(
        [(f[y == k] ** 2).sum(1).mean() if (y == k).any() else 0 * p[0] for k in range(3)]
    )
    v = ((p * sq).sum() - (p**2 * (mu**2).sum(1)).sum()) / n
    assert msg["stats"]["v"].item() == pytest.approx(v.item(), rel=1e-5)
    # The body phase's class counts: each sample once per extractor epoch.
    counts = torch.stack([(y == k).sum() for k in range(3)]).float()
    torch.testing.assert_close(msg["stats"]["cnt"], counts)


def test_aggregate_by_hand():
    algo = build_algorithm("fedpac")
    p0 = {"body.1.weight": torch.zeros(2, 2), "head.weight": torch.zeros(2, 2)}
    glob = algo.init_global(p0, None, None, 4)
    heads = torch.tensor([[[1.0, 0], [0, 1]], [[3.0, 0], [0, 3]]])
    msgs = {
        "model": {"body.1.weight": torch.stack([torch.ones(2, 2), 3 * torch.ones(2, 2)]),
                  "head.weight": heads},
        "weight": torch.tensor([1.0, 3.0], dtype=torch.float64),
        "stats": {"v": torch.tensor([0.5, 0.5], dtype=torch.float64),
                  "h": torch.tensor([[[1.0, 0], [0, 0]], [[0.0, 0], [0, 1]]]),
                  "sum": torch.tensor([[[2.0, 0], [0, 0]], [[4.0, 4], [0, 0]]]),
                  "cnt": torch.tensor([[2.0, 0], [2.0, 0]])},
    }  # fmt: skip
    new, state = algo.aggregate(
        glob, msgs, algo.init_server_state(glob), ServerContext(1, 4, (3, 1), 0.1)
    )
    torch.testing.assert_close(new["body.1.weight"], 2.5 * torch.ones(2, 2))
    # Class 0: (2 + 4, 0 + 4) / (2 + 2); class 1: nobody had it, no centroid.
    torch.testing.assert_close(state["centroids"], torch.tensor([[1.5, 1.0], [0.0, 0.0]]))
    torch.testing.assert_close(state["has"], torch.tensor([1.0, 0.0]))
    # Client 3 (row 0): P = diag(.5, .5) + [[0, 0], [0, ||h_0 - h_1||² = 2]] = diag(.5, 2.5),
    # so α ∝ (1/.5, 1/2.5) = (5/6, 1/6); client 1 symmetrically.
    alpha = torch.tensor([[5 / 6, 1 / 6], [1 / 6, 5 / 6]])
    combined = torch.tensordot(alpha, heads, dims=1)
    torch.testing.assert_close(new[HEADS + "head.weight"][3], combined[0])
    torch.testing.assert_close(new[HEADS + "head.weight"][1], combined[1])
    assert torch.equal(new[HEADS + "head.weight"][0], torch.zeros(2, 2))  # not sampled


@pytest.mark.parametrize("momentum, weight_decay", [(0.0, 0.0), (0.5, 5e-4)])
def test_executors_agree(momentum, weight_decay, tiny, assert_executors_agree):
    fed = tiny[0]
    fed.train[1] = fed.train[1][:5]
    fed.train[2] = fed.train[2][:2]
    algo = build_algorithm("fedpac", lam=1.0, align="sq")
    opt = dict(momentum=momentum, weight_decay=weight_decay)
    seq, vec = (
        _run(algo, tiny, epochs=2, m=3, executor=ex, **opt) for ex in ("sequential", "vectorised")
    )
    assert_executors_agree(seq, vec)


def test_steps_mode_uses_head_steps(tiny):
    algo = build_algorithm("fedpac", head_steps=2)
    ctx = ClientContext(0, 1, 0.1, 3, 9, num_steps=5)
    assert algo.step_noise(None, ctx, {}).tolist() == [0, 0, 1, 1, 1]
    out = _run(algo, tiny, epochs=None, rounds=2, local_steps=5)
    assert out.status == "ok"


@pytest.mark.parametrize(
    "key,value",
    [("lam", -1.0), ("lam", float("nan")), ("align", "l1"), ("head_epochs", 0), ("head_steps", -1),
     ("collaborate", 1)],
)  # fmt: skip
def test_bad_hyperparameters_name_the_key(key, value):
    with pytest.raises(ValueError, match=key):
        build_algorithm("fedpac", **{key: value})


def test_steps_mode_needs_head_steps():
    for steps, local in ((0, 5), (1, 1)):
        with pytest.raises(ValueError, match="head_steps"):
            build_algorithm("fedpac", head_steps=steps).step_noise(
                None, ClientContext(0, 1, 0.1, 3, 9, num_steps=local), {}
            )
    # More head steps than R - 1: the last step still trains the extractor.
    noise = build_algorithm("fedpac", head_steps=3).step_noise(
        None, ClientContext(0, 1, 0.1, 3, 9, num_steps=2), {}
    )
    assert noise.tolist() == [0, 1]

"""pFedBreD-mh as released (localpFedBreD_ns_mh.py): two batches per iteration, by hand and
against a transcription of the release's loop; lg, meg, Eq. 14's mh and the one-batch reading
unchanged; the catalog's mh runs take 2R steps."""

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.func import grad

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import ClientContext
from fedbench.algorithms.pfedbred import PFedBreD
from fedbench.config import resolve_run
from fedbench.engine.batches import batch_plan
from fedbench.engine.build import Run
from fedbench.engine.local import local_train_carry
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams

ROOT = Path(__file__).resolve().parents[2]
A = 2.0  # f(θ; B) = (A/2)(θ - c_B)², c_B = the batch's mean x: ∇f(θ; B) = A (θ - c_B)


@dataclass(frozen=True)
class BatchQuad(PFedBreD):
    """pFedBreD on a one-number model whose loss has a different minimiser on each batch."""

    def data_loss(self, apply, params, batch):
        return 0.5 * A * ((params["w"] - batch.x.mean()) ** 2).sum()


def _t(v):
    return {"w": torch.tensor([v])}


def _quad_client(steps, momentum=0.0, weight_decay=0.0, per_epoch=0, **kw):
    """`steps` engine steps of one client from w = 3, θ = 2, w_mem = 4, on batches whose means
    are 1, 0, 2, -1 (one sample each), with the step marks `step_noise` gives the engine."""
    algo = BatchQuad(eta_alpha=0.1, eta=0.5, lam=2.0, alpha=0.1, prox_iters=1, **kw)
    ctx = ClientContext(0, 1, 0.1, 1, num_train=4, num_steps=steps, steps_per_epoch=per_epoch)
    state = {"theta": _t(2.0), "mem": _t(4.0)}
    params, carry = algo.client_begin(_t(3.0), {}, state, ctx)
    x, y = torch.tensor([[1.0], [0.0], [2.0], [-1.0]]), torch.zeros(4, dtype=torch.long)
    plan = [torch.tensor([i]) for i in range(steps)]
    noise = algo.step_noise(None, ctx, params)
    params, carry, _ = local_train_carry(
        algo, None, params, carry, x, y, plan, 0.1, momentum, weight_decay, noise
    )
    message, state = algo.client_end(_t(3.0), params, carry, state, ctx)
    return 3.0 + message["delta"]["w"].item(), state, message, carry


# Two iterations by hand, η_α = 0.1, η = 0.5, λ = 2, α = 0.1, K = 1, lr = 0.1, batch means
# B1 = 1, B2 = 0 (iteration 1), B1 = 2, B2 = -1 (iteration 2); w = 3, θ = 2, w_mem = 4:
#  1: g1 = 2 (3 - 1) = 4, w' = 3 - 0.4 = 2.6; g2 = 2 (2.6 - 0) = 5.2, u = 3 - 0.52 = 2.48;
#     μ = u - 0.5 (4 - 2) = 1.48; prox from u on B2: θ = 2.48 - 0.1 (2 (2.48 - 0) + 2 (2.48 - 1.48))
#     = 2.48 - 0.696 = 1.784; w = u - 0.1 * 2 (μ - θ) = 2.48 + 0.0608 = 2.5408;
#     envelope gradient λ (μ - θ) = -0.608.
#  2: g1 = 2 (2.5408 - 2) = 1.0816, w' = 2.5408 - 0.10816 = 2.43264;
#     g2 = 2 (2.43264 + 1) = 6.86528, u = 2.5408 - 0.686528 = 1.854272;
#     μ = u - 0.5 (4 - 1.784) = 0.746272; θ = u - 0.1 (2 (u + 1) + 2 (u - μ))
#     = 1.854272 - 0.1 (5.708544 + 2.216) = 1.0618176; w = u - 0.2 (μ - θ) = 1.91738112;
#     λ (μ - θ) = -0.6310912.
# w_mem ← the last w (the release's last_model ← local_model after the R iterations).
@pytest.mark.parametrize(
    "steps, w, theta, env",
    [(2, 2.5408, 1.784, -0.608), (4, 1.91738112, 1.0618176, -0.6310912)],
)
def test_two_batch_iterations_by_hand(steps, w, theta, env):
    got_w, state, message, _ = _quad_client(steps)
    assert got_w == pytest.approx(w, abs=1e-5)
    assert state["theta"]["w"].item() == pytest.approx(theta, abs=1e-5)
    assert state["mem"]["w"].item() == pytest.approx(w, abs=1e-5)
    assert message["envelope"]["w"].item() == pytest.approx(env, abs=1e-5)


def test_the_one_batch_reading_of_the_same_steps_differs():
    # The same four batches read one per iteration (four iterations) land elsewhere.
    one, _, _, _ = _quad_client(4, batches="one")
    assert abs(one - 1.91738112) > 0.05


def test_a_pairs_first_step_only_takes_the_gradient():
    # After B1 alone (an epoch of one step: an unpaired batch is allowed when counting epochs):
    # w, θ, the envelope gradient untouched, even with weight decay; the carry holds
    # ∇f(w; B1) = 2 (3 - 1) = 4 for B2's step.
    got_w, state, message, carry = _quad_client(1, weight_decay=0.1, per_epoch=1)
    assert got_w == 3.0
    assert state["theta"]["w"].item() == 2.0 and message["envelope"]["w"].item() == 0.0
    assert carry["grad"]["w"].item() == pytest.approx(4.0)


def test_momentum_skips_the_pairs_first_steps():
    # Momentum 0.9: w's gradient at iteration 1 is λ(μ - θ) + η_α g2 / lr = -0.608 + 5.2 = 4.592
    # (the first step: w = 2.5408 as without momentum); at iteration 2, -0.6310912 + 6.86528
    # = 6.2341888, and the buffer is 0.9 * 4.592 + 6.2341888 = 10.3669888 (not decayed at B1):
    # w = 2.5408 - 0.1 * 10.3669888 = 1.50410112.
    got_w, _, _, _ = _quad_client(4, momentum=0.9)
    assert got_w == pytest.approx(1.50410112, abs=1e-5)


def test_odd_local_steps_are_refused():
    algo = build_algorithm("pfedbred")
    ctx = ClientContext(0, 1, 0.1, 1, num_train=9, num_steps=3)
    with pytest.raises(ValueError, match="local_steps must be even"):
        algo.step_noise(None, ctx, _t(0.0))
    four = ClientContext(0, 1, 0.1, 1, num_train=9, num_steps=4)
    assert algo.step_noise(None, four, _t(0.0)).tolist() == [0.0, 1.0, 0.0, 1.0]
    # lg, meg, Eq. 14's mh and the one-batch reading draw no marks.
    for kw in ({"prior": "lg"}, {"prior": "meg"}, {"variant": "paper"}, {"batches": "one"}):
        assert build_algorithm("pfedbred", **kw).step_noise(None, ctx, _t(0.0)) is None


# ---- the release's loop, transcribed ------------------------------------------------------
HP = dict(lam=2.0, eta=0.5, eta_alpha=0.3, alpha=0.1, prox_iters=2)
LR, B, STEPS, ROUNDS, SEED = 0.1, 3, 4, 2, 7


def _release_client(apply, w, theta, mem, batches, ft_lr=None):
    """localpFedBreD_ns_mh.py `train` (lines 42-83), line by line on parameter dicts: two
    consecutive batches per iteration, the prox steps (ns_Optimizer) and w's step on the second.
    Returns (local_model, personalized_model, last_model, FT'd personal model)."""

    def loss(p, xy):
        return F.cross_entropy(apply(p, xy[0]), xy[1])

    model, local_model = dict(w), dict(w)
    it = iter(batches)
    for _ in range(len(batches) // 2):
        temp_model = dict(model)
        xy = next(it)
        g = grad(loss)(model, xy)
        model = {k: model[k] - HP["eta_alpha"] * g[k] for k in model}  # alpha_optimizer, eta 1e-2
        xy = next(it)
        g = grad(loss)(model, xy)
        model = {k: temp_model[k] - HP["eta_alpha"] * g[k] for k in model}  # set back, then step
        local_model = dict(model)
        s_model = {k: local_model[k] - HP["eta"] * (mem[k] - theta[k]) for k in model}
        for _ in range(HP["prox_iters"]):  # ns_Optimizer.step(s_model) on the second batch
            g = grad(loss)(model, xy)
            model = {
                k: model[k] - HP["alpha"] * (g[k] + HP["lam"] * (model[k] - s_model[k]))
                for k in model
            }
        theta = dict(model)
        local_model = {k: local_model[k] - LR * HP["lam"] * (s_model[k] - theta[k]) for k in model}
        model = dict(local_model)
    ft = None
    if ft_lr is not None:  # FT (not in the release): one more step on the last batch
        g = grad(loss)(theta, xy)
        ft = {k: theta[k] - ft_lr * g[k] for k in theta}
    return local_model, theta, dict(local_model), ft


def _release_run(fed, apply, p0, beta, ft_lr):
    """The release's rounds with every client sampled: all train (train_all), the server takes
    (1 - β) w + β Σ n_i w_i / Σ n_i; the batches are the engine's draws (its `batches` stream)."""
    w = dict(p0)
    clients = range(fed.num_clients)
    theta = {i: dict(p0) for i in clients}
    mem = {i: dict(p0) for i in clients}
    ft = {}
    streams = Streams(SEED)
    for r in range(1, ROUNDS + 1):
        locals_, sizes = [], []
        for i in clients:
            plan = batch_plan(fed.train[i], B, streams.generator("batches", r, i), steps=STEPS)
            batches = [(fed.x[idx], fed.y[idx]) for idx in plan]
            local, theta[i], mem[i], ft[i] = _release_client(
                apply, w, theta[i], mem[i], batches, ft_lr
            )
            locals_.append(local)
            sizes.append(len(fed.train[i]))
        avg = {k: sum(n * m[k] for n, m in zip(sizes, locals_)) / sum(sizes) for k in w}
        w = {k: (1 - beta) * w[k] + beta * avg[k] for k in w}
    return w, theta, mem, ft


@pytest.mark.parametrize("kw", [{}, {"ft": True, "ft_lr": 0.3, "beta": 2.0}])
def test_engine_matches_the_release_loop_and_executors_agree(kw, tiny, assert_executors_agree):
    fed, apply, p0 = tiny
    cfg = TrainConfig(
        rounds=ROUNDS, batch_size=B, lr=LR, local_steps=STEPS, clients_per_round=fed.num_clients
    )
    algo = build_algorithm("pfedbred", **HP, **kw)
    assert algo.two_batch
    runs = {
        ex: run_rounds(Run(algo, apply, cfg, p0, executor=ex), fed, Streams(SEED))
        for ex in ("sequential", "vectorised")
    }
    assert_executors_agree(runs["sequential"], runs["vectorised"])
    w, theta, mem, ft = _release_run(fed, apply, p0, kw.get("beta", 1.0), kw.get("ft_lr"))
    for run in runs.values():
        for k in p0:
            torch.testing.assert_close(run.global_params[k], w[k], rtol=0, atol=1e-5)
        for i, st in run.client_states.items():
            personal = algo.personal_params("personal", run.global_params, st)
            for k in p0:
                torch.testing.assert_close(st["theta"][k], theta[i][k], rtol=0, atol=1e-5)
                torch.testing.assert_close(st["mem"][k], mem[i][k], rtol=0, atol=1e-5)
                want = theta[i][k] if ft[i] is None else ft[i][k]
                torch.testing.assert_close(personal[k], want, rtol=0, atol=1e-5)
    # The one-batch reading of the same steps is a different update: this test can tell.
    one = run_rounds(
        Run(build_algorithm("pfedbred", batches="one", **HP, **kw), apply, cfg, p0),
        fed,
        Streams(SEED),
    )
    assert max((one.global_params[k] - w[k]).abs().max().item() for k in p0) > 1e-3


# ---- what must not change -----------------------------------------------------------------
# Fingerprints of the global model and the clients' θ_i after two rounds (tiny MLP, batch 3,
# 4 local steps, 2 of 4 clients aggregated, λ = 2, K = 2), taken with the code before the
# two-batch reading (commit a526d45, where mh code meant today's `batches: one`): sum of the
# global parameters, their index-weighted sum, the clients' θ index-weighted sum.
BEFORE = [
    ({"prior": "lg"}, (0.29451606678776443, 3.9127454545814544, 108.64313360591768)),
    (
        {"prior": "lg", "variant": "paper"},
        (0.2918206921312958, 3.821481650462374, 129.05849622911774),
    ),
    (
        {"prior": "lg", "eta_alpha": 0.05},
        (0.29421101696789265, 3.902501428499818, 105.08336102518297),
    ),
    ({"prior": "meg"}, (0.2945580349769443, 3.9191824889276177, 109.51580663633649)),
    (
        {"prior": "meg", "variant": "paper"},
        (0.2920458104927093, 3.8000080573838204, 128.88979494106025),
    ),
    (
        {"prior": "mh", "variant": "paper"},
        (0.2918632721994072, 3.825915498426184, 129.16405872115865),
    ),
    (
        {"prior": "mh", "variant": "paper", "ft": True, "beta": 2.0},
        (0.28841586830094457, 3.699873864185065, 129.1990638403222),
    ),
    (
        {"prior": "meg", "ft": True, "train_all": False},
        (0.29455600888468325, 3.91956890351139, 109.38474918436259),
    ),
    (
        {"prior": "mh", "batches": "one"},
        (0.2970694531686604, 3.720447577070445, 113.17435154542909),
    ),
]


def _fingerprint(state, p0):
    flat = torch.cat([state.global_params[k].double().flatten() for k in sorted(p0)])
    th = torch.cat(
        [
            state.client_states[c]["theta"][k].double().flatten()
            for c in sorted(state.client_states)
            for k in sorted(p0)
        ]
    )
    w = torch.arange(1, len(flat) + 1, dtype=torch.float64)
    wt = torch.arange(1, len(th) + 1, dtype=torch.float64)
    return flat.sum().item(), (flat * w).sum().item(), (th * wt).sum().item()


@pytest.mark.parametrize("kw, before", BEFORE)
def test_lg_meg_paper_and_one_batch_runs_are_unchanged(kw, before, tiny):
    fed, apply, p0 = tiny
    cfg = TrainConfig(rounds=2, batch_size=3, lr=0.1, local_steps=4, clients_per_round=2)

    def run(**extra):
        algo = build_algorithm("pfedbred", lam=2.0, prox_iters=2, **kw, **extra)
        return run_rounds(Run(algo, apply, cfg, p0, executor="sequential"), fed, Streams(7))

    state = run()
    assert _fingerprint(state, p0) == pytest.approx(before, rel=1e-6)
    if "batches" not in kw:  # lg, meg and Eq. 14's mh read one batch whatever `batches` says
        other = run(batches="one")
        for k in p0:
            assert torch.equal(state.global_params[k], other.global_params[k])


# ---- the catalog ----------------------------------------------------------------------------
def test_grid_mh_runs_take_two_steps_per_iteration(catalog):
    """Every pFedBreD run of the paper and quick grids: the two-batch mh runs record
    `batches: two` and take 2R steps of the cell's batch size, where one-batch runs (lg, meg,
    Eq. 14's mh) take R; Table 4's R = 1 included."""
    from fedbench.grid import all_runs, load_grid

    seen = set()
    for paper in ("pfedbred", "pfedbred_quick"):
        grid = load_grid(ROOT / "config" / "papers" / f"{paper}.yaml", catalog)
        for key in all_runs(grid, catalog, "paper"):
            spec = resolve_run(catalog, "paper", *vars(key).values())
            a = spec["algorithm"]
            if a["algorithm"] != "pfedbred":
                continue
            algo = build_algorithm(a["algorithm"], **a["params"])
            cell = (key.dataset, key.partition, key.model)
            base = resolve_run(catalog, "paper", *cell, "pfedbred-lg-l15", 0)["training"]
            t = spec["training"]
            assert t["batch_size"] == base["batch_size"], key
            if algo.two_batch:
                assert a["params"].get("batches") == "two", key  # run.yaml names the reading
                assert t["local_steps"] == 2 * base["local_steps"], key
                seen.add(base["local_steps"])
            else:
                assert t["local_steps"] == base["local_steps"], key
    assert seen == {1, 20}
    for name in ("pfedbred-mh-onebatch-l15", "pfedbred-mh-onebatch-l30"):
        entry = catalog["algorithms"][name]
        assert entry["batches"] == "one" and "training" not in entry

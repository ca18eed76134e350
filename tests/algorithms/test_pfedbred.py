"""pFedBreD_ns: the Gaussian Bregman term, the three priors on a quadratic, FedAvg limit, FT, AM."""

from dataclasses import dataclass

import pytest
import torch

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import Batch, ClientContext
from fedbench.algorithms.pfedbred import PFedBreD, bregman, half_sq
from fedbench.engine.batches import batch_plan
from fedbench.engine.build import Run
from fedbench.engine.local import local_train_carry
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams

A, C = 2.0, 1.0  # quadratic loss f(θ) = (A/2)(θ - C)², so ∇f(θ) = A(θ - C)


@dataclass(frozen=True)
class Quad(PFedBreD):
    """pFedBreD on the data-free loss f(θ) = (A/2)(θ - C)² of a one-number model."""

    def data_loss(self, apply, params, batch):
        return 0.5 * A * ((params["w"] - C) ** 2).sum()


def _t(v):
    return {"w": torch.tensor([v])}


def test_gaussian_bregman_is_half_squared_distance():
    # g = ½‖·‖²: D_g(θ, μ) = ½‖θ‖² - ½‖μ‖² - <μ, θ - μ> = ½‖θ‖² - <μ, θ> + ½‖μ‖² = ½‖θ - μ‖².
    # θ - μ = (1, -2, 1) over two tensors: ½‖θ - μ‖² = ½ (1 + 4 + 1) = 3, so λ D = 2 * 3 = 6.
    theta = {"a": torch.tensor([1.0, 2.0]), "b": torch.tensor([[0.5]])}
    mu = {"a": torch.tensor([0.0, 4.0]), "b": torch.tensor([[-0.5]])}
    lam = 2.0
    assert (lam * bregman(theta, mu)).item() == pytest.approx(6.0, abs=1e-6)
    direct = lam / 2 * sum(((theta[k] - mu[k]) ** 2).sum() for k in theta)
    assert (lam * bregman(theta, mu)).item() == pytest.approx(direct.item(), abs=1e-6)
    # The closed form used for g = ½‖·‖² equals Eq. 1's general form with the same g.
    general = bregman(theta, mu, g=lambda x: half_sq(x), grad_g=lambda x: dict(x))
    assert general.item() == pytest.approx(bregman(theta, mu).item(), abs=1e-6)
    # Its gradient in θ is λ (θ - μ), the term the prox loop uses.
    q = {k: v.clone().requires_grad_(True) for k, v in theta.items()}
    grads = torch.autograd.grad(lam * bregman(q, mu), list(q.values()))
    for k, g in zip(q, grads):
        torch.testing.assert_close(g, lam * (theta[k] - mu[k]))


# w = 3, θ_{i,r-1} = 2, w_mem = 4, η_α = 0.1, η = 0.5; ∇f(w) = 2 (3 - 1) = 4.
#  lg:        μ = 3 - 0.1 * 4 = 2.6
#  meg:       μ = 3 - 0.5 (4 - 2) = 2.0
#  mh paper:  μ = 3 - 0.4 - 1.0 = 1.6
#  mh code:   w' = 3 - 0.4 = 2.6, ∇f(w') = 2 * 1.6 = 3.2, u = 3 - 0.1 * 3.2 = 2.68,
#             μ = u - 0.5 (4 - 2) = 1.68 (one batch: this loss has no data; the release's two
#             batches are test_pfedbred_mh_release.py's)
@pytest.mark.parametrize(
    "prior, variant, mu, base",
    [
        ("lg", "code", 2.6, 3.0),
        ("lg", "paper", 2.6, 3.0),
        ("meg", "code", 2.0, 3.0),
        ("mh", "paper", 1.6, 3.0),
        ("mh", "code", 1.68, 2.68),
    ],
)
def test_prior_means_on_a_quadratic(prior, variant, mu, base):
    algo = Quad(prior=prior, variant=variant, eta_alpha=0.1, eta=0.5)
    got_mu, got_base, _ = algo.prior_mean(
        lambda q: algo.data_loss(None, q, None), _t(3.0), _t(2.0), _t(4.0)
    )
    assert got_mu["w"].item() == pytest.approx(mu, abs=1e-6)
    assert got_base["w"].item() == pytest.approx(base, abs=1e-6)


# One local step, K = 1, α = 0.1, λ = 2, lr = 0.1 (μ from the table above; mh code with
# `batches: one`):
#  mh code:  θ = u = 2.68; θ ← 2.68 - 0.1 (2 (2.68 - 1) + 2 (2.68 - 1.68)) = 2.68 - 0.536 = 2.144;
#            w ← u - lr λ (μ - θ) = 2.68 - 0.2 (1.68 - 2.144) = 2.7728
#  mh paper: θ = θ_{i,r-1} = 2; θ ← 2 - 0.1 (2 (2 - 1) + 2 (2 - 1.6)) = 1.72;
#            w ← w - lr λ (μ - θ) = 3 - 0.2 (1.6 - 1.72) = 3.024
#  lg code:  θ = μ = 2.6; θ ← 2.6 - 0.1 (2 * 1.6 + 0) = 2.28; w ← 3 - 0.2 (2.6 - 2.28) = 2.936
# The envelope gradient sent for Figure 2's GCE: λ (μ - θ) = 2 (1.68 - 2.144) = -0.928,
# 2 (1.6 - 1.72) = -0.24 and 2 (2.6 - 2.28) = 0.64.
@pytest.mark.parametrize(
    "prior, variant, theta, w, env",
    [
        ("mh", "code", 2.144, 2.7728, -0.928),
        ("mh", "paper", 1.72, 3.024, -0.24),
        ("lg", "code", 2.28, 2.936, 0.64),
    ],
)
def test_one_local_step_on_a_quadratic(prior, variant, theta, w, env):
    algo = Quad(
        prior=prior,
        variant=variant,
        batches="one",
        eta_alpha=0.1,
        eta=0.5,
        lam=2.0,
        alpha=0.1,
        prox_iters=1,
    )
    ctx = ClientContext(0, 1, 0.1, 1, num_train=1, num_steps=1)
    state = {"theta": _t(2.0), "mem": _t(4.0)}
    params, carry = algo.client_begin(_t(3.0), {}, state, ctx)
    x, y = torch.zeros(1, 1), torch.zeros(1, dtype=torch.long)
    params, carry, _ = local_train_carry(
        algo, None, params, carry, x, y, [torch.tensor([0])], 0.1, 0.0, 0.0
    )
    message, state = algo.client_end(_t(3.0), params, carry, state, ctx)
    assert state["theta"]["w"].item() == pytest.approx(theta, abs=1e-5)
    assert 3.0 + message["delta"]["w"].item() == pytest.approx(w, abs=1e-5)
    assert message["envelope"]["w"].item() == pytest.approx(env, abs=1e-5)
    if algo.memorised:
        assert state["mem"]["w"].item() == pytest.approx(w, abs=1e-5)


CFG = dict(rounds=2, batch_size=4, lr=0.1, local_epochs=1, clients_per_round=2)


@pytest.mark.parametrize("prior", ["lg", "meg", "mh"])
def test_fedavg_limit(prior, tiny):
    """Code variant with η_α = η = 0 (μ = w, pFedMe's Non-PP prior), K = 1 and αλ = 1 is FedAvg.

    The prox loop starts at μ = u = w: θ = w - α(∇f(w) + λ(w - w)) = w - α∇f(w), so w's step is
    lr λ (μ - θ) = lr λ α ∇f(w) = lr ∇f(w), FedAvg's SGD step (momentum and weight decay act on it
    alike); mh's extra step η_α ∇f(w') vanishes. Only sampled clients are aggregated, and each
    client's batches do not depend on who else trains, so the global models agree every round.
    mh with one batch per step (`batches: two` leaves w still at each pair's first step).
    """
    fed, apply, p0 = tiny
    cfg = TrainConfig(**CFG, momentum=0.9, weight_decay=1e-3)
    algo = build_algorithm(
        "pfedbred",
        prior=prior,
        batches="one",
        eta=0.0,
        eta_alpha=0.0,
        prox_iters=1,
        lam=2.0,
        alpha=0.5,
    )
    ours = run_rounds(Run(algo, apply, cfg, p0, executor="sequential"), fed, Streams(3))
    ref = run_rounds(
        Run(build_algorithm("fedavg"), apply, cfg, p0, executor="sequential"), fed, Streams(3)
    )
    for k in p0:
        torch.testing.assert_close(ours.global_params[k], ref.global_params[k], rtol=0, atol=1e-6)
    assert not torch.equal(ours.global_params["body.1.weight"], p0["body.1.weight"])


def _one_client(algo, tiny):
    # Four steps (two of mh's two-batch iterations), the step marks as the engine draws them.
    fed, apply, p0 = tiny
    plan = batch_plan(fed.train[0], 4, Streams(2).generator("batches", 1, 0), steps=4)
    ctx = ClientContext(0, 1, 0.1, 1, num_train=9, num_steps=len(plan))
    state = algo.init_client_state(0, p0, None)
    params, carry = algo.client_begin(p0, {}, state, ctx)
    noise = algo.step_noise(None, ctx, p0)
    params, carry, _ = local_train_carry(
        algo, apply, params, carry, fed.x, fed.y, plan, 0.1, 0.0, 0.0, noise
    )
    message, state = algo.client_end(p0, params, carry, state, ctx)
    return plan, message, state


def test_ft_tunes_only_the_evaluated_personal_model(tiny):
    # FT: θ_i is evaluated after one more SGD step (ft_lr) on the client's last batch (mh's
    # last B2); what is sent and what θ_i and w_mem carry to the next round are unchanged.
    fed, apply, p0 = tiny
    _, msg0, st0 = _one_client(build_algorithm("pfedbred"), tiny)
    algo = build_algorithm("pfedbred", ft=True, ft_lr=0.3)
    plan, msg1, st1 = _one_client(algo, tiny)
    for k in p0:
        assert torch.equal(msg0["delta"][k], msg1["delta"][k])
        assert torch.equal(st0["theta"][k], st1["theta"][k])
        assert torch.equal(st0["mem"][k], st1["mem"][k])
    theta = {k: v.clone().requires_grad_(True) for k, v in st1["theta"].items()}
    idx = plan[-1]
    loss = torch.nn.functional.cross_entropy(apply(theta, fed.x[idx]), fed.y[idx])
    grads = dict(zip(theta, torch.autograd.grad(loss, list(theta.values()))))
    tuned = algo.personal_params("personal", p0, st1)
    untuned = build_algorithm("pfedbred").personal_params("personal", p0, st0)
    for k in p0:
        torch.testing.assert_close(tuned[k], st1["theta"][k] - 0.3 * grads[k], rtol=0, atol=1e-6)
        assert torch.equal(untuned[k], st0["theta"][k])
    assert not torch.equal(tuned["body.1.weight"], untuned["body.1.weight"])


def test_am_doubles_the_server_step_only(tiny):
    # AM (β = 2): w ← (1 - β) w + β avg = w + 2 (avg - w); clients train identically in round 1.
    fed, apply, p0 = tiny
    cfg = TrainConfig(**{**CFG, "rounds": 1})
    runs = {
        b: run_rounds(Run(build_algorithm("pfedbred", beta=b), apply, cfg, p0), fed, Streams(4))
        for b in (1.0, 2.0)
    }
    for k in p0:
        step = runs[1.0].global_params[k] - p0[k]
        torch.testing.assert_close(runs[2.0].global_params[k], p0[k] + 2 * step)
    for cid, st in runs[1.0].client_states.items():
        for k in p0:
            assert torch.equal(st["theta"][k], runs[2.0].client_states[cid]["theta"][k])


def test_train_all_trains_every_client_and_personal_protocol_reports(tiny):
    fed, apply, p0 = tiny
    cfg = TrainConfig(**{**CFG, "rounds": 1})
    for train_all, trained in ((True, 4), (False, 2)):
        algo = build_algorithm("pfedbred", train_all=train_all, prox_iters=1)
        state = run_rounds(Run(algo, apply, cfg, p0, executor="sequential"), fed, Streams(4))
        moved = [
            not torch.equal(s["theta"]["body.1.weight"], p0["body.1.weight"])
            for s in state.client_states.values()
        ]
        assert sum(moved) == trained
        assert set(state.records[-1]["summary"]) == {"global", "personal"}


@pytest.mark.parametrize("variant", ["code", "paper"])
def test_envelope_and_theta_are_the_last_steps_under_momentum_and_weight_decay(variant, tiny):
    # Three steps of meg with momentum and weight decay: the client sends exactly the last step's
    # λ(μ - θ) and keeps its θ, recomputed here from the carry before that step (θ_i, w_mem), w
    # and the batch; momentum and weight decay act on w only (θ_i is carried, not trained).
    fed, apply, p0 = tiny
    algo = build_algorithm("pfedbred", prior="meg", variant=variant, lam=2.0, prox_iters=2)
    plan = batch_plan(fed.train[0], 4, Streams(2).generator("batches", 1, 0), epochs=1)
    ctx = ClientContext(0, 1, 0.1, 1, num_train=9, num_steps=len(plan))
    state = algo.init_client_state(0, p0, None)
    state["mem"] = {k: v + 0.05 for k, v in p0.items()}
    state["theta"] = {k: v - 0.05 for k, v in p0.items()}
    params, carry = algo.client_begin(p0, {}, state, ctx)
    assert set(params) == set(p0)
    args = (fed.x, fed.y, plan[:-1], 0.1, 0.9, 1e-2)
    w, mid, _ = local_train_carry(algo, apply, params, carry, *args)
    assert all(not v.any() for v in carry["env"].values())
    after, last, _ = local_train_carry(algo, apply, params, carry, *args[:2], plan, *args[3:])
    message, new_state = algo.client_end(p0, after, last, state, ctx)
    mu = {k: w[k] - algo.eta * (state["mem"][k] - mid["theta"][k]) for k in w}
    batch = Batch(fed.x[plan[-1]], fed.y[plan[-1]])
    # code, meg: the prox loop starts at w; paper: at the previous step's θ_i.
    th = dict(w) if variant == "code" else dict(mid["theta"])
    for _ in range(2):
        g = torch.func.grad(lambda q: algo.data_loss(apply, q, batch))(th)
        th = {k: th[k] - algo.alpha * (g[k] + 2.0 * (th[k] - mu[k])) for k in th}
    for k in p0:
        torch.testing.assert_close(message["envelope"][k], 2.0 * (mu[k] - th[k]), rtol=0, atol=1e-5)
        torch.testing.assert_close(new_state["theta"][k], th[k], rtol=0, atol=1e-6)
        assert torch.equal(new_state["mem"][k], after[k])


@pytest.mark.parametrize(
    "kw",
    [
        dict(variant="paper", prior="mh", ft=True),
        dict(prior="meg", train_all=False, beta=2.0),
    ],
)
def test_executors_agree_on_other_settings(kw, tiny, assert_executors_agree):
    fed, apply, p0 = tiny
    cfg = TrainConfig(**CFG)
    algo = build_algorithm("pfedbred", lam=2.0, prox_iters=2, **kw)
    seq, vec = (
        run_rounds(Run(algo, apply, cfg, p0, executor=ex), fed, Streams(5))
        for ex in ("sequential", "vectorised")
    )
    assert_executors_agree(seq, vec)
    for a, b in zip(seq.records, vec.records, strict=True):
        assert 0.0 < a["server"]["gce"] <= 1.0
        assert b["server"]["gce"] == pytest.approx(a["server"]["gce"], abs=1e-4)
        # GCE over every client only when every client trained (spec §9.22).
        assert ("gce_all" in a["server"]) == algo.train_all == ("gce_all" in b["server"])
        if algo.train_all:
            assert b["server"]["gce_all"] == pytest.approx(a["server"]["gce_all"], abs=1e-4)
    for cid, st in seq.client_states.items():
        for k in p0:
            torch.testing.assert_close(
                st["theta"][k], vec.client_states[cid]["theta"][k], rtol=0, atol=1e-5
            )


@pytest.mark.parametrize(
    "key, value",
    [
        ("prior", "xx"),
        ("variant", "release"),
        ("batches", "2"),
        ("lam", -1.0),
        ("eta", -0.1),
        ("eta_alpha", -0.1),
        ("alpha", 0.0),
        ("prox_iters", 0),
        ("beta", 0.0),
        ("ft", 1),
        ("ft_lr", 0.0),
        ("train_all", "yes"),
    ],
)
def test_bad_hyperparameter_names_the_field(key, value):
    with pytest.raises(ValueError, match=f"bad {key} ="):
        build_algorithm("pfedbred", **{key: value})

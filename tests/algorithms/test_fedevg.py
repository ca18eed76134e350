"""FedEvg (fedevg.md §1): the server's SGLD step against the mixture energy's gradient, the
upload's energies and input gradients by hand, the client loss (PCD sign, SGLD step, synthetic
CE) by hand per variant, the release's step-size schedule, and both executors on a tiny run."""

import dataclasses
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import Batch, ClientContext, ServerContext, ServerSetup
from fedbench.algorithms.fedevg import cosine_betas
from fedbench.engine.build import Run
from fedbench.engine.federation import Federation
from fedbench.engine.functional import make_apply, params_of
from fedbench.engine.loop import run_rounds
from fedbench.engine.server_training import train_server
from fedbench.engine.train_config import TrainConfig
from fedbench.models import build_model
from fedbench.rng import Streams


def linear_apply(p, x):
    """f(x) = W·flatten(x) + b: ∇ₓ f(x)[y] = W[y], by hand."""
    return x.flatten(1) @ p["head.weight"].T + p["head.bias"]


def _ctx(**kw):
    base = dict(client_id=0, round=1, lr=0.1, rounds=5, num_train=8, num_steps=1)
    return ClientContext(**{**base, **kw})


def _server_ctx(rounds=10, round_=3, seed=0, **kw):
    return ServerContext(
        round=round_,
        num_clients=3,
        client_ids=(0, 1, 2),
        lr=0.1,
        rounds=rounds,
        rng=torch.Generator().manual_seed(seed),
        **kw,
    )


def test_the_release_schedule_gives_the_specs_values():
    # fedevg.md §6.2: T = 500, start 10, end 1.0 (code) and 0.01 (thesis), rounded as there.
    code, thesis = cosine_betas(10.0, 1.0, 500), cosine_betas(10.0, 0.01, 500)
    for t, want in {0: 9.9992, 99: 9.9813, 249: 9.9436, 479: 9.1643, 497: 5.0001, 499: 1.0}.items():
        assert float(code[t]) == pytest.approx(want, abs=6e-4), t
    for t, want in {0: 9.9991, 449: 9.6152, 497: 4.4501, 499: 0.01}.items():
        assert float(thesis[t]) == pytest.approx(want, abs=6e-4), t
    assert len(code) == 500


def test_server_step_without_noise_is_a_gradient_step_on_the_mixture_energy():
    """With exp(−E_i) as the clients' weights (eq. 4.13 before the signed replacement), the
    step moves x̃ by −β ∇ₓ E_mix, E_mix = −log Σ_i w_i exp(−E_i(x)) (eq. 4.11)."""
    g = torch.Generator().manual_seed(0)
    M, S = 4, 3
    x = torch.rand(M, 1, 2, 2, generator=g) * 0.5 + 0.25
    centres = torch.rand(S, 1, 1, 2, 2, generator=g)
    n = torch.tensor([5.0, 10.0, 20.0])

    def energies(xs):  # E_i(x_j) = ||x_j − c_i||², one row per client
        return ((xs[None] - centres) ** 2).flatten(2).sum(-1)

    xs = x.clone().requires_grad_(True)
    w = n / n.sum()
    e_mix = -torch.logsumexp(torch.log(w)[:, None] - energies(xs), dim=0)
    (want_grad,) = torch.autograd.grad(e_mix.sum(), xs)
    per_client = [torch.autograd.grad(energies(xs)[i].sum(), xs)[0] for i in range(S)]
    messages = {
        "grad": torch.stack(per_client),
        "esign": torch.exp(-energies(x)),
        "weight": n,
    }
    # A small β keeps x̃ inside (0, 1), so the clip is inactive and (x − x_new)/β is the step.
    algo = build_algorithm("fedevg", server_noise=0.0, beta_start=0.01, beta_end=0.01)
    state = {"x": x, "y": torch.zeros(M, dtype=torch.long), "energy_grad_norm": 0, "beta": 0}
    ctx = _server_ctx(
        fresh=lambda: {"head.weight": torch.zeros(2, 4), "head.bias": torch.zeros(2)},
        apply=linear_apply,
    )
    _, new = algo.aggregate({}, messages, state, ctx)
    assert 0 < new["x"].min() and new["x"].max() < 1
    torch.testing.assert_close((x - new["x"]) / 0.01, want_grad, rtol=1e-4, atol=1e-5)


def test_one_client_moves_the_set_by_its_own_gradient_and_the_step_clips_to_the_unit_box():
    g = torch.Generator().manual_seed(1)
    x = torch.rand(6, 1, 2, 2, generator=g)
    grad_ = torch.randn(1, 6, 1, 2, 2, generator=g)
    messages = {"grad": grad_, "esign": torch.full((1, 6), math.e), "weight": torch.tensor([7.0])}
    algo = build_algorithm("fedevg", server_noise=0.0)
    ctx = _server_ctx(
        fresh=lambda: {"head.weight": torch.zeros(2, 4), "head.bias": torch.zeros(2)},
        apply=linear_apply,
    )
    state = {"x": x, "y": torch.zeros(6, dtype=torch.long), "energy_grad_norm": 0, "beta": 0}
    _, new = algo.aggregate({}, messages, state, ctx)
    beta = float(algo.betas(10)[2])
    torch.testing.assert_close(new["x"], (x - beta * grad_[0]).clamp(0, 1))
    assert new["energy_grad_norm"] == pytest.approx(float(grad_[0].norm()))
    assert new["beta"] == pytest.approx(beta)


def test_the_server_noise_follows_the_variant():
    x = torch.full((4, 1, 1, 1), 0.5)
    messages = {
        "grad": torch.zeros(1, 4, 1, 1, 1),
        "esign": torch.ones(1, 4),
        "weight": torch.tensor([1.0]),
    }
    state = {"x": x, "y": torch.zeros(4, dtype=torch.long), "energy_grad_norm": 0, "beta": 0}
    spread = {}
    for variant in ("code", "thesis"):
        ctx = _server_ctx(
            fresh=lambda: {"head.weight": torch.zeros(2, 1), "head.bias": torch.zeros(2)},
            apply=linear_apply,
        )
        _, new = build_algorithm("fedevg", variant=variant).aggregate({}, messages, state, ctx)
        eps = torch.randn(x.shape, generator=torch.Generator().manual_seed(0))
        spread[variant] = (new["x"] - 0.5) / eps
    torch.testing.assert_close(spread["code"], torch.full_like(x, 1e-4))
    torch.testing.assert_close(spread["thesis"], torch.full_like(x, 0.01))


def test_the_upload_is_the_signed_energy_weight_and_the_input_gradient():
    W = torch.tensor([[1.0, -2.0, 0.5, 0.0], [0.0, 0.0, 0.0, 0.0], [-1.0, -1.0, -1.0, -1.0]])
    p = {"head.weight": W, "head.bias": torch.zeros(3)}
    x = torch.full((3, 1, 2, 2), 0.5)
    y = torch.tensor([0, 1, 2])  # logits −0.25, 0, −2 -> signs −1, 0, −1
    algo = build_algorithm("fedevg", spectral_norm="none", grad_clip=None)
    msg, _ = algo.client_end({}, p, {"init": x, "labels": y}, {}, _ctx(apply=linear_apply))
    f = torch.tensor([-0.25, 0.0, -2.0])
    torch.testing.assert_close(msg["esign"], torch.exp(torch.sign(f)))
    assert msg["esign"].tolist() == pytest.approx([math.exp(-1), 1.0, math.exp(-1)])
    torch.testing.assert_close(msg["grad"], -W[y].reshape(3, 1, 2, 2))  # ∇ₓ(−f(x)[y])
    assert msg["weight"] == 8.0
    clipped, _ = build_algorithm("fedevg", spectral_norm="none", grad_clip=0.75).client_end(
        {}, p, {"init": x, "labels": y}, {}, _ctx(apply=linear_apply)
    )
    torch.testing.assert_close(clipped["grad"], (-W[y]).clamp(-0.75, 0.75).reshape(3, 1, 2, 2))


def test_exact_spectral_norm_divides_the_last_weight_by_its_largest_singular_value():
    g = torch.Generator().manual_seed(2)
    W = torch.randn(3, 4, generator=g)
    p = {"head.weight": W, "head.bias": torch.zeros(3)}
    x = torch.rand(5, 1, 2, 2, generator=g)
    net = build_algorithm("fedevg", spectral_norm="exact").net(linear_apply)
    sigma = torch.linalg.svdvals(W)[0]
    torch.testing.assert_close(net(p, x), x.flatten(1) @ (W / sigma).T)
    with pytest.raises(KeyError, match="sn_param"):
        build_algorithm("fedevg", spectral_norm="exact", sn_param="fc.weight").net(linear_apply)(
            p, x
        )


@pytest.mark.parametrize("variant,sign", [("code", "code"), ("thesis", "code"), ("code", "thesis")])
def test_client_loss_by_hand(variant, sign):
    g = torch.Generator().manual_seed(3)
    W, b = torch.randn(3, 4, generator=g), torch.randn(3, generator=g)
    p = {"head.weight": W, "head.bias": b}
    init = torch.rand(5, 1, 2, 2, generator=g)
    buffer = torch.rand(5, 1, 2, 2, generator=g)  # the PCD chains moved away from D_init
    labels = torch.tensor([0, 1, 2, 0, 1])
    xb, yb = torch.rand(4, 1, 2, 2, generator=g), torch.tensor([2, 0, 1, 1])
    idx = torch.tensor([3, 0, 4])
    eps = torch.randn(1, 3, 1, 2, 2, generator=g)
    algo = build_algorithm(
        "fedevg", variant=variant, pcd_sign=sign, spectral_norm="none", grad_clip=None
    )
    carry = {"buffer": buffer, "init": init, "labels": labels}
    noise = {"idx": idx, "eps": eps}
    carry = {**carry, **algo.before_step(linear_apply, p, Batch(xb, yb), carry, noise)}
    loss, new = algo.local_loss(linear_apply, p, Batch(xb, yb), carry, noise)

    def f(x, y):
        return (x.flatten(1) @ W.T + b).gather(1, y[:, None]).squeeze(1)

    ys = labels[idx]
    # One SGLD step raising the label's logit: x + γ·W[y] + σ·ε, then clipped to [0, 1].
    moved = (buffer[idx] + W[ys].reshape(3, 1, 2, 2) + 0.01 * eps[0]).clamp(0, 1)
    pcd = -f(xb, yb).mean() + f(moved, ys).mean()
    if sign == "thesis":
        pcd = -pcd
    synthetic = init[idx] if variant == "code" else buffer[idx]
    ce = F.cross_entropy(linear_apply(p, xb), yb) + 0.1 * F.cross_entropy(
        linear_apply(p, synthetic), ys
    )
    torch.testing.assert_close(carry["neg"], moved)
    torch.testing.assert_close(loss, pcd + ce)
    want = buffer.clone()
    want[idx] = moved
    torch.testing.assert_close(new["buffer"], want)


def test_bad_settings_name_their_key():
    with pytest.raises(ValueError, match="variant"):
        build_algorithm("fedevg", variant="paper")
    with pytest.raises(ValueError, match="spc"):
        build_algorithm("fedevg", spc=0)
    with pytest.raises(ValueError, match="grad_clip"):
        build_algorithm("fedevg", grad_clip=-1.0)
    with pytest.raises(ValueError, match="pcd_sign"):
        build_algorithm("fedevg", pcd_sign="minus")


def test_the_synthetic_set_starts_gaussian_balanced_and_class_sorted():
    algo = build_algorithm("fedevg", spc=3, fid="none")
    state = algo.init_server_state({}, ServerSetup((1, 4, 4), 4, torch.Generator().manual_seed(0)))
    assert state["x"].shape == (12, 1, 4, 4)
    assert state["y"].tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert state["x"].min() < 0 < state["x"].max()  # N(0, 1), not clipped before round 1


# -- a tiny run through the engine -------------------------------------------------------------


def _image_federation(num_clients=3, per_client=12, side=8, classes=3, seed=0, dtype=None):
    rng = np.random.default_rng(seed)
    n = num_clients * per_client
    y = rng.integers(0, classes, size=n)
    x = rng.random((n, 1, side, side)).astype(np.float32) * 0.3
    for c in range(classes):  # a bright band per class
        x[y == c, :, c * 2 : c * 2 + 2, :] += 0.6
    idx = np.arange(n).reshape(num_clients, per_client)
    cut = per_client * 3 // 4
    fed = Federation.from_arrays(
        x,
        y.astype(np.int64),
        [r[:cut] for r in idx],
        [r[cut:] for r in idx],
        x[:6],
        y[:6].astype(np.int64),
        classes,
        torch.device("cpu"),
    )
    if dtype is not None:
        fed = dataclasses.replace(fed, x=fed.x.to(dtype), x_test=fed.x_test.to(dtype))
    return fed


def _tiny_run(executor, dtype=None, rounds=2, **algo_kw):
    fed = _image_federation(dtype=dtype)
    shape = (1, 8, 8)

    def net(seed):
        model = build_model("fedevg_resnet10", shape, 3, init_seed=seed, hidden=4)
        return model if dtype is None else model.to(dtype)

    def fresh_init(*key):
        return params_of(net(int(np.random.SeedSequence([7, *key]).generate_state(1)[0])))

    model = net(0)
    cfg = TrainConfig(
        rounds=rounds,
        batch_size=4,
        lr=1e-3,
        local_epochs=1,
        participation=1.0,
        optimizer="adam",
        betas=(0.5, 0.999),
        weight_decay=1e-4,
    )
    algo = build_algorithm("fedevg", spc=2, synthetic_batch=4, fid_extractor="proxy", **algo_kw)
    return run_rounds(
        Run(
            algo, make_apply(model), cfg, params_of(model), executor=executor, fresh_init=fresh_init
        ),
        fed,
        Streams(0),
    ), params_of(model)


def test_a_tiny_run_refines_the_set_and_evaluates_the_server_classifier():
    state, p0 = _tiny_run("sequential")
    x = state.server_state["x"]
    assert x.shape == (6, 1, 8, 8) and 0 <= x.min() and x.max() <= 1
    assert state.server_state["energy_grad_norm"] > 0
    assert any(not torch.equal(state.global_params[k], p0[k]) for k in p0)
    last = state.records[-1]
    assert last["server"]["beta"] == pytest.approx(float(cosine_betas(10.0, 1.0, 2)[1]), rel=1e-5)
    assert "global" in last["summary"]


@pytest.mark.parametrize(
    "reading",
    [
        {},  # the release's: pcd_rows batch, sn_start random, upload_after evaluation, ...
        {
            "pcd_rows": "synthetic_batch",
            "sn_start": "uniform",
            "upload_after": "training",
            "groupnorm": "fresh",
            "server_test": "all",
        },
    ],
    ids=["release", "other"],
)
def test_both_executors_compute_the_same_rounds(reading):
    """In float64 the two executors agree over two rounds (uneven last batches, which read
    fewer synthetic rows under `pcd_rows: batch`, the server step and classifier, the
    power-iteration spectral norm with its round-1 and round-2 starts and the test-split
    iterations before the upload, the inherited GroupNorm included): to 1e-5 on the synthetic set
    and on the server classifier, whose Adam steps normalise tiny gradients (after one round
    they agree to 2e-10 and 2e-9; the second round's clients amplify that, with the power
    estimate's σ a little more than with the exact one: 3e-6 vs 2e-7 on the set). A small β
    keeps the comparison well conditioned: at β = 10 a 1e-9 difference that flips one logit's
    sign (an e² change of its weight) moves pixels to the other end of [0, 1]. In float32 the
    clients' runs part after a few steps (the PCD gradient is a difference of two nearly equal
    terms and Adam normalises it, so rounding of the vmapped convolutions grows): that is the
    training's sensitivity, not a second rule."""
    kw = dict(dtype=torch.float64, beta_start=0.05, beta_end=0.05, **reading)
    seq, _ = _tiny_run("sequential", **kw)
    vec, _ = _tiny_run("vectorised", **kw)
    torch.testing.assert_close(seq.server_state["x"], vec.server_state["x"], rtol=0, atol=1e-5)
    for k in seq.global_params:
        torch.testing.assert_close(seq.global_params[k], vec.global_params[k], rtol=0, atol=1e-5)
    assert seq.records[-1]["train_loss"] == pytest.approx(vec.records[-1]["train_loss"], rel=1e-6)


def test_the_server_classifier_is_trained_only_for_an_evaluation():
    x = torch.full((4, 1, 1, 1), 0.5)
    messages = {
        "grad": torch.ones(1, 4, 1, 1, 1),
        "esign": torch.ones(1, 4),
        "weight": torch.tensor([1.0]),
    }
    state = {"x": x, "y": torch.tensor([0, 0, 0, 1]), "energy_grad_norm": 0, "beta": 0}
    calls = []

    def fresh():
        calls.append(1)
        return {"head.weight": torch.zeros(2, 1), "head.bias": torch.zeros(2)}

    previous = {"head.weight": torch.ones(2, 1), "head.bias": torch.ones(2)}
    algo = build_algorithm("fedevg", server_epochs=3, server_batch=2)
    quiet = ServerContext(
        **{**_server_ctx(fresh=fresh, apply=linear_apply).__dict__, "evaluated": False}
    )

    def server_step(ctx):  # the engine's: the aggregation, then the server's training
        params, new = algo.aggregate(previous, messages, state, ctx)
        return train_server(algo, params, new, ctx, None)

    kept, new = server_step(quiet)
    assert kept is previous and not calls and not torch.equal(new["x"], x)  # x̃ moved anyway
    ctx = _server_ctx(fresh=fresh, apply=linear_apply)
    assert algo.aggregate(previous, messages, state, ctx)[0] is previous  # no fit in aggregate
    trained, _ = server_step(ctx)
    assert calls == [1] and not torch.equal(trained["head.bias"], torch.zeros(2))  # 3 x 2 steps
    # The engine's fit is the task's: 3 shuffled passes of 2 rows, Adam, from fresh()'s zeros.
    task = algo.server_fit(previous, {**state, "x": new["x"]}, ctx)
    assert (task.epochs, task.batch, task.lr) == (3, 2, algo.server_lr)


def test_fid_of_the_set_at_evaluation_rounds_and_a_missing_inception_file_stops_before_round_1(
    tmp_path,
):
    from fedbench.metrics.fid import fid, proxy_features

    g = torch.Generator().manual_seed(5)
    x = torch.rand(6, 1, 8, 8, generator=g)
    real = torch.rand(20, 1, 8, 8, generator=g)
    messages = {
        "grad": torch.zeros(1, 6, 1, 8, 8),
        "esign": torch.ones(1, 6),
        "weight": torch.ones(1),
    }
    state = {"x": x, "y": torch.arange(6) % 3, "energy_grad_norm": 0, "beta": 0, "fid": math.nan}
    algo = build_algorithm("fedevg", server_noise=0.0, fid_extractor="proxy")
    ctx = _server_ctx(fresh=None, apply=linear_apply)
    ctx = ServerContext(**{**ctx.__dict__, "evaluated": False, "test": (real, torch.zeros(20))})
    _, quiet = algo.aggregate({}, messages, state, ctx)
    assert math.isnan(quiet["fid"])  # not an evaluation round
    want = fid(x, real, "code", extractor=proxy_features()).value
    algo_fid = algo.fid_of(x, real)
    assert algo_fid == pytest.approx(want) and algo_fid > 0
    assert algo.server_metrics({**quiet, "fid": algo_fid})["fid"] == pytest.approx(want)
    missing = build_algorithm("fedevg", fid_weights=str(tmp_path / "none.pth"))
    with pytest.raises(FileNotFoundError, match="fid.weights"):
        missing.init_server_state({}, ServerSetup((1, 8, 8), 3, torch.Generator()))
    assert build_algorithm("fedevg", fid="none").init_server_state(
        {}, ServerSetup((1, 8, 8), 3, torch.Generator())
    )["x"].shape == (30, 1, 8, 8)


def test_power_spectral_norm_follows_torchs_parametrisation_forward_by_forward():
    """`spectral_norm: power` is the release's torch.nn.utils.parametrizations.spectral_norm:
    from the same registered (u, v), each training-mode forward takes one power iteration and
    divides by σ = uᵀWv; an eval-mode forward takes none."""
    from fedbench.algorithms.fedevg import registered_pair, uniform_start

    torch.manual_seed(0)
    w = torch.randn(5, 12)
    b = torch.randn(5)
    layer = torch.nn.Linear(12, 5)
    with torch.no_grad():
        layer.weight.copy_(w)
        layer.bias.copy_(b)
    torch.nn.utils.parametrizations.spectral_norm(layer)
    pair = registered_pair(w, *uniform_start(w), 15)
    sn = layer.parametrizations.weight[0]
    sn._u.copy_(pair["sn_u"])
    sn._v.copy_(pair["sn_v"])
    algo = build_algorithm("fedevg", spectral_norm="power")
    carry = dict(pair)
    params = {"head.weight": w, "head.bias": b}
    train_net = algo.net(linear_apply, carry, train=True)
    x = torch.randn(4, 12)
    layer.train()
    for _ in range(3):
        torch.testing.assert_close(train_net(params, x), layer(x), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(carry["sn_u"], sn._u)
    torch.testing.assert_close(carry["sn_v"], sn._v)
    layer.eval()
    eval_net = algo.net(linear_apply, carry)
    torch.testing.assert_close(eval_net(params, x), layer(x), rtol=1e-6, atol=1e-6)
    # 15 iterations at registration already put σ near the largest singular value.
    sigma = float(pair["sn_u"] @ (w @ pair["sn_v"]))
    assert sigma == pytest.approx(float(torch.linalg.matrix_norm(w, ord=2)), rel=1e-3)

"""FedCGAN and FedCVAE (fedevg.md §2): a client's local training against the release's loop
written with torch modules and two torch optimisers, the losses by hand, FedAvg of parameters
and running statistics, the server's samples and classifier, and what the engine evaluates."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import Algorithm, ServerContext, ServerSetup
from fedbench.algorithms.fedcgan_fedcvae import DROPOUT_KEY, SEED_HIGH, kl_to_standard_normal
from fedbench.engine.build import Run
from fedbench.engine.federation import Federation
from fedbench.engine.functional import Adam, make_apply, params_of
from fedbench.engine.local import local_train_carry
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.models import build_model
from fedbench.rng import Streams

SHAPE = (1, 32, 32)
L = 3


def _gan(seed=0, hidden=4):
    return build_model("fedevg_acgan", SHAPE, L, init_seed=seed, hidden=hidden)


def _vae(seed=0, hidden=4):
    return build_model("fedevg_cvae", SHAPE, L, init_seed=seed, hidden=hidden)


def _data(n=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand((n, *SHAPE), generator=g), torch.randint(0, L, (n,), generator=g)


def _stats(model):
    return {k: v.clone() for k, v in model.named_buffers() if not k.endswith("tracked")}


def test_a_fedcgan_client_trains_as_the_releases_two_optimisers_do():
    """The release's client loop (fedcganclient.py:update) with nn.Modules, two torch Adams and
    the same noise, labels and Dropout seeds: the engine's steps (phase 0: D, phase 1: G, one
    masked Adam) give the same parameters and running statistics."""
    algo = build_algorithm("fedcgan")
    model = _gan()
    ref = _gan()
    x, y = _data()
    batches = [torch.tensor([0, 1, 2, 3]), torch.tensor([4, 5, 6, 7]), torch.tensor([8, 9])]
    seeds = [11, 2**61 + 5, 7]
    steps = [idx for idx in batches for _ in range(2)]
    noise = {
        "seed": torch.tensor(seeds).repeat_interleave(2),
        "phase": torch.arange(len(steps)) % 2,
    }
    adam = Adam(betas=(0.5, 0.999), weight_decay=1e-4)
    carry = {"stats": _stats(model)}
    params, carry, _ = local_train_carry(
        algo,
        make_apply(model),
        params_of(model),
        carry,
        x,
        y,
        steps,
        1e-3,
        0.0,
        0.0,
        noise,
        adam=adam,
    )

    kw = {"lr": 1e-3, "betas": (0.5, 0.999), "weight_decay": 1e-4, "foreach": False}
    d_opt = torch.optim.Adam(ref.head.parameters(), **kw)
    g_opt = torch.optim.Adam(ref.body.parameters(), **kw)
    bce = torch.nn.BCEWithLogitsLoss()
    ref.train()
    for idx, seed in zip(batches, seeds):
        xb, yb = x[idx] * 2 - 1, y[idx]
        gen = torch.Generator().manual_seed(seed)
        z = torch.rand((len(idx), ref.body.noise_dim), generator=gen) * 2 - 1
        y_fake = torch.randint(L, (len(idx),), generator=gen)
        torch.manual_seed(seed % SEED_HIGH)
        fake = ref.generate(z, yb)
        disc, cls = ref.discriminate(torch.cat([fake.detach(), xb]))
        n = len(idx)
        d_loss = (
            bce(disc[n:], torch.ones_like(disc[n:]))
            + bce(disc[:n], torch.zeros_like(disc[:n]))
            + F.cross_entropy(cls[n:], yb)
            + F.cross_entropy(cls[:n], y_fake)
        )
        d_opt.zero_grad()
        d_loss.backward()
        d_opt.step()
        torch.manual_seed((seed + DROPOUT_KEY) % SEED_HIGH)
        fake = ref.generate(z, yb)
        disc, cls = ref.discriminate(fake)
        g_loss = bce(disc, torch.ones_like(disc)) + F.cross_entropy(cls, yb)
        g_opt.zero_grad()
        g_loss.backward()
        g_opt.step()
    for k, v in ref.named_parameters():
        torch.testing.assert_close(params[k], v.detach(), rtol=0, atol=1e-6, msg=k)
    for k, v in _stats(ref).items():
        torch.testing.assert_close(carry["stats"][k], v, rtol=0, atol=1e-6, msg=k)
    p0 = params_of(_gan())
    assert all(not torch.equal(params[k], p0[k]) for k in p0)  # both halves trained


def test_the_fedcvae_loss_is_mse_plus_the_kl_by_hand():
    algo = build_algorithm("fedcvae")
    model = _vae()
    x, y = _data(n=4)
    noise = {"seed": torch.tensor(5), "phase": torch.tensor(0)}
    carry = {"stats": _stats(model)}
    loss, new = algo.local_loss(make_apply(model), params_of(model), _batch(x, y), carry, noise)
    model.train()
    mu, std = model.encode(x)
    eps = torch.randn(mu.shape, generator=torch.Generator().manual_seed(5))
    recon = model.decode(mu + std * eps, y)
    kl = 0.5 * (mu**2 + std**2 - 1 - torch.log(std**2)).sum(1).mean()
    torch.testing.assert_close(loss, ((recon - x) ** 2).mean() + kl)
    for k, v in _stats(model).items():  # the forward pass moved the running statistics alike
        torch.testing.assert_close(new["stats"][k], v)
    assert not torch.equal(
        new["stats"]["body.net.1.running_mean"], carry["stats"]["body.net.1.running_mean"]
    )


def test_the_kl_term_by_hand():
    assert float(kl_to_standard_normal(torch.zeros(2, 3), torch.ones(2, 3))) == pytest.approx(0)
    mu, std = torch.tensor([[1.0, -2.0]]), torch.tensor([[0.5, 2.0]])
    want = 0.5 * ((1 + 0.25 - 1 - np.log(0.25)) + (4 + 4 - 1 - np.log(4)))
    assert float(kl_to_standard_normal(mu, std)) == pytest.approx(want, rel=1e-6)


def _batch(x, y):
    from fedbench.algorithms.base import Batch

    return Batch(x, y)


@pytest.mark.parametrize("name", ["fedcgan", "fedcvae"])
def test_the_server_averages_parameters_as_fedavg_and_statistics_with_the_same_weights(name):
    algo = build_algorithm(name, fid="none")
    model = _gan() if name == "fedcgan" else _vae()
    g0 = params_of(model)
    state = algo.init_server_state(
        g0, ServerSetup(SHAPE, L, torch.Generator().manual_seed(0), make_apply(model))
    )
    assert set(state["stats"]) == set(_stats(model))
    g = torch.Generator().manual_seed(1)
    deltas = {k: torch.randn((2, *v.shape), generator=g) for k, v in g0.items()}
    stats = {k: torch.rand((2, *v.shape), generator=g) for k, v in state["stats"].items()}
    messages = {
        "delta": deltas,
        "weight": torch.tensor([1.0, 3.0], dtype=torch.float64),
        "stats": stats,
    }
    ctx = ServerContext(round=1, num_clients=2, client_ids=(0, 1), lr=0.1, evaluated=False)
    new, new_state = algo.aggregate(g0, messages, state, ctx)
    fedavg, _ = Algorithm().aggregate(g0, messages, {}, ctx)
    for k in g0:
        assert torch.equal(new[k], fedavg[k])
    for k, v in stats.items():
        torch.testing.assert_close(new_state["stats"][k], 0.25 * v[0] + 0.75 * v[1])
    assert not new_state["classifier"]  # trained only at the rounds that evaluate


def _federation(num_clients=2, per_client=10, seed=0):
    rng = np.random.default_rng(seed)
    n = num_clients * per_client
    y = rng.integers(0, L, size=n)
    x = rng.random((n, *SHAPE)).astype(np.float32) * 0.3
    for c in range(L):  # a bright band per class
        x[y == c, :, c * 8 : c * 8 + 8, :] += 0.6
    idx = np.arange(n).reshape(num_clients, per_client)
    cut = per_client * 4 // 5
    return Federation.from_arrays(
        x,
        y.astype(np.int64),
        [r[:cut] for r in idx],
        [r[cut:] for r in idx],
        x[:8],
        y[:8].astype(np.int64),
        L,
        torch.device("cpu"),
    )


def _run(name, executor="sequential", rounds=2, **kw):
    fed = _federation()
    model = _gan() if name == "fedcgan" else _vae()
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
    algo = build_algorithm(name, spc=2, classifier_hidden=4, fid_extractor="proxy", **kw)
    return run_rounds(
        Run(algo, make_apply(model), cfg, params_of(model), executor=executor), fed, Streams(0)
    ), fed


@pytest.mark.parametrize("name", ["fedcgan", "fedcvae"])
def test_a_tiny_run_samples_trains_the_classifier_and_evaluates_it(name):
    state, fed = _run(name)
    s = state.server_state
    assert s["x"].shape == (L * 2, *SHAPE) and 0 <= s["x"].min() and s["x"].max() <= 1
    assert s["y"].tolist() == [0, 0, 1, 1, 2, 2]
    assert np.isfinite(s["fid"]) and s["fid"] > 0
    assert state.records[-1]["server"]["fid"] == pytest.approx(s["fid"], rel=1e-5)
    # What the clients evaluated is the server classifier on their images in the generator's range.
    algo = build_algorithm(name, spc=2, classifier_hidden=4)
    clf = build_model("fedevg_resnet10", SHAPE, L, 0, hidden=4, activation="relu")
    apply, params = algo.eval_model(make_apply(clf), state.global_params, s)
    assert params is s["classifier"]
    x = fed.x[:3]
    scaled = x * 2 - 1 if name == "fedcgan" else x
    want = torch.func.functional_call(clf, params, (scaled,))
    torch.testing.assert_close(apply(params, x), want)
    top1 = state.records[-1]["summary"]["global"]["top1"]["wmean"]
    test_idx = torch.cat(list(fed.test))
    hits = (apply(params, fed.x[test_idx]).argmax(1) == fed.y[test_idx]).float().mean()
    assert top1 == pytest.approx(float(hits), abs=1e-6)


def test_runs_repeat_bit_for_bit_and_the_vectorised_executor_refuses():
    a, _ = _run("fedcgan", rounds=1)
    b, _ = _run("fedcgan", rounds=1)
    for k in a.global_params:
        assert torch.equal(a.global_params[k], b.global_params[k])
    with pytest.raises(ValueError, match="executor: sequential"):
        _run("fedcgan", executor="vectorised", rounds=1)
    with pytest.raises(ValueError, match="executor: sequential"):
        _run("fedcvae", executor="vectorised", rounds=1)


def test_fedcvae_fid_sees_the_releases_shifted_samples_unless_told_otherwise():
    shifted = build_algorithm("fedcvae")
    plain = build_algorithm("fedcvae", release_fid_shift=False)
    x = torch.tensor([0.0, 0.4, 1.0])
    assert shifted.fid_images(x).tolist() == pytest.approx([0.5, 0.7, 1.0])
    assert plain.fid_images(x).tolist() == pytest.approx([0.0, 0.4, 1.0])
    assert build_algorithm("fedcgan").fid_images(torch.tensor([-1.0, 0.0, 1.0])).tolist() == [
        0.0,
        0.5,
        1.0,
    ]


@pytest.mark.parametrize(
    "kw, key",
    [
        ({"spc": 0}, "spc"),
        ({"fid": "inception"}, "fid"),
        ({"classifier_init": "kaiming"}, "classifier_init"),
        ({"server_lr": 0}, "server_lr"),
    ],
)
def test_bad_settings_name_their_key(kw, key):
    with pytest.raises(ValueError, match=key):
        build_algorithm("fedcgan", **kw)


def test_a_classifier_model_is_refused_with_the_models_to_use():
    algo = build_algorithm("fedcgan", fid="none")
    clf = build_model("fedevg_resnet10", SHAPE, L, 0, hidden=4)
    with pytest.raises(ValueError, match="fedevg_acgan"):
        algo.init_server_state(
            params_of(clf), ServerSetup(SHAPE, L, torch.Generator(), make_apply(clf))
        )


@pytest.mark.parametrize("phase", [0, 1])
@pytest.mark.parametrize("name", ["fedcgan", "fedcvae"])
def test_bf16_runs_the_parts_these_algorithms_call_and_keeps_float32_state(name, phase):
    """The parts these algorithms call themselves run in the run's precision (autocast): a
    step's loss and gradient under bf16 are fp32's to bf16's rounding (a path that ignored the
    setting would give fp32's bits). Through BatchNorm at batch 16 a step's gradient differs by
    about 7 %, the loss by 0.05 %. Weights, running statistics and samples stay float32."""
    from fedbench.algorithms.base import Batch
    from fedbench.engine.precision import with_precision

    model = _gan(hidden=16) if name == "fedcgan" else _vae(hidden=16)
    algo = build_algorithm(name)
    x, y = _data(n=16)
    p0 = params_of(model)
    out = {}
    for precision in ("fp32", "bf16"):
        leaves = {k: v.clone().requires_grad_() for k, v in p0.items()}
        noise = {"seed": torch.tensor(3), "phase": torch.tensor(phase)}
        apply = with_precision(make_apply(model), precision)
        loss, new = algo.local_loss(apply, leaves, Batch(x, y), {"stats": _stats(model)}, noise)
        grads = torch.autograd.grad(loss, list(leaves.values()), allow_unused=True)
        flat = [torch.zeros_like(v) if g is None else g for g, v in zip(grads, leaves.values())]
        out[precision] = (loss.detach(), torch.cat([g.flatten() for g in flat]))
        assert {v.dtype for v in new["stats"].values()} == {torch.float32}
    torch.testing.assert_close(out["bf16"][0], out["fp32"][0], rtol=5e-3, atol=0)
    g32, g16 = out["fp32"][1], out["bf16"][1]
    assert 0 < float((g16 - g32).norm() / g32.norm()) < 0.15

    fed = _federation()
    cfg = TrainConfig(
        rounds=1, batch_size=4, lr=1e-3, local_epochs=1, participation=1.0,
        optimizer="adam", precision="bf16",
    )  # fmt: skip
    small = _gan() if name == "fedcgan" else _vae()
    algo = build_algorithm(name, spc=2, classifier_hidden=4, fid="none")
    state = run_rounds(
        Run(algo, make_apply(small), cfg, params_of(small), executor="sequential"), fed, Streams(0)
    )
    assert {v.dtype for v in state.global_params.values()} == {torch.float32}
    assert {v.dtype for v in state.server_state["stats"].values()} == {torch.float32}
    assert state.server_state["x"].dtype == torch.float32

"""FedEvg against its release (vaseline555/FedEvg at 24251ca, issue 37): the five places where
the client step, the spectral norm, the upload, the re-initialisation and the server's test
score follow the release by default, each with its other reading named. Per point: the
expected value worked out by hand on tiny tensors, and the release's code path written out
with plain torch on the same inputs (fedevgclient.py, fedevgserver.py, utils.py, torch's
spectral-norm parametrisation). The executors' agreement over both readings is in
test_fedevg.py (`test_both_executors_compute_the_same_rounds`)."""

import copy
import math
from functools import partial

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import Batch, ClientContext, ServerContext
from fedbench.algorithms.fedevg import (
    SN_STREAM_KEY,
    groupnorm_keys,
    random_start,
    registered_pair,
)
from fedbench.engine.federation import Federation
from fedbench.engine.functional import Adam, make_apply, params_of
from fedbench.engine.local import local_train_carry
from fedbench.engine.loop import RunState, evaluate_round
from fedbench.engine.server_training import train_server
from fedbench.engine.train_config import TrainConfig
from fedbench.models import build_model
from fedbench.rng import Streams

RELEASE = {
    "pcd_rows": "batch",
    "sn_start": "random",
    "upload_after": "evaluation",
    "groupnorm": "inherit",
    "server_test": "code",
}
OTHER = {
    "pcd_rows": "synthetic_batch",
    "sn_start": "uniform",
    "upload_after": "training",
    "groupnorm": "fresh",
    "server_test": "all",
}


class Linear(nn.Module):
    """f(x) = W·flatten(x) + b under the registry's parameter names (`head.*`)."""

    def __init__(self, d: int, classes: int):
        super().__init__()
        self.head = nn.Linear(d, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(x.flatten(1))


def linear_apply(p, x):
    return x.flatten(1) @ p["head.weight"].T + p["head.bias"]


def _ctx(**kw):
    base = dict(client_id=0, round=2, lr=1e-3, rounds=5, num_train=9, num_steps=3, batch_size=4)
    return ClientContext(**{**base, **kw})


def test_the_release_reading_is_every_default_and_a_bad_value_names_its_key():
    algo = build_algorithm("fedevg")
    assert {k: getattr(algo, k) for k in RELEASE} == RELEASE
    for key, value in OTHER.items():
        assert getattr(build_algorithm("fedevg", **{key: value}), key) == value
        with pytest.raises(ValueError, match=rf"{key} must be one of .*'{RELEASE[key]}'"):
            build_algorithm("fedevg", **{key: "paper"})


# -- point 1: a step reads as many synthetic rows as its real batch ------------------------------


def test_a_short_batch_reads_as_many_synthetic_rows_by_hand():
    """B = 4, M = 5: each step draws min(B, M) = 4 rows; a real batch of 2 reads the first 2
    (the release's randperm(M)[:2] is that permutation's prefix) in the PCD term, the synthetic
    cross-entropy and the buffer; the padded batch of the vectorised executor reads the same."""
    g = torch.Generator().manual_seed(3)
    W, b = torch.randn(3, 4, generator=g), torch.randn(3, generator=g)
    p = {"head.weight": W, "head.bias": b}
    init = torch.rand(5, 1, 2, 2, generator=g)
    buffer = torch.rand(5, 1, 2, 2, generator=g)
    labels = torch.tensor([0, 1, 2, 0, 1])
    xb, yb = torch.rand(2, 1, 2, 2, generator=g), torch.tensor([2, 0])
    idx = torch.tensor([3, 0, 4, 1])
    eps = torch.randn(1, 4, 1, 2, 2, generator=g)
    algo = build_algorithm("fedevg", spectral_norm="none", grad_clip=None)
    carry = {"buffer": buffer, "init": init, "labels": labels, "neg": torch.zeros(4, 1, 2, 2)}
    noise = {"idx": idx, "eps": eps}

    def f(x, y):
        return (x.flatten(1) @ W.T + b).gather(1, y[:, None]).squeeze(1)

    read = idx[:2]
    ys = labels[read]
    moved = (buffer[read] + W[ys].reshape(2, 1, 2, 2) + 0.01 * eps[0, :2]).clamp(0, 1)
    pcd = -f(xb, yb).mean() + f(moved, ys).mean()
    ce = F.cross_entropy(linear_apply(p, xb), yb) + 0.1 * F.cross_entropy(
        linear_apply(p, init[read]), ys
    )
    want_buffer = buffer.clone()
    want_buffer[read] = moved
    padded = Batch(torch.cat([xb, xb[:1], xb[:1]]), torch.cat([yb, yb[:1], yb[:1]]))
    padded = padded._replace(mask=torch.tensor([1.0, 1.0, 0.0, 0.0]))
    for batch in (Batch(xb, yb), padded):
        c = {**carry, **algo.before_step(linear_apply, p, batch, carry, noise)}
        loss, new = algo.local_loss(linear_apply, p, batch, c, noise)
        torch.testing.assert_close(loss, pcd + ce)
        torch.testing.assert_close(new["buffer"], want_buffer)
    # `synthetic_batch` reads every drawn row whatever the batch.
    other = build_algorithm(
        "fedevg", spectral_norm="none", grad_clip=None, pcd_rows="synthetic_batch"
    )
    c = {**carry, **other.before_step(linear_apply, p, Batch(xb, yb), carry, noise)}
    loss, _ = other.local_loss(linear_apply, p, Batch(xb, yb), c, noise)
    ys4 = labels[idx]
    moved4 = (buffer[idx] + W[ys4].reshape(4, 1, 2, 2) + 0.01 * eps[0]).clamp(0, 1)
    pcd4 = -f(xb, yb).mean() + f(moved4, ys4).mean()
    ce4 = F.cross_entropy(linear_apply(p, xb), yb) + 0.1 * F.cross_entropy(
        linear_apply(p, init[idx]), ys4
    )
    torch.testing.assert_close(loss, pcd4 + ce4)


@pytest.mark.parametrize(
    "rows,B,width", [("batch", 4, 4), ("batch", 64, 6), ("synthetic_batch", 4, 5)]
)
def test_each_step_draws_a_permutation_prefix_of_the_width(rows, B, width):
    algo = build_algorithm("fedevg", spc=2, synthetic_batch=5, pcd_rows=rows)
    ctx = _ctx(num_steps=3, batch_size=B, num_classes=3, input_shape=(1, 2, 2))
    noise = algo.step_noise(torch.Generator().manual_seed(0), ctx, {})
    assert noise["idx"].shape == (3, width) and noise["eps"].shape == (3, 1, width, 1, 2, 2)
    for row in noise["idx"]:
        assert len(set(row.tolist())) == width and 0 <= int(row.min()) <= int(row.max()) < 6


def release_client_round(module, u, v, x, y, batches, synth_x, synth_y, idx, eps, test_x, lr):
    """fedevgclient.py's update() (client:103-161) with sample() (47-101, `ula`, `pcd`, ld_steps
    1) and energy_gradient() (22-39, ld_threshold 3), then evaluate() (163-205) over the test
    split in batches of B, then upload() (225-227), written out with torch's spectral-norm
    parametrisation on `module.head`. The test supplies the draws: the registered (u, v) in
    place of its random start, each step's randperm(M) and SGLD noise."""
    model = copy.deepcopy(module)
    nn.utils.parametrizations.spectral_norm(model.head)
    sn = model.head.parametrizations.weight[0]
    with torch.no_grad():
        sn._u.copy_(u)
        sn._v.copy_(v)
    model.train()
    inputs_synth, init_synth = synth_x.clone(), synth_x.clone()
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.5, 0.999), weight_decay=1e-4)

    @torch.enable_grad()
    def energy_gradient(xs, ys):
        model.eval()
        xs = xs.detach().clone().requires_grad_(True)
        energy = -model(xs).gather(1, ys.view(-1, 1))
        (grad,) = torch.autograd.grad(energy.sum(), [xs])
        model.train()
        return grad.detach().clip(-3.0, 3.0), energy.detach()

    def sample(num_samples, perm, noise):
        selected = perm[:num_samples]  # randperm(len(inputs_synth))[:num_samples]
        xe, ye = inputs_synth[selected], synth_y[selected]
        xe = xe - 1.0 * energy_gradient(xe, ye)[0] + noise[: len(selected)] * 0.01
        inputs_synth[selected] = xe.clip(0.0, 1.0)
        return xe.clip(0.0, 1.0), ye, selected

    for step, rows in enumerate(batches):
        inputs_ce, targets_ce = x[rows], y[rows]
        inputs_pcd, targets_pcd, selected = sample(inputs_ce.size(0), idx[step], eps[step, 0])
        outputs_ce = model(inputs_ce)
        outputs_pcd = model(inputs_pcd)
        ce_loss = F.cross_entropy(outputs_ce, targets_ce) + F.cross_entropy(
            model(init_synth[selected]), targets_pcd
        ).mul(0.1)
        e_pos = -outputs_ce.gather(1, targets_ce.view(-1, 1)).mean()
        e_neg = -outputs_pcd.gather(1, targets_pcd.view(-1, 1)).mean()
        loss = e_pos - e_neg + ce_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    buffer = inputs_synth.clone()
    with torch.no_grad():  # evaluate(): its own draws, which reach only the PCD buffer
        model.eval()
        g = torch.Generator().manual_seed(99)
        for start in range(0, len(test_x), len(batches[0])):
            inputs_ce = test_x[start : start + len(batches[0])]
            perm = torch.randperm(len(inputs_synth), generator=g)
            noise = torch.randn((len(inputs_synth), *synth_x.shape[1:]), generator=g)
            inputs_pcd, targets_pcd, selected = sample(inputs_ce.size(0), perm, noise)
            model(inputs_ce)
            model(inputs_pcd)
            model(init_synth[selected])
    energy_grad, energy = energy_gradient(init_synth, synth_y)  # upload()
    trained = {
        "head.weight": model.head.parametrizations.weight.original.detach(),
        "head.bias": model.head.bias.detach(),
    }
    return trained, buffer, energy_grad, energy.sign().mul(-1).exp().squeeze(1)


@pytest.mark.parametrize("round_", [1, 2])
def test_a_client_round_against_the_releases_loop(round_):
    """One client's round: 9 training samples in batches of B = 4 (the last reads 1 synthetic
    row), M = 6, 5 test samples (2 test batches: 6 more power iterations before the upload),
    the release's Adam, a head whose two largest singular values are close (so each power
    iteration still moves σ). fedbench's engine loop and hooks against `release_client_round`
    on the same data, draws and registered (u, v): the trained weights, the PCD buffer and the
    upload. Also checks the start: 16 iterations in round 1, 15 after."""
    g = torch.Generator().manual_seed(4)
    L, D = 3, 4
    x = torch.rand(9, 1, 2, 2, generator=g)
    y = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2])
    test_x = torch.rand(5, 1, 2, 2, generator=g)
    synth_x = torch.rand(6, 1, 2, 2, generator=g)
    synth_y = torch.arange(L).repeat_interleave(2)
    module = Linear(D, L)
    with torch.no_grad():  # σ2/σ1 = 0.98, as close as the release's heads: slow power iterations
        module.head.weight.copy_(torch.eye(L, D) * torch.tensor([[1.0], [0.98], [0.9]]))
        module.head.weight.add_(0.01 * torch.rand(L, D, generator=g))
        module.head.bias.zero_()
    fresh = params_of(module)
    streams = Streams(5)
    algo = build_algorithm("fedevg", spc=2, fid="none")
    ctx = _ctx(
        round=round_,
        num_test=5,
        num_classes=L,
        input_shape=(1, 2, 2),
        apply=linear_apply,
        fresh=lambda: dict(fresh),
        algorithm_stream=partial(streams.torch_generator, "algorithm", round_, 0),
    )
    server_state = {"x": synth_x, "y": synth_y}
    params, carry = algo.client_begin({}, server_state, {}, ctx)
    u0, v0 = random_start(fresh["head.weight"], streams.torch_generator("algorithm", round_, 0, 2))
    start = registered_pair(fresh["head.weight"], u0, v0, 15 + (round_ == 1))
    torch.testing.assert_close(carry["sn_u"], start["sn_u"], rtol=0, atol=0)
    torch.testing.assert_close(carry["sn_v"], start["sn_v"], rtol=0, atol=0)
    noise = algo.step_noise(torch.Generator().manual_seed(6), ctx, {})
    batches = [torch.arange(0, 4), torch.arange(4, 8), torch.arange(8, 9)]
    adam = Adam(betas=(0.5, 0.999), weight_decay=1e-4)
    params, last, _ = local_train_carry(
        algo, linear_apply, params, carry, x, y, batches, 1e-3, 0.0, 1e-4, noise, adam=adam
    )
    msg, _ = algo.client_end({}, params, last, {}, ctx)
    want, buffer, grad, esign = release_client_round(
        module,
        carry["sn_u"],
        carry["sn_v"],
        x,
        y,
        batches,
        synth_x,
        synth_y,
        noise["idx"],
        noise["eps"],
        test_x,
        1e-3,
    )
    for k in want:
        torch.testing.assert_close(params[k], want[k], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(msg["grad"], grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(msg["esign"], esign)
    torch.testing.assert_close(last["buffer"], buffer, rtol=1e-5, atol=1e-6)


# -- point 2: the spectral norm's start ----------------------------------------------------------


def _diag_head(s1=1.0, s2=0.9):
    """W = [[s1, 0, 0], [0, s2, 0]]: after k iterations from v0 = (a, b, c), v ∝ (s1^2k a,
    s2^2k b, 0) and u ∝ (s1^(2k−1) a, s2^(2k−1) b)."""
    return torch.tensor([[s1, 0.0, 0.0], [0.0, s2, 0.0]], dtype=torch.float64)


def _closed_form(v0, k, s1=1.0, s2=0.9):
    a, b = float(v0[0]), float(v0[1])
    v = torch.tensor([s1 ** (2 * k) * a, s2 ** (2 * k) * b, 0.0], dtype=torch.float64)
    u = torch.tensor([s1 ** (2 * k - 1) * a, s2 ** (2 * k - 1) * b], dtype=torch.float64)
    return u / u.norm(), v / v.norm()


@pytest.mark.parametrize(
    "start,round_,k",
    [
        ("random", 1, 16),
        ("random", 2, 15),
        ("random", 7, 15),
        ("uniform", 1, 15),
        ("uniform", 2, 15),
    ],
)
def test_the_registered_pair_by_hand(start, round_, k):
    w = _diag_head()
    streams = Streams(11)
    ctx = _ctx(
        round=round_,
        fresh=lambda: {"head.weight": w, "head.bias": torch.zeros(2, dtype=torch.float64)},
        algorithm_stream=partial(streams.torch_generator, "algorithm", round_, 0),
    )
    algo = build_algorithm("fedevg", sn_start=start, pcd_rows="synthetic_batch")
    _, carry = algo.client_begin({}, {"x": torch.zeros(4, 1, 1, 3), "y": torch.zeros(4)}, {}, ctx)
    if start == "random":  # u0 then v0 ~ N(0, 1) from the (round, client, SN_STREAM_KEY) stream
        g = streams.torch_generator("algorithm", round_, 0, SN_STREAM_KEY)
        torch.randn(2, generator=g, dtype=torch.float64)
        v0 = torch.randn(3, generator=g, dtype=torch.float64)
    else:
        v0 = torch.ones(3, dtype=torch.float64)
    u, v = _closed_form(v0 / v0.norm(), k)
    torch.testing.assert_close(carry["sn_u"], u)
    torch.testing.assert_close(carry["sn_v"], v)


def test_torchs_registration_takes_16_iterations_in_training_mode_and_15_in_eval_mode():
    """The release registers torch's parametrisation (client:106-107): u0, v0 ~ N(0, 1)
    normalised, 15 iterations in _SpectralNorm.__init__, and one more from
    register_parametrization's check when the module is in training mode. torch draws from its
    global generator, so this test replays its draws inside fork_rng (nothing leaks out)."""
    w = torch.randn(4, 9, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    f64 = torch.float64
    for training, k in ((True, 16), (False, 15)):
        layer = nn.Linear(9, 4, dtype=f64)
        with torch.no_grad():
            layer.weight.copy_(w)
        layer.train(training)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(123)
            u0 = F.normalize(torch.empty(4, dtype=f64).normal_(0, 1), dim=0, eps=1e-12)
            v0 = F.normalize(torch.empty(9, dtype=f64).normal_(0, 1), dim=0, eps=1e-12)
            torch.manual_seed(123)
            nn.utils.parametrizations.spectral_norm(layer)
        sn = layer.parametrizations.weight[0]
        pair = registered_pair(w, u0, v0, k)
        torch.testing.assert_close(pair["sn_u"], sn._u, rtol=0, atol=1e-12)
        torch.testing.assert_close(pair["sn_v"], sn._v, rtol=0, atol=1e-12)
        for other in (k - 1, k + 1):  # one iteration more or fewer is told apart
            assert not torch.allclose(registered_pair(w, u0, v0, other)["sn_v"], sn._v, atol=1e-9)


# -- point 3: the upload after the release's evaluation pass -------------------------------------


@pytest.mark.parametrize(
    "upload,num_test,k",
    [("evaluation", 5, 6), ("evaluation", 8, 6), ("evaluation", 0, 0), ("training", 5, 0)],
)
def test_the_upload_sigma_by_hand(upload, num_test, k):
    """W = diag(2, 1.8) on 2-pixel inputs, the carry's (u, v) from v = (a, b): ⌈n_test/4⌉ test
    batches of 3 training-mode forwards each take the pair k iterations further, so σ =
    uᵀWv of the closed form; the upload is −W[y]/σ and exp(sgn f(x)[y])."""
    s1, s2 = 2.0, 1.8
    W = torch.tensor([[s1, 0.0], [0.0, s2]], dtype=torch.float64)
    bias = torch.tensor([-0.5, 0.2], dtype=torch.float64)
    p = {"head.weight": W, "head.bias": bias}
    a, b = 0.6, 0.8
    carry = {
        "init": torch.tensor([[[[0.3, 0.1]]], [[[0.2, 0.9]]]], dtype=torch.float64),
        "labels": torch.tensor([0, 1]),
        "sn_u": torch.tensor([a, b], dtype=torch.float64),
        "sn_v": torch.tensor([a, b], dtype=torch.float64),
    }
    algo = build_algorithm("fedevg", grad_clip=None, upload_after=upload)
    msg, _ = algo.client_end({}, p, carry, {}, _ctx(apply=linear_apply, num_test=num_test))
    if k == 0:
        u, v = carry["sn_u"], carry["sn_v"]
    else:
        u = torch.tensor([s1 ** (2 * k - 1) * a, s2 ** (2 * k - 1) * b], dtype=torch.float64)
        v = torch.tensor([s1 ** (2 * k) * a, s2 ** (2 * k) * b], dtype=torch.float64)
        u, v = u / u.norm(), v / v.norm()
    sigma = u @ W @ v
    torch.testing.assert_close(msg["grad"], -(W / sigma)[carry["labels"]].reshape(2, 1, 1, 2))
    f = carry["init"].flatten(1) @ (W / sigma).T + bias
    f = f.gather(1, carry["labels"][:, None]).squeeze(1)
    torch.testing.assert_close(msg["esign"], torch.exp(torch.sign(f)).float())


# -- point 4: GroupNorm parameters carried over ----------------------------------------------------


class GroupNormNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(1, 2, 1, bias=False), nn.GroupNorm(1, 2), nn.Flatten())
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.body(x))


def test_groupnorm_parameters_are_inherited_by_hand():
    apply = make_apply(GroupNormNet())
    assert groupnorm_keys(apply) == ["body.1.weight", "body.1.bias"]
    fresh = {k: torch.full_like(v, 3.0) for k, v in params_of(apply.module).items()}
    glob = {k: torch.full_like(v, -1.0) for k, v in fresh.items()}
    glob["body.1.weight"] = torch.tensor([0.5, 2.0])
    glob["body.1.bias"] = torch.tensor([0.1, -0.1])
    state = {"x": torch.rand(6, 1, 2, 2), "y": torch.arange(3).repeat_interleave(2)}
    ctx = _ctx(apply=apply, fresh=lambda: dict(fresh), num_classes=3)
    for mode, want in (("inherit", glob), ("fresh", fresh)):
        algo = build_algorithm("fedevg", groupnorm=mode, spectral_norm="none")
        params, _ = algo.client_begin(glob, state, {}, ctx)
        for k, v in params.items():
            torch.testing.assert_close(v, want[k] if k.startswith("body.1.") else fresh[k])
    # The server classifier: a fresh network with the previous one's GroupNorm (Adam at lr 0
    # leaves its start as it was), trained also after round 1 under `inherit`.
    messages = {
        "grad": torch.zeros(1, 6, 1, 2, 2),
        "esign": torch.ones(1, 6),
        "weight": torch.ones(1),
    }
    server_state = {**state, "energy_grad_norm": 0.0, "beta": 0.0, "fid": math.nan}
    for mode, round_, evaluated, trains in (
        ("inherit", 3, True, True),
        ("inherit", 1, False, True),
        ("inherit", 2, False, False),
        ("fresh", 1, False, False),
        ("fresh", 3, True, True),
    ):
        calls = []

        def fresh_server(calls=calls):
            calls.append(1)
            return dict(fresh)

        sctx = ServerContext(
            round=round_,
            num_clients=1,
            client_ids=(0,),
            lr=0.1,
            apply=apply,
            rng=torch.Generator().manual_seed(0),
            fresh=fresh_server,
            rounds=5,
            evaluated=evaluated,
        )
        algo = build_algorithm("fedevg", groupnorm=mode, server_lr=0.0, fid="none")
        classifier, new_state = algo.aggregate(glob, messages, server_state, sctx)
        classifier, _ = train_server(algo, classifier, new_state, sctx, None)  # the engine's
        assert len(calls) == trains
        if not trains:
            assert classifier is glob
            continue
        for k, v in classifier.items():
            keep = mode == "inherit" and k.startswith("body.1.")
            torch.testing.assert_close(v, glob[k] if keep else fresh[k])


def release_init_weights(model, init_gain=1.0):
    """utils.py:125-162, init_type xavier, written out: modules picked by class name, the name
    of the torch layer a module is (fedbench's SpectralLinear is the release's nn.Linear)."""

    def init_func(m):
        classname = next(c for c in type(m).__mro__ if c.__module__.startswith("torch.nn")).__name__
        if classname.find("BatchNorm2d") != -1:
            nn.init.normal_(m.weight.data, mean=1.0, std=init_gain)
            nn.init.constant_(m.bias.data, 0.0)
        elif hasattr(m, "weight") and (
            classname.find("Linear") == 0 or classname.find("Conv") == 0
        ):
            nn.init.xavier_normal_(m.weight.data, gain=init_gain)
            if hasattr(m, "bias") and m.bias is not None:
                nn.init.constant_(m.bias.data, 0.0)

    model.apply(init_func)


def test_what_the_releases_init_weights_leaves_is_what_fedevg_inherits():
    """Every parameter of the FedEvg ResNet-10 set to 7, then the release's init_weights: the
    ones still at 7 are exactly those a client and the server classifier inherit."""
    model = build_model("fedevg_resnet10", (1, 8, 8), 3, init_seed=0, hidden=4)
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(7.0)
    with torch.random.fork_rng(devices=[]):
        release_init_weights(model)
    kept = sorted(n for n, p in model.named_parameters() if bool((p == 7.0).all()))
    assert kept and sorted(groupnorm_keys(make_apply(model))) == kept
    assert all(".weight" in k or ".bias" in k for k in kept)


# -- point 5: the server's test score --------------------------------------------------------------


@pytest.mark.parametrize("m,want", [(20, 64), (64, 64), (100, 128), (300, 150)])
def test_the_global_test_rows_by_hand(m, want):
    state = {"x": torch.zeros(m, 1, 2, 2)}
    assert build_algorithm("fedevg").global_test_rows(150, 64, state) == (want, 150)
    assert build_algorithm("fedevg", server_test="all").global_test_rows(150, 64, state) == (
        150,
        150,
    )


def _test_federation(n_test=10):
    g = np.random.default_rng(0)
    x = g.random((8, 1, 1, 2)).astype(np.float32)
    y = np.array([0, 1, 2, 0, 1, 2, 0, 1])
    x_test = g.random((n_test, 1, 1, 2)).astype(np.float32)
    y_test = g.integers(0, 3, n_test)
    fed = Federation.from_arrays(
        x, y, [np.arange(6)], [np.arange(6, 8)], x_test, y_test, 3, torch.device("cpu")
    )
    return fed


def test_the_server_score_against_the_releases_loop():
    """10 test images, M = 6 synthetic ones, B = 4: the release zips ⌈6/4⌉ = 2 synthetic
    batches with the test batches, so it scores the first 8 test images; its loss is the sum of
    their cross-entropies over all 10 (server:361-400; utils.py MetricManager.track/aggregate).
    By hand and written out with DataLoaders."""
    fed = _test_federation()
    W = torch.tensor([[1.0, -2.0], [0.5, 0.5], [-1.0, 1.5]])
    params = {"head.weight": W, "head.bias": torch.tensor([0.1, 0.0, -0.1])}
    synth = torch.rand(6, 1, 1, 2, generator=torch.Generator().manual_seed(0))
    server_state = {"x": synth, "y": torch.tensor([0, 0, 1, 1, 2, 2])}
    cfg = TrainConfig(rounds=1, batch_size=4, lr=0.1, local_epochs=1, participation=1.0)
    state = RunState(global_params=params, server_state=server_state, client_states={0: {}})
    got = {}
    for mode in ("code", "all"):
        algo = build_algorithm("fedevg", server_test=mode)
        got[mode] = evaluate_round(algo, linear_apply, fed, state, cfg)["global_test"]
    logits = linear_apply(params, fed.x_test)
    ce = F.cross_entropy(logits, fed.y_test, reduction="none")
    hits = (logits.argmax(1) == fed.y_test).float()
    assert got["code"]["top1"] == pytest.approx(float(hits[:8].mean()), rel=1e-5)
    assert got["code"]["loss"] == pytest.approx(float(ce[:8].sum() / 10), rel=1e-5)
    assert got["code"]["n"] == 8
    assert got["all"]["top1"] == pytest.approx(float(hits.mean()), rel=1e-5)
    assert got["all"]["loss"] == pytest.approx(float(ce.mean()), rel=1e-5)
    # The release's loop (server:361-400), written out.
    module = Linear(2, 3)
    with torch.no_grad():
        module.head.weight.copy_(W)
        module.head.bias.copy_(params["head.bias"])
    module.eval()
    loss_sum, scores, answers = 0.0, [], []
    synth_loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(synth, server_state["y"]), batch_size=4, shuffle=False
    )
    test_loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(fed.x_test, fed.y_test), batch_size=4, shuffle=False
    )
    with torch.no_grad():
        for (_, _), (inputs, targets) in zip(synth_loader, test_loader):
            outputs = module(inputs)
            loss_sum += F.cross_entropy(outputs, targets).item() * len(outputs)
            scores.append(outputs)
            answers.append(targets)
    release_acc = float((torch.cat(scores).argmax(1) == torch.cat(answers)).float().mean())
    assert got["code"]["top1"] == pytest.approx(release_acc, rel=1e-5)
    assert got["code"]["loss"] == pytest.approx(loss_sum / len(fed.y_test), rel=1e-5)

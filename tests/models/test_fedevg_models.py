"""FedEvg's networks (fedevg.md §2, §4): sizes, shapes, spectral norm, init, torch.func purity."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.func import functional_call, vmap

from fedbench.models import GENERATIVE, MODELS, PLAIN_BACKWARD, build_model
from fedbench.models.fedevg import SpectralLinear

# (input shape, classes, #params of the release's ResNet-10 at h=64, fedevg.md §4)
RESNET_SPEC = [
    ((1, 32, 32), 10, 4_979_914),  # MNIST resized to 32
    ((3, 32, 32), 10, 4_981_066),  # CIFAR-10
    ((3, 64, 64), 7, 5_128_519),  # DermaMNIST
    ((1, 64, 64), 11, 5_258_443),  # OrganCMNIST
]
SHAPES = [(1, 32, 32), (3, 64, 64)]


def _count(m: nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


def _acgan_count(c: int, side: int, classes: int, h: int) -> int:
    """Parameters of acgan.py's Generator + Discriminator, layer by layer (k4 kernels: 16)."""
    big = side == 64
    g_convs = [(2 * h + classes, 4 * h), (4 * h, 2 * h)]
    g_convs += [(2 * h, 2 * h), (2 * h, h)] if big else [(2 * h, h)]
    g = sum(a * b * 16 for a, b in g_convs + [(h, c)]) + 2 * sum(b for _, b in g_convs)
    d_convs = [(c, h), (h, 2 * h), (2 * h, 4 * h)] + ([(4 * h, 4 * h)] if big else [])
    d_bn = 2 * sum(b for _, b in d_convs[1:])  # no BatchNorm after the first conv
    d = sum(a * b * 16 for a, b in d_convs + [(4 * h, 4 * h)]) + d_bn + (4 * h + 1) * (1 + classes)
    return g + d


def _cvae_count(c: int, side: int, classes: int, h: int) -> int:
    """Parameters of cvae.py's Encoder + Decoder (convs with biases, latent 2h)."""
    latent, flat = 2 * h, 4 * h * (side // 16) ** 2
    enc = [(c, h), (h, h), (h, 2 * h), (2 * h, 4 * h)]
    dec = [(4 * h, 2 * h), (2 * h, h), (h, h)]
    convs = sum(a * b * 16 + b for a, b in enc + dec + [(h, c)])
    bns = 2 * sum(b for _, b in enc + dec)
    linears = (flat + 1) * 2 * latent + (latent + classes + 1) * flat
    return convs + bns + linears


@pytest.mark.parametrize(("shape", "classes", "expected"), RESNET_SPEC)
def test_resnet10_parameter_count_matches_spec(shape, classes, expected):
    assert _count(build_model("fedevg_resnet10", shape, classes, init_seed=0)) == expected


@pytest.mark.parametrize("shape", SHAPES)
def test_generative_parameter_counts_match_the_release_layers(shape):
    c, side, _ = shape
    assert _count(build_model("fedevg_acgan", shape, 10, 0, hidden=16)) == _acgan_count(
        c, side, 10, 16
    )
    assert _count(build_model("fedevg_cvae", shape, 10, 0, hidden=16)) == _cvae_count(
        c, side, 10, 16
    )


def test_resnet10_flattens_without_pooling():
    assert build_model("fedevg_resnet10", (3, 32, 32), 10, 0).head.in_features == 8192
    assert build_model("fedevg_resnet10", (3, 64, 64), 7, 0).head.in_features == 32768


@pytest.mark.parametrize("shape", SHAPES)
def test_resnet10_output_shape_and_body_head_split(shape):
    m = build_model("fedevg_resnet10", shape, 7, init_seed=0, hidden=8)
    assert m(torch.randn(2, *shape)).shape == (2, 7)
    names = [n for n, _ in m.named_parameters()]
    assert all(n.startswith(("body.", "head.")) for n in names)
    assert sorted(n for n in names if n.startswith("head.")) == ["head.bias", "head.weight"]
    assert not list(m.buffers())  # GroupNorm only: nothing a forward pass could mutate


@pytest.mark.parametrize("shape", SHAPES)
def test_acgan_shapes_and_ranges(shape):
    c, side, _ = shape
    m = build_model("fedevg_acgan", shape, 5, init_seed=0, hidden=8).eval()
    images = m.generate(torch.zeros(3, 16), torch.tensor([0, 4, 2]))  # noise in R^{2h}
    assert images.shape == (3, c, side, side)
    assert images.abs().max() <= 1.0  # tanh
    assert not torch.allclose(images[0], images[1])  # same noise: the label conditions G
    real_fake, logits = m.discriminate(images)
    assert real_fake.shape == (3, 1) and logits.shape == (3, 5)
    assert torch.equal(m(images), logits)
    sampled = m.sample(torch.tensor([1]), generator=torch.Generator().manual_seed(0))
    assert sampled.shape == (1, c, side, side)


@pytest.mark.parametrize("shape", SHAPES)
def test_cvae_shapes_ranges_and_parts(shape):
    c, side, _ = shape
    m = build_model("fedevg_cvae", shape, 5, init_seed=0, hidden=8).eval()
    x = torch.rand(3, *shape)
    labels = torch.tensor([0, 4, 2])
    recon, mu, std = m(x, labels, eps=torch.zeros(3, 16))
    assert recon.shape == (3, c, side, side) and mu.shape == std.shape == (3, 16)
    assert recon.min() >= 0.0 and recon.max() <= 1.0 and std.min() > 0.0
    assert torch.allclose(recon, m.decode(m.encode(x)[0], labels))  # eps = 0: z = mu
    assert m.sample(labels, generator=torch.Generator().manual_seed(0)).shape == recon.shape


def _effective_matrix(layer: nn.Linear) -> torch.Tensor:
    """The linear map a layer applies, read off its forward pass (rows of I minus the bias)."""
    eye = torch.eye(layer.in_features, dtype=torch.float64)
    return (layer(eye) - layer(torch.zeros(1, layer.in_features, dtype=torch.float64))).T


def test_exact_spectral_norm_makes_the_last_layer_1_lipschitz():
    m = build_model("fedevg_resnet10", (3, 32, 32), 10, 0, hidden=8, spectral_norm="exact")
    head = m.head.double()
    raw = torch.linalg.matrix_norm(head.weight, 2).item()
    assert abs(raw - 1.0) > 0.1  # normalising has something to do
    sigma = torch.linalg.svdvals(_effective_matrix(head))
    assert abs(sigma[0].item() - 1.0) < 1e-5
    assert torch.allclose(sigma / sigma[0], torch.linalg.svdvals(head.weight) / raw)
    plain = build_model("fedevg_resnet10", (3, 32, 32), 10, 0, hidden=8).head.double()
    assert torch.allclose(_effective_matrix(plain), plain.weight)  # "none" is a plain Linear


def test_exact_spectral_norm_keeps_weight_unchanged_and_has_gradients():
    layer = SpectralLinear(6, 3, "exact")
    before = layer.weight.detach().clone()
    layer(torch.randn(4, 6)).sum().backward()
    assert torch.equal(layer.weight, before)  # normalised in forward only, nothing stored
    assert layer.weight.grad is not None and torch.isfinite(layer.weight.grad).all()


def test_resnet10_xavier_init_statistics():
    m = build_model("fedevg_resnet10", (3, 32, 32), 10, init_seed=0)
    conv = m.body[6].main[3].weight  # stage 4's second conv: 512x512x3x3
    expected = math.sqrt(2.0 / (9 * 512 + 9 * 512))  # xavier-normal, gain 1
    assert abs(conv.std().item() / expected - 1.0) < 0.01
    assert abs(conv.mean().item()) < 0.01 * expected
    head = m.head.weight  # 10 x 8192
    assert abs(head.std().item() / math.sqrt(2.0 / (8192 + 10)) - 1.0) < 0.02
    assert torch.equal(m.head.bias, torch.zeros(10))
    norms = [x for x in m.modules() if isinstance(x, nn.GroupNorm)]
    assert len(norms) == 2 + 2 * 4 + 3  # stem, head, two per block, three shortcuts
    assert all(torch.equal(g.weight, torch.ones_like(g.weight)) for g in norms)
    assert all(torch.equal(g.bias, torch.zeros_like(g.bias)) for g in norms)
    convs = [x for x in m.modules() if isinstance(x, nn.Conv2d)]
    assert all(x.bias is None for x in convs)


def test_acgan_normal_init_touches_batchnorm_weights_as_the_release():
    m = build_model("fedevg_acgan", (3, 64, 64), 10, init_seed=0)
    convs = torch.cat(
        [x.weight.flatten() for x in m.modules() if isinstance(x, (nn.Conv2d, nn.ConvTranspose2d))]
    )
    assert abs(convs.std().item() - 0.02) < 0.0005 and abs(convs.mean().item()) < 0.0005
    bn = torch.cat([x.weight for x in m.modules() if isinstance(x, nn.BatchNorm2d)])
    assert abs(bn.mean().item() - 1.0) < 0.005 and abs(bn.std().item() - 0.02) < 0.005
    assert torch.equal(m.head.net[-1].bias, torch.zeros(11))


def test_cvae_default_init_is_the_release_xavier_with_unit_std_batchnorm():
    m = build_model("fedevg_cvae", (1, 32, 32), 10, init_seed=0)
    bn = torch.cat([x.weight for x in m.modules() if isinstance(x, nn.BatchNorm2d)])
    assert abs(bn.mean().item() - 1.0) < 0.15 and abs(bn.std().item() - 1.0) < 0.15
    biases = [x.bias for x in m.modules() if isinstance(x, (nn.Conv2d, nn.ConvTranspose2d))]
    assert len(biases) == 8 and all(torch.equal(b, torch.zeros_like(b)) for b in biases)


def test_activation_choice_changes_the_output_not_the_weights():
    silu = build_model("fedevg_resnet10", (1, 32, 32), 10, 3, hidden=8, activation="silu")
    relu = build_model("fedevg_resnet10", (1, 32, 32), 10, 3, hidden=8, activation="relu")
    for (n, a), (_, b) in zip(silu.named_parameters(), relu.named_parameters(), strict=True):
        assert torch.equal(a, b), n
    x = torch.randn(2, 1, 32, 32)
    assert not torch.allclose(silu(x), relu(x), atol=1e-4)
    assert any(isinstance(x, nn.SiLU) for x in silu.modules())
    assert not any(isinstance(x, nn.SiLU) for x in relu.modules())


def test_init_is_seeded():
    a, b, c = (build_model("fedevg_acgan", (1, 32, 32), 10, s, hidden=8) for s in (1, 1, 2))
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a.body.net[0].weight, c.body.net[0].weight)


@pytest.mark.parametrize("spectral_norm", ["none", "exact"])
def test_resnet10_vmap_over_two_parameter_sets_matches_separate_calls(spectral_norm):
    m = build_model("fedevg_resnet10", (3, 32, 32), 10, 0, hidden=8, spectral_norm=spectral_norm)
    base = {n: p.detach() for n, p in m.named_parameters()}
    gen = torch.Generator().manual_seed(1)
    other = {n: p + 0.05 * torch.randn(p.shape, generator=gen) for n, p in base.items()}
    stacked = {n: torch.stack([base[n], other[n]]) for n in base}
    x = torch.randn(3, 3, 32, 32, generator=gen)
    batched = vmap(lambda p: functional_call(m, p, (x,)))(stacked)
    for i, params in enumerate((base, other)):
        assert torch.allclose(batched[i], functional_call(m, params, (x,)), atol=1e-5)
    assert not torch.allclose(batched[0], batched[1])


def test_generator_runs_functionally_on_its_own_parameters():
    m = build_model("fedevg_acgan", (1, 32, 32), 4, 0, hidden=8, running_stats=False)
    named = m.named_parameters()
    g = {k.removeprefix("body."): v.detach() * 1.5 for k, v in named if k.startswith("body.")}
    noise, labels = torch.rand(2, 16) * 2 - 1, torch.tensor([0, 3])
    out = functional_call(m.body, g, (noise, labels))
    with torch.no_grad():
        for k, v in g.items():
            m.body.get_parameter(k).copy_(v)
    assert torch.allclose(out, m.generate(noise, labels))


@pytest.mark.parametrize(
    ("arch", "shape", "params", "key"),
    [
        ("fedevg_resnet10", (3, 32, 32), {"hidden": 6}, "hidden"),
        ("fedevg_resnet10", (3, 32, 32), {"activation": "gelu"}, "activation"),
        ("fedevg_resnet10", (3, 32, 32), {"spectral_norm": "power"}, "spectral_norm"),
        ("fedevg_resnet10", (3, 32, 32), {"init": "kaiming"}, "init"),
        ("fedevg_resnet10", (3, 32, 32), {"init_gain": -1.0}, "init_gain"),
        ("fedevg_resnet10", (3, 32, 16), {}, "input_shape"),
        ("fedevg_acgan", (1, 28, 28), {}, "input side"),
        ("fedevg_cvae", (1, 40, 40), {}, "input side"),
    ],
)
def test_bad_parameters_are_named(arch, shape, params, key):
    with pytest.raises(ValueError, match=key):
        build_model(arch, shape, 10, 0, **params)


def test_registry_lists():
    assert {"fedevg_resnet10", "fedevg_acgan", "fedevg_cvae"} <= set(MODELS)
    assert GENERATIVE == {"fedevg_acgan", "fedevg_cvae"} and GENERATIVE <= set(MODELS)
    # SiLU and spectral norm: not checked bit-identical without the double-backward graph
    assert not {"fedevg_resnet10", *GENERATIVE} & PLAIN_BACKWARD

"""ResNet-18 + GroupNorm (resnet18_gn, DQN-Fed B.5.2 item 3 / B-D23): torchvision's network, the
CIFAR stem's size, shapes, GroupNorm everywhere, clear errors (both executors agree on it:
tests/engine/test_executors.py)."""

from __future__ import annotations

import pytest
import torch
import torchvision
from torch import nn

from fedbench.engine.vectorised import resolve_executor
from fedbench.models import build_model

SMALL = {"widths": (4, 8, 8, 8)}


def _count(m: nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


def test_imagenet_stem_is_torchvisions_resnet18_bit_for_bit():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        tv = torchvision.models.resnet18(num_classes=10, norm_layer=lambda c: nn.GroupNorm(32, c))
    ours = build_model("resnet18_gn", (3, 32, 32), 10, init_seed=0, stem="imagenet", groups=32)
    theirs = list(tv.parameters())
    mine = list(ours.parameters())
    assert len(mine) == len(theirs) == 62
    assert all(a.shape == b.shape and torch.equal(a, b) for a, b in zip(mine, theirs))
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    assert torch.equal(ours(x), tv(x))


def test_cifar_stem_parameter_count():
    # torchvision's ResNet-18 has 11,689,512 parameters at 1,000 classes (its model card); a
    # 10-class head drops 990 x 513, the 3x3 stem drops 64 x 3 x (49 - 9); GroupNorm has BatchNorm's
    # 2 parameters per channel.
    expected = 11_689_512 - 990 * 513 - 64 * 3 * (49 - 9)
    assert expected == 11_173_962
    assert _count(build_model("resnet18_gn", (3, 32, 32), 10, init_seed=0)) == expected
    # CIFAR-100 and TinyImageNet heads: 512 x C + C
    c100 = _count(build_model("resnet18_gn", (3, 32, 32), 100, init_seed=0))
    assert c100 == expected + 90 * 513
    tin = _count(build_model("resnet18_gn", (3, 64, 64), 200, init_seed=0, stem="imagenet"))
    assert tin == 11_689_512 - 800 * 513


@pytest.mark.parametrize(
    ("shape", "stem", "stage1", "stage4"),
    [
        ((3, 32, 32), "cifar", 32, 4),
        ((3, 64, 64), "imagenet", 16, 2),
        ((1, 28, 28), "cifar", 28, 4),
    ],
)
def test_forward_shapes_and_feature_maps(shape, stem, stage1, stage4):
    m = build_model("resnet18_gn", shape, 7, init_seed=0, stem=stem, **SMALL)
    x = torch.zeros(2, *shape)
    assert m(x).shape == (2, 7)
    stem_out = m.body[0](x)
    assert stem_out.shape[-2:] == (stage1, stage1)
    assert m.body[4](m.body[3](m.body[2](m.body[1](stem_out)))).shape == (2, 8, stage4, stage4)
    names = [n for n, _ in m.named_parameters()]
    assert all(n.startswith(("body.", "head.")) for n in names)
    assert sorted(n for n in names if n.startswith("head.")) == ["head.bias", "head.weight"]


def test_groupnorm_everywhere_no_buffers():
    m = build_model("resnet18_gn", (3, 32, 32), 10, init_seed=0)
    norms = [x for x in m.modules() if isinstance(x, nn.GroupNorm)]
    assert len(norms) == 1 + 2 * 8 + 3  # stem, two per block, three downsample shortcuts
    assert all(g.num_groups == 2 for g in norms)
    assert not any(isinstance(x, nn.modules.batchnorm._BatchNorm) for x in m.modules())
    assert not list(m.buffers())  # nothing a forward pass could mutate
    name, why = resolve_executor("auto", m)
    assert name == "vectorised", why


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"stem": "tiny"}, "stem must be one of"),
        ({"groups": 3}, "divisible by groups = 3"),
        ({"groups": 0}, "groups must be a positive integer"),
        ({"widths": (4, 8, 8)}, "widths must be 4 positive integers"),
    ],
)
def test_bad_settings_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        build_model("resnet18_gn", (3, 32, 32), 10, init_seed=0, **kwargs)
    with pytest.raises(ValueError, match="needs a"):
        build_model("resnet18_gn", (784,), 10, init_seed=0)

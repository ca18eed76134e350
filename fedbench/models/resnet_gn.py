"""ResNet-18 with GroupNorm in place of BatchNorm (DQN-Fed's network for CIFAR-10/100, CINIC-10 and
TinyImageNet; spec qffl-dqnfed.md B.5.2 item 3, B-D23).

Built from torchvision's own `BasicBlock`, laid out and initialised as
`torchvision.models.resnet18(norm_layer=...)` (kaiming-normal fan-out convs, norms at weight 1 and
bias 0, PyTorch's default Linear), with two choices the paper leaves open:

- `stem`: "cifar" (conv3x3 stride 1, no max-pool: the usual ResNet-18 for 32 x 32 images, B-D23)
  or "imagenet" (torchvision's conv7x7 stride 2 + max-pool; the spec's choice for TinyImageNet's
  64 x 64). With "imagenet" and the same seed the weights are torchvision's, bit for bit.
- `groups`: GroupNorm's group count, 2 by default (B-D23, common FL practice).

`widths` shrink the four stages for smoke runs. GroupNorm keeps no running statistics, so the
forward pass is pure and the vectorised executor runs it. `body` = stem, stages, pooling;
`head` = the final Linear.
"""

from __future__ import annotations

import torch
from torch import nn

STEMS = ("cifar", "imagenet")
BLOCKS_PER_STAGE = 2  # ResNet-18: [2, 2, 2, 2]
STRIDES = (1, 2, 2, 2)


class ResNet18GN(nn.Module):
    """ResNet-18 (BasicBlock x [2, 2, 2, 2]) with GroupNorm(`groups`, C) after every conv."""

    def __init__(
        self,
        input_shape: tuple[int, ...],
        num_classes: int,
        groups: int = 2,
        stem: str = "cifar",
        widths: tuple[int, int, int, int] = (64, 128, 256, 512),
    ):
        # torchvision where a network is built, not at import: the catalog's validation (every
        # Snakemake start) looks models up, and torchvision costs ~3 s of imports there.
        from torchvision.models.resnet import BasicBlock, conv1x1

        super().__init__()
        channels = _check(input_shape, groups, stem, widths)
        self.groups = groups

        def norm(c: int) -> nn.GroupNorm:
            return nn.GroupNorm(groups, c)

        base = widths[0]
        if stem == "cifar":
            layers = [nn.Conv2d(channels, base, 3, stride=1, padding=1, bias=False)]
            layers += [norm(base), nn.ReLU(inplace=True)]
        else:
            layers = [nn.Conv2d(channels, base, 7, stride=2, padding=3, bias=False)]
            layers += [norm(base), nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2, padding=1)]
        stages, cin = [], base
        for cout, stride in zip(widths, STRIDES, strict=True):
            blocks = []
            for i in range(BLOCKS_PER_STAGE):
                s = stride if i == 0 else 1
                down = None
                if s != 1 or cin != cout:  # torchvision's _make_layer: 1x1 conv + norm shortcut
                    down = nn.Sequential(conv1x1(cin, cout, s), norm(cout))
                blocks.append(BasicBlock(cin, cout, s, down, norm_layer=norm))
                cin = cout
            stages.append(nn.Sequential(*blocks))
        self.body = nn.Sequential(
            nn.Sequential(*layers), *stages, nn.AdaptiveAvgPool2d(1), nn.Flatten()
        )
        self.head = nn.Linear(cin, num_classes)
        for m in self.modules():  # torchvision's ResNet.__init__ initialisation, same order
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.GroupNorm):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def _check(input_shape: tuple[int, ...], groups: object, stem: object, widths: object) -> int:
    """The input's channel count; a clear error for a bad shape, stem, group count or width."""
    arch = "resnet18_gn"
    if len(input_shape) != 3:
        raise ValueError(f"{arch} needs a (C, H, W) input, got input_shape {input_shape}")
    if stem not in STEMS:
        raise ValueError(f"{arch}: stem must be one of {list(STEMS)}, got {stem!r}")
    ok = isinstance(widths, (list, tuple)) and len(widths) == 4
    if not (ok and all(isinstance(w, int) and not isinstance(w, bool) and w > 0 for w in widths)):
        raise ValueError(f"{arch}: widths must be 4 positive integers, got {widths!r}")
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{arch}: groups must be a positive integer, got {groups!r}")
    bad = [w for w in widths if w % groups]
    if bad:
        raise ValueError(
            f"{arch}: GroupNorm needs every width divisible by groups = {groups}; {bad} are not"
        )
    return int(input_shape[0])

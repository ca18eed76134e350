"""ResNet-50 (torchvision), FedCorr's network for Clothing1M (its release's build_model:
`resnet50(pretrained=True)`, ImageNet weights, then a new fc of 14 outputs) and so DQN-Fed's
Table 12 (specs/qffl-dqnfed.md B.5.2 item 9).

`pretrained: true` (the default) reads torchvision's IMAGENET1K_V1 file (resnet50-0676ba61.pth,
the weights `pretrained=True` loaded in the release's torchvision) from torch hub's checkpoint
folder (`torch.hub.get_dir()/checkpoints`, i.e. the user's torch cache); it never downloads
(a training job must not): without the file the error names the URL and the exact path. The
final fc is replaced by Linear(2048, num_classes) with PyTorch's default initialisation.

BatchNorm uses batch statistics in training and evaluation (the pretrained running statistics
are dropped), as the suite's other pretrained network (models/aaggff.py EfficientNetISIC): the
engine's forward passes are functional and shared running buffers would be written by every
client. The release keeps running statistics and averages them with the weights; this is a
deviation, named in run.yaml through the model's `batch_norm: batch_stats`.

`layers` and `base` shrink the network for smoke runs (torchvision's ResNet with Bottleneck
blocks: [3, 4, 6, 3] blocks and stage widths base x 1, 2, 4, 8 with base 64 are ResNet-50);
anything but the defaults refuses `pretrained`. `body` = everything up to the pooled features,
`head` = the fc.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from fedbench.models.aaggff import _no_running_stats, _weights_file

LAYERS = (3, 4, 6, 3)
BASE = 64
BATCH_NORMS = ("batch_stats",)


class ResNet50(nn.Module):
    """torchvision's ResNet-50, optionally ImageNet-pretrained, with a num_classes fc."""

    def __init__(
        self,
        input_shape: tuple[int, ...],
        num_classes: int,
        pretrained: bool = True,
        layers: tuple[int, int, int, int] = LAYERS,
        base: int = BASE,
        batch_norm: str = "batch_stats",
    ):
        super().__init__()
        from torchvision.models import ResNet50_Weights
        from torchvision.models.resnet import Bottleneck

        if len(input_shape) != 3 or input_shape[0] != 3:
            raise ValueError(f"resnet50 needs (3, H, W) input, got {input_shape}")
        layers = tuple(layers)
        if len(layers) != 4 or any(not isinstance(n, int) or n < 1 for n in layers):
            raise ValueError(f"resnet50: layers must be four positive integers, got {layers}")
        if not isinstance(base, int) or not 1 <= base <= BASE:
            raise ValueError(f"resnet50: base must be an integer in 1..64, got {base!r}")
        if batch_norm not in BATCH_NORMS:
            raise ValueError(f"resnet50: batch_norm must be one of {BATCH_NORMS}")
        if pretrained and (layers != LAYERS or base != BASE):
            raise ValueError(
                "resnet50: pretrained weights exist for layers [3, 4, 6, 3], base 64 only; "
                "set pretrained: false to shrink the network"
            )
        net = _Narrow(base, Bottleneck, list(layers))
        if pretrained:
            weights = ResNet50_Weights.IMAGENET1K_V1
            path = Path(torch.hub.get_dir(), "checkpoints", Path(weights.url).name)
            path = _weights_file(path, "resnet50", weights.url)
            net.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
        features = net.layer4[-1].conv3.out_channels
        self.body = nn.Sequential(
            net.conv1, net.bn1, net.relu, net.maxpool,
            net.layer1, net.layer2, net.layer3, net.layer4,
            net.avgpool, nn.Flatten(),
        )  # fmt: skip
        self.head = nn.Linear(features, num_classes)
        _no_running_stats(self.body)
        self.pretrained = pretrained

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def _narrow_class():
    from torchvision.models.resnet import ResNet

    class Narrow(ResNet):
        """torchvision's ResNet with every stage's width scaled by base / 64 (the stem keeps
        64 channels); base 64 is torchvision's own network, layer for layer."""

        def __init__(self, base: int, *args, **kwargs):
            self.base = base
            super().__init__(*args, **kwargs)

        def _make_layer(self, block, planes, blocks, stride=1, dilate=False):
            return super()._make_layer(block, max(1, planes * self.base // BASE), blocks, stride,
                                       dilate)  # fmt: skip

    return Narrow


def _Narrow(base: int, *args, **kwargs):
    return _narrow_class()(base, *args, **kwargs)

"""The SuPerFed release's networks (superfed.md §5): no biases, ReLU, BN without running statistics.

Every model keeps the code's `layers`/`in_conv` as `body` and its `classifier` as `head`. BatchNorm
uses `track_running_stats=False`, so batch statistics are used in training and evaluation alike and
the forward pass stays pure (no buffer updates) under `torch.func.functional_call` / `vmap`.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from fedbench.models.recurrent import LSTM_IMPLS, unrolled_lstm


def _bn(channels: int) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(channels, track_running_stats=False)


def _image_shape(arch: str, input_shape: tuple[int, ...]) -> tuple[int, int, int]:
    if len(input_shape) != 3:
        raise ValueError(f"{arch} needs (C, H, W) input, got {input_shape}")
    c, h, w = input_shape
    return c, h, w


def _conv_out(size: int, kernel: int, stride: int = 1, padding: int = 0) -> int:
    return (size + 2 * padding - kernel) // stride + 1


def _check_positive(arch: str, input_shape: tuple[int, ...], *sizes: int) -> None:
    if min(sizes) < 1:
        raise ValueError(f"{arch}: input {input_shape} too small (feature map {sizes})")


def _pooled_head(cin: int, hidden: int, num_classes: int) -> nn.Sequential:
    """ResNet9's and MobileNet's `classifier`: global average pool, FC(cin->hidden)-ReLU-FC(C)."""
    return nn.Sequential(
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(cin, hidden, bias=False),
        nn.ReLU(),
        nn.Linear(hidden, num_classes, bias=False),
    )


class SuperFedTwoNN(nn.Module):
    """SuPerFed code's TwoNN: body 784-200-200, head FC200-ReLU-FC(C); 3 hidden layers in all."""

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, hidden: int = 200):
        super().__init__()
        self.body = nn.Sequential(
            nn.Flatten(),
            nn.Linear(math.prod(input_shape), hidden, bias=False),
            nn.ReLU(),
            nn.Linear(hidden, hidden, bias=False),
            nn.ReLU(),
        )
        self.head = nn.Sequential(
            nn.Linear(hidden, hidden, bias=False),
            nn.ReLU(),
            nn.Linear(hidden, num_classes, bias=False),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class SuperFedTwoCNN(nn.Module):
    """SuPerFed code's TwoCNN: two conv5x5 (pad 1) + MaxPool(2, pad 1), head FC200-FC200-FC(C)."""

    def __init__(
        self,
        input_shape: tuple[int, ...],
        num_classes: int,
        channels: tuple[int, int] = (32, 64),
        hidden: int = 200,
    ):
        super().__init__()
        c, h, w = _image_shape("superfed_twocnn", input_shape)
        c1, c2 = channels
        for _ in range(2):  # conv5x5 pad 1, then MaxPool(2, stride 2, pad 1)
            h, w = (
                _conv_out(_conv_out(h, 5, 1, 1), 2, 2, 1),
                _conv_out(_conv_out(w, 5, 1, 1), 2, 2, 1),
            )
        _check_positive("superfed_twocnn", input_shape, h, w)
        self.body = nn.Sequential(
            nn.Conv2d(c, c1, 5, padding=1, bias=False),
            nn.ReLU(),
            nn.MaxPool2d(2, padding=1),
            nn.Conv2d(c1, c2, 5, padding=1, bias=False),
            nn.ReLU(),
            nn.MaxPool2d(2, padding=1),
            nn.Flatten(),
        )
        self.head = nn.Sequential(
            nn.Linear(c2 * h * w, hidden, bias=False),
            nn.ReLU(),
            nn.Linear(hidden, hidden, bias=False),
            nn.ReLU(),
            nn.Linear(hidden, num_classes, bias=False),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class BasicBlock(nn.Module):
    """conv3x3-BN-ReLU-conv3x3-BN, plus a 1x1conv+BN shortcut when the shape changes; ReLU after."""

    def __init__(self, cin: int, cout: int, stride: int, identity_shortcut: bool):
        super().__init__()
        self.module = nn.Sequential(
            nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
            _bn(cout),
            nn.ReLU(),
            nn.Conv2d(cout, cout, 3, padding=1, bias=False),
            _bn(cout),
        )
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False), _bn(cout)
            )
        self.identity_shortcut = identity_shortcut

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.module(x)
        if self.downsample is not None:
            out = out + self.downsample(x)
        elif self.identity_shortcut:
            out = out + x
        return torch.relu(out)


class ResNet9(nn.Module):
    """SuPerFed code's ResNet9 (after apple/learning-subspaces): stem, 4 BasicBlocks, FC512-256-C.

    `identity_shortcut=False` (default) is the code: a block adds a shortcut only where it has a
    1x1 downsample, so the first block (64->64, stride 1) has no skip at all. True gives the usual
    identity shortcut there; the parameter count is the same either way.
    """

    def __init__(
        self,
        input_shape: tuple[int, ...],
        num_classes: int,
        widths: tuple[int, int, int, int] = (64, 128, 256, 512),
        strides: tuple[int, int, int, int] = (1, 1, 2, 2),
        hidden: int = 256,
        identity_shortcut: bool = False,
    ):
        super().__init__()
        c, h, w = _image_shape("resnet9", input_shape)
        base = widths[0]
        blocks: list[nn.Module] = []
        cin = base
        for cout, stride in zip(widths, strides, strict=True):
            blocks.append(BasicBlock(cin, cout, stride, identity_shortcut))
            cin = cout
        self.body = nn.Sequential(
            nn.Sequential(
                nn.Conv2d(c, base, 3, stride=2, padding=1, bias=False), _bn(base), nn.ReLU()
            ),
            nn.MaxPool2d(3, stride=2, padding=1),
            *blocks,
        )
        self.head = _pooled_head(cin, hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def _separable(cin: int, cout: int, stride: int) -> nn.Sequential:
    """MobileNet-v1 block: depthwise 3x3 (pad 0)+BN+ReLU, pointwise 1x1+BN+ReLU."""
    return nn.Sequential(
        nn.Conv2d(cin, cin, 3, stride=stride, padding=0, groups=cin, bias=False),
        _bn(cin),
        nn.ReLU(),
        nn.Conv2d(cin, cout, 1, bias=False),
        _bn(cout),
        nn.ReLU(),
    )


class MobileNet(nn.Module):
    """SuPerFed code's MobileNet (v1-style): stem conv3x3 s2, 4 separable blocks, FC512-256-C."""

    def __init__(
        self,
        input_shape: tuple[int, ...],
        num_classes: int,
        stem: int = 32,
        widths: tuple[int, int, int, int] = (64, 128, 256, 512),
        strides: tuple[int, int, int, int] = (1, 2, 2, 1),
        hidden: int = 256,
    ):
        super().__init__()
        c, h, w = _image_shape("mobilenet", input_shape)
        h, w = _conv_out(h, 3, 2, 1), _conv_out(w, 3, 2, 1)
        blocks: list[nn.Module] = []
        cin = stem
        for cout, stride in zip(widths, strides, strict=True):
            blocks.append(_separable(cin, cout, stride))
            h, w = _conv_out(h, 3, stride), _conv_out(w, 3, stride)
            cin = cout
        _check_positive("mobilenet", input_shape, h, w)
        self.body = nn.Sequential(
            nn.Sequential(
                nn.Conv2d(c, stem, 3, stride=2, padding=1, bias=False), _bn(stem), nn.ReLU()
            ),
            *blocks,
        )
        self.head = _pooled_head(cin, hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class VGG9(nn.Module):
    """SuPerFed code's VGG9: six conv3x3 (pad 1; 16..512) with four MaxPool(2), FC512-256-C."""

    # Output channels of each conv; "M" is a 2x2 max-pool.
    PLAN = (16, "M", 32, "M", 64, 128, "M", 256, 512, "M")

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, hidden: int = 256):
        super().__init__()
        c, h, w = _image_shape("vgg9", input_shape)
        layers: list[nn.Module] = []
        for item in self.PLAN:
            if item == "M":
                layers.append(nn.MaxPool2d(2, stride=2))
                h, w = h // 2, w // 2
            else:
                layers += [nn.Conv2d(c, item, 3, padding=1, bias=False), nn.ReLU()]
                c = item
        _check_positive("vgg9", input_shape, h, w)
        self.body = nn.Sequential(*layers)
        self.head = nn.Sequential(
            nn.Flatten(),
            nn.Linear(c * h * w, hidden, bias=False),
            nn.ReLU(),
            nn.Linear(hidden, num_classes, bias=False),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def _unrolled_lstm(lstm: nn.LSTM, x: torch.Tensor) -> torch.Tensor:
    """Last-step hidden state of a batch_first unidirectional `lstm`, step by step (vmap-safe)."""
    return unrolled_lstm(lstm, x)[0][:, -1]


class NextCharLSTM(nn.Module):
    """SuPerFed code's NextCharLM ("StackedLSTM"): Embedding -> 2-layer LSTM -> last step -> FC.

    Input: character ids (N, seq_len); float input (the engine's default) is cast with `x.long()`.
    `lstm_impl="unrolled"` runs the same nn.LSTM weights step by step in plain tensor ops, which
    `torch.func.vmap` can batch; `"native"` calls nn.LSTM's fused kernel (2-3x faster on CPU, no
    vmap); `"auto"` (default) is unrolled until the engine picks: native for the sequential
    executor, unrolled for the vectorised one (`choose_recurrent_impl`).
    """

    def __init__(
        self,
        input_shape: tuple[int, ...],
        num_classes: int,
        vocab_size: int = 100,
        embed_dim: int = 8,
        hidden: int = 256,
        layers: int = 2,
        lstm_impl: str = "auto",
    ):
        super().__init__()
        if len(input_shape) != 1:
            raise ValueError(f"nextchar_lstm needs (seq_len,) input, got {input_shape}")
        if lstm_impl not in LSTM_IMPLS:
            raise ValueError(
                f"nextchar_lstm: lstm_impl must be one of {LSTM_IMPLS}, got {lstm_impl!r}"
            )
        self.lstm_impl = lstm_impl
        self.body = nn.Module()
        self.body.embedding = nn.Embedding(vocab_size, embed_dim)
        self.body.lstm = nn.LSTM(embed_dim, hidden, num_layers=layers, batch_first=True, bias=False)
        self.head = nn.Linear(hidden, num_classes, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = self.body.embedding(x.long())
        if self.lstm_impl == "native":
            last = self.body.lstm(e)[0][:, -1]
        else:
            last = _unrolled_lstm(self.body.lstm, e)
        return self.head(last)

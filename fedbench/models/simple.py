"""Small networks: logistic regression, a 1-hidden-layer MLP, and FedAvg's 2NN and CNN."""

from __future__ import annotations

import math

from torch import nn


def _flat(input_shape: tuple[int, ...]) -> int:
    return math.prod(input_shape)


class Linear(nn.Module):
    """Multinomial logistic regression (MCLR)."""

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, bias: bool = True):
        super().__init__()
        self.body = nn.Flatten()
        self.head = nn.Linear(_flat(input_shape), num_classes, bias=bias)

    def forward(self, x):
        return self.head(self.body(x))


class MLP(nn.Module):
    """One hidden layer with ReLU."""

    def __init__(
        self, input_shape: tuple[int, ...], num_classes: int, hidden: int = 100, bias: bool = True
    ):
        super().__init__()
        self.body = nn.Sequential(
            nn.Flatten(), nn.Linear(_flat(input_shape), hidden, bias=bias), nn.ReLU()
        )
        self.head = nn.Linear(hidden, num_classes, bias=bias)

    def forward(self, x):
        return self.head(self.body(x))


class TwoNN(nn.Module):
    """FedAvg's 2NN (McMahan et al. 2017): 784-200-200-10, ReLU; `hidden_layers` for variants."""

    def __init__(
        self,
        input_shape: tuple[int, ...],
        num_classes: int,
        hidden: int = 200,
        hidden_layers: int = 2,
        bias: bool = True,
    ):
        super().__init__()
        layers: list[nn.Module] = [nn.Flatten()]
        width = _flat(input_shape)
        for _ in range(hidden_layers):
            layers += [nn.Linear(width, hidden, bias=bias), nn.ReLU()]
            width = hidden
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(width, num_classes, bias=bias)

    def forward(self, x):
        return self.head(self.body(x))


class TwoCNN(nn.Module):
    """FedAvg's CNN: two 5x5 conv (32, 64) + 2x2 max-pool, FC 512, softmax layer."""

    def __init__(
        self,
        input_shape: tuple[int, ...],
        num_classes: int,
        channels: tuple[int, int] = (32, 64),
        hidden: int = 512,
        bias: bool = True,
    ):
        super().__init__()
        if len(input_shape) != 3:
            raise ValueError(f"twocnn needs (C, H, W) input, got {input_shape}")
        c, h, w = input_shape
        c1, c2 = channels
        self.body = nn.Sequential(
            nn.Conv2d(c, c1, 5, padding=2, bias=bias),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, 5, padding=2, bias=bias),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(c2 * (h // 4) * (w // 4), hidden, bias=bias),
            nn.ReLU(),
        )
        self.head = nn.Linear(hidden, num_classes, bias=bias)

    def forward(self, x):
        return self.head(self.body(x))

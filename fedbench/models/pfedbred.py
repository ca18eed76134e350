"""pFedBreD's networks (pfedbred.md §4; the release's federatedFrameW/models/models.py).

The release ends each model in log_softmax + NLLLoss; these return logits, and the engine's
cross-entropy (log_softmax + NLL) gives the same loss. MCLR is the registry's `linear`
(flatten -> Linear(784, C) with bias), so it has no class here.
"""

from __future__ import annotations

import math

import torch
from torch import nn

LEAKY_SLOPE = 0.1  # F.leaky_relu(x, negative_slope=0.1) in the release's DNN and LSTM


class PFedBreDDNN(nn.Module):
    """The release's DNN: flatten -> Linear(784, 100) -> leaky ReLU(0.1) -> Linear(100, C)."""

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, hidden: int = 100):
        super().__init__()
        self.body = nn.Sequential(
            nn.Flatten(),
            nn.Linear(math.prod(input_shape), hidden),
            nn.LeakyReLU(LEAKY_SLOPE),
        )
        self.head = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class CifarNet(nn.Module):
    """The release's CIFAR-10 CNN (LeNet-5 style): conv5x5(6)-pool-conv5x5(16)-pool, FC 120-84-C."""

    def __init__(self, input_shape: tuple[int, ...], num_classes: int):
        super().__init__()
        if len(input_shape) != 3:
            raise ValueError(f"pfedbred_cnn needs (C, H, W) input, got {input_shape}")
        c, h, w = input_shape
        h, w = ((h - 4) // 2 - 4) // 2, ((w - 4) // 2 - 4) // 2  # two conv5x5 + MaxPool(2, 2)
        if min(h, w) < 1:
            raise ValueError(f"pfedbred_cnn: input {input_shape} too small (feature map {h}x{w})")
        self.body = nn.Sequential(
            nn.Conv2d(c, 6, 5),
            nn.ReLU(),
            nn.MaxPool2d(2, 2),
            nn.Conv2d(6, 16, 5),
            nn.ReLU(),
            nn.MaxPool2d(2, 2),
            nn.Flatten(),
        )
        self.head = nn.Sequential(
            nn.Linear(16 * h * w, 120),
            nn.ReLU(),
            nn.Linear(120, 84),
            nn.ReLU(),
            nn.Linear(84, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class Sent140LSTM(nn.Module):
    """The release's Sent140 LSTM on GloVe-embedded tweets: input (N, seq_len, embed_dim) floats.

    The release looks tokens up in a frozen GloVe-50 embedding; frozen, it is the same function
    when the data holds the vectors, and it stays out of training and aggregation. Body: a 2-layer
    bidirectional LSTM(50, 50); its code's 200-d encoding cat[out[:, -1, :H], out[:, -1, H:],
    h_n[-1], h_n[-2]]. Head: Linear(200, hidden) -> leaky ReLU(0.1) -> Linear(hidden, C).
    `hidden`: 5000 the code (`hidden_size*100`, what produced Table 1; spec §9.13), 100 the paper.
    """

    def __init__(
        self,
        input_shape: tuple[int, ...],
        num_classes: int,
        hidden: int = 5000,
        lstm_hidden: int = 50,
        layers: int = 2,
    ):
        super().__init__()
        if len(input_shape) != 2:
            raise ValueError(
                f"pfedbred_lstm needs (seq_len, embed_dim) embedded input, got {input_shape}"
            )
        self.body = nn.Module()
        self.body.lstm = nn.LSTM(
            input_shape[1], lstm_hidden, num_layers=layers, batch_first=True, bidirectional=True
        )
        self.head = nn.Sequential(
            nn.Linear(4 * lstm_hidden, hidden),
            nn.LeakyReLU(LEAKY_SLOPE),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, (h_n, _) = self.body.lstm(x)
        size = self.body.lstm.hidden_size
        last = out[:, -1]
        enc = torch.cat([last[:, :size], last[:, size:], h_n[-1], h_n[-2]], dim=1)
        return self.head(enc)

"""pFedBreD's networks (pfedbred.md §4; the release's federatedFrameW/models/models.py).

The release ends each model in log_softmax + NLLLoss; these return logits, and the engine's
cross-entropy (log_softmax + NLL) gives the same loss. MCLR is the registry's `linear`
(flatten -> Linear(784, C) with bias), so it has no class here.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from fedbench.models.recurrent import LSTM_IMPLS, unrolled_lstm

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
    """The release's Sent140 LSTM on GloVe-50 tweets: a frozen embedding, BiLSTM body, MLP head.

    Input: token ids (N, seq_len) (floats are cast with `x.long()`), looked up in `embedding`,
    the dataset's (vocab, 50) GloVe rows (`extras["embedding"]` of the `sent140` source), held
    as a buffer: frozen as in the release (`Embedding.from_pretrained(freeze=True)`), so it is
    neither trained nor aggregated. `vocab_size` instead of `embedding` gives a random frozen
    table (shape checks, cost estimates; never real runs). Input (N, seq_len, embed_dim) is taken
    as already embedded. Body: a 2-layer bidirectional LSTM(50, 50); the code's 200-d encoding
    cat[out[:, -1, :H], out[:, -1, H:], h_n[-1], h_n[-2]]. Head: Linear(200, hidden) -> leaky
    ReLU(0.1) -> Linear(hidden, C). `hidden`: 5000 the code (`hidden_size*100`, what produced
    Table 1; spec §9.13), 100 the paper. `lstm_impl` as NextCharLSTM's: auto resolves to the fused
    kernel under the sequential executor and the unrolled recurrence under vmap.
    """

    DATA_INPUTS = ("embedding",)

    def __init__(
        self,
        input_shape: tuple[int, ...],
        num_classes: int,
        hidden: int = 5000,
        lstm_hidden: int = 50,
        layers: int = 2,
        embedding: np.ndarray | None = None,
        vocab_size: int | None = None,
        embed_dim: int = 50,
        lstm_impl: str = "auto",
    ):
        super().__init__()
        if lstm_impl not in LSTM_IMPLS:
            raise ValueError(
                f"pfedbred_lstm: lstm_impl must be one of {LSTM_IMPLS}, got {lstm_impl!r}"
            )
        self.lstm_impl = lstm_impl
        if len(input_shape) == 1:
            if embedding is not None:
                table = torch.as_tensor(np.asarray(embedding, dtype=np.float32))
                if table.ndim != 2:
                    raise ValueError(f"pfedbred_lstm: embedding must be 2-D, got {table.shape}")
            elif vocab_size is not None:
                table = torch.randn(int(vocab_size), embed_dim)
            else:
                raise ValueError(
                    "pfedbred_lstm on token ids needs the dataset's `embedding` extra array "
                    "(the sent140 source ships it) or a `vocab_size`"
                )
            self.register_buffer("embedding", table)
            width = table.shape[1]
        elif len(input_shape) == 2:
            self.embedding = None
            width = input_shape[1]
        else:
            raise ValueError(
                "pfedbred_lstm needs token ids (seq_len,) or embedded (seq_len, embed_dim) input, "
                f"got {input_shape}"
            )
        self.body = nn.Module()
        self.body.lstm = nn.LSTM(
            width, lstm_hidden, num_layers=layers, batch_first=True, bidirectional=True
        )
        self.head = nn.Sequential(
            nn.Linear(4 * lstm_hidden, hidden),
            nn.LeakyReLU(LEAKY_SLOPE),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.embedding is not None:
            x = F.embedding(x.long(), self.embedding)
        if self.lstm_impl == "native":
            out, (h_n, _) = self.body.lstm(x)
        else:
            out, h_n = unrolled_lstm(self.body.lstm, x)
        size = self.body.lstm.hidden_size
        last = out[:, -1]
        enc = torch.cat([last[:, :size], last[:, size:], h_n[-1], h_n[-2]], dim=1)
        return self.head(enc)

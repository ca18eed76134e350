"""nn.LSTM's recurrence in plain tensor ops, so `torch.func.vmap` can batch it over clients, and
the per-executor choice between it and nn.LSTM's fused kernel (every recurrent model's switch)."""

from __future__ import annotations

import torch
from torch import nn


def _direction(lstm: nn.LSTM, layer: int, suffix: str, x: torch.Tensor) -> torch.Tensor:
    """Hidden states of one layer and direction over a batch_first input, in x's time order."""
    w_ih = getattr(lstm, f"weight_ih_l{layer}{suffix}")
    w_hh = getattr(lstm, f"weight_hh_l{layer}{suffix}")
    pre = x @ w_ih.T  # input projections of all time steps at once: (N, T, 4H)
    if lstm.bias:
        bias_ih = getattr(lstm, f"bias_ih_l{layer}{suffix}")
        pre = pre + bias_ih + getattr(lstm, f"bias_hh_l{layer}{suffix}")
    h = c = None
    steps = []
    for t in range(pre.shape[1]):
        gates = pre[:, t] if h is None else pre[:, t] + h @ w_hh.T
        i, f, g, o = gates.chunk(4, dim=-1)  # PyTorch's gate order
        i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
        c = i * g if c is None else f * c + i * g
        h = o * torch.tanh(c)
        steps.append(h)
    return torch.stack(steps, dim=1)


def unrolled_lstm(lstm: nn.LSTM, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(output, h_n) of a batch_first `lstm` from zero states, as nn.LSTM returns them.

    output: (N, T, D*H), the last layer's states (forward, then backward, per step); h_n:
    (layers*D, N, H), each layer's and direction's final state in nn.LSTM's order.
    """
    if not lstm.batch_first or lstm.proj_size:
        raise ValueError("unrolled_lstm supports batch_first LSTMs without projections only")
    out = x
    finals = []
    for layer in range(lstm.num_layers):
        fwd = _direction(lstm, layer, "", out)
        finals.append(fwd[:, -1])
        if lstm.bidirectional:
            bwd = _direction(lstm, layer, "_reverse", out.flip(1)).flip(1)
            finals.append(bwd[:, 0])
            out = torch.cat([fwd, bwd], dim=-1)
        else:
            out = fwd
    return out, torch.stack(finals)


LSTM_IMPLS = ("auto", "unrolled", "native")


def choose_recurrent_impl(model: nn.Module, executor: str) -> str | None:
    """Resolve `lstm_impl="auto"` for the executor that will run the model (in place): the fused
    kernel one client at a time, the unrolled recurrence under vmap. Returns the choice (None
    when the model has no such switch)."""
    chosen = None
    for m in model.modules():
        if getattr(m, "lstm_impl", None) is not None:
            if m.lstm_impl == "auto":
                m.lstm_impl = "native" if executor == "sequential" else "unrolled"
            chosen = m.lstm_impl
    return chosen

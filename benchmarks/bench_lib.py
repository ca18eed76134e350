"""Workloads shared by the benchmarks and the summary: data, models, FLOP counts, cases."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from fedbench.algorithms import build_algorithm
from fedbench.engine.config import TrainConfig
from fedbench.engine.federation import Federation
from fedbench.engine.functional import make_apply, params_of
from fedbench.engine.loop import run_rounds
from fedbench.models import MODELS, build_model
from fedbench.rng import Streams

# The round the targets are stated on: FedAvg, 50 samples per client, E = 1, B = 10.
SAMPLES_PER_CLIENT = 50
BATCH = 10
EPOCHS = 1
LR = 0.01
# Input shapes tried in order for each registered model (the first that builds and runs wins);
# (25, 50): 25 GloVe-50 embedded tokens (pFedBreD Sent140 LSTM).
INPUTS = ((1, 28, 28), (3, 32, 32), (3, 64, 64), (80,), (25, 50))
NUM_CLASSES = 10


def sample_inputs(shape: tuple[int, ...], n: int, rng: np.random.Generator) -> np.ndarray:
    """Random inputs: pixels in [0, 1), or token ids (as floats) for 1-D sequence models."""
    if len(shape) == 1:
        return rng.integers(0, 50, (n, *shape)).astype(np.float32)
    return rng.random((n, *shape), dtype=np.float32)


def model_input(arch: str) -> tuple[int, ...]:
    """The first of INPUTS that `arch` builds and runs on."""
    for shape in INPUTS:
        try:
            model = build_model(arch, shape, NUM_CLASSES, init_seed=0)
            with torch.no_grad():
                model(torch.as_tensor(sample_inputs(shape, 2, np.random.default_rng(0))))
        except (ValueError, RuntimeError, TypeError):
            continue
        return shape
    raise ValueError(f"no input shape in {INPUTS} fits model {arch!r}")


def federation(
    num_clients: int,
    per_client: int = SAMPLES_PER_CLIENT,
    shape: tuple[int, ...] = (1, 28, 28),
    device: torch.device | str = "cpu",
) -> Federation:
    """Random data, `per_client` training samples per client, no test splits (no evaluation)."""
    rng = np.random.default_rng(0)
    n = num_clients * per_client
    x = sample_inputs(shape, n, rng)
    y = rng.integers(0, NUM_CLASSES, n)
    idx = np.arange(n).reshape(num_clients, per_client)
    return Federation.from_arrays(
        x, y, list(idx), [i[:0] for i in idx], x[:0], y[:0], NUM_CLASSES, torch.device(device)
    )


def forward_flops(model: nn.Module, shape: tuple[int, ...]) -> int:
    """Forward FLOPs per sample: 2·in·out per Linear (per position), 2·(Cin/g)·kh·kw·Cout·Hout·Wout
    per Conv2d, 2·4·H·(in + H) per LSTM layer and step; activations, pooling, norms and the loss
    are lower order and not counted."""
    total = 0

    def linear(mod: nn.Linear, inp, out):
        nonlocal total
        total += 2 * mod.in_features * mod.out_features * (out.numel() // out.shape[-1])

    def conv(mod: nn.Conv2d, inp, out):
        nonlocal total
        kh, kw = mod.kernel_size
        total += 2 * (mod.in_channels // mod.groups) * kh * kw * out.numel()

    def lstm(mod: nn.LSTM, inp, out):
        nonlocal total
        steps = inp[0].shape[1] if mod.batch_first else inp[0].shape[0]
        batch = inp[0].shape[0] if mod.batch_first else inp[0].shape[1]
        width = mod.input_size
        for _ in range(mod.num_layers):
            total += 2 * 4 * mod.hidden_size * (width + mod.hidden_size) * steps * batch
            width = mod.hidden_size

    hooks = []
    for mod in model.modules():
        for kind, fn in ((nn.Linear, linear), (nn.Conv2d, conv), (nn.LSTM, lstm)):
            if isinstance(mod, kind):
                hooks.append(mod.register_forward_hook(fn))
    with torch.no_grad():
        model(torch.as_tensor(sample_inputs(shape, 1, np.random.default_rng(0))))
    for h in hooks:
        h.remove()
    return total


def train_flops(model: nn.Module, shape: tuple[int, ...], samples: int) -> int:
    """FLOPs of training on `samples` samples: forward + backward, backward counted as 2x forward
    (input and weight gradients of every layer, the first layer's input gradient included)."""
    return 3 * forward_flops(model, shape) * samples


@dataclass
class RoundCase:
    """One FedAvg round: every client of the federation trains once (E = 1, B = 10)."""

    arch: str
    clients: int

    def build(self):
        """(federation, model, config, flops) of the round."""
        shape = (1, 28, 28)
        fed = federation(self.clients, shape=shape)
        model = build_model(self.arch, shape, NUM_CLASSES, init_seed=0)
        cfg = TrainConfig(
            rounds=1,
            batch_size=BATCH,
            lr=LR,
            local_epochs=EPOCHS,
            clients_per_round=self.clients,
            eval_every=10**9,
        )
        flops = train_flops(model, shape, EPOCHS * self.clients * SAMPLES_PER_CLIENT)
        return fed, model, cfg, flops


def engine_round(fed: Federation, model: nn.Module, cfg: TrainConfig, executor: str):
    """A callable running one fedbench round (run_rounds with rounds = 1; the test splits are
    empty, so the evaluation at the last round has nothing to evaluate)."""
    algo, apply, p0 = build_algorithm("fedavg"), make_apply(model), params_of(model)

    def round_():
        return run_rounds(algo, apply, fed, cfg, Streams(0), p0, executor=executor)

    return round_


def registered_models() -> list[str]:
    """Every model of the registry, in registry order."""
    return list(MODELS)


def gemm_flops(n: int) -> int:
    """FLOPs of an n x n by n x n matrix product."""
    return 2 * n**3


def fmt_flops(flops: float) -> str:
    """Human units: MFLOP / GFLOP."""
    return f"{flops / 1e9:.2f} GFLOP" if flops >= 1e9 else f"{flops / 1e6:.1f} MFLOP"

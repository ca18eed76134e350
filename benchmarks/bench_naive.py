"""The reference design of the common FL frameworks, for comparison only (never used by fedbench).

Each client gets its own DataLoader (built once, at client creation, as those frameworks do), and
every round each sampled client deep-copies the global model, builds a fresh torch.optim.SGD and
runs the usual zero_grad / forward / backward / step loop; the server averages the clients'
state_dicts weighted by their sample counts.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from fedbench.engine.federation import Federation


def client_loaders(fed: Federation, batch_size: int, seed: int = 0) -> list[DataLoader]:
    """One shuffling DataLoader per client over its own copy of its samples."""
    loaders = []
    for cid, idx in enumerate(fed.train):
        data = TensorDataset(fed.x[idx].clone(), fed.y[idx].clone())
        gen = torch.Generator().manual_seed(seed + cid)
        loaders.append(DataLoader(data, batch_size=batch_size, shuffle=True, generator=gen))
    return loaders


def naive_round(
    global_model: nn.Module, loaders: list[DataLoader], lr: float, epochs: int
) -> nn.Module:
    """One FedAvg round over every client, the frameworks' way; returns the new global model."""
    device = next(global_model.parameters()).device
    states, weights = [], []
    for loader in loaders:
        model = copy.deepcopy(global_model)
        model.train()
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        for _ in range(epochs):
            for xb, yb in loader:
                xb, yb = xb.to(device), yb.to(device)
                opt.zero_grad()
                loss = F.cross_entropy(model(xb), yb)
                loss.backward()
                opt.step()
        states.append(model.state_dict())
        weights.append(len(loader.dataset))
    total = float(sum(weights))
    avg = {k: sum(w / total * s[k] for w, s in zip(weights, states)) for k in states[0]}
    global_model.load_state_dict(avg)
    return global_model


def plain_steps(model: nn.Module, x: torch.Tensor, y: torch.Tensor, lr: float, steps: int):
    """`steps` SGD steps of `model` on one batch, in plain PyTorch, in whatever dtype and memory
    layout `model` and `x` already have: no master weights, no casts, no autocast. With the
    whole model in bfloat16 this is what the hardware gives a step at most, the ceiling of
    training.precision bf16 (which keeps float32 master weights and casts each step)."""
    params = [p for p in model.parameters() if p.requires_grad]
    for _ in range(steps):
        loss = F.cross_entropy(model(x).float(), y)
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            torch._foreach_add_(params, grads, alpha=-lr)

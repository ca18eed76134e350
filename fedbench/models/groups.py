"""Parameter names grouped by the module that owns them: SuPerFed-LM draws one λ per group."""

from __future__ import annotations

from torch import nn


def mixing_groups(model: nn.Module) -> list[list[str]]:
    """Parameter names of `model`, one group per module that owns parameters directly.

    A Linear/Conv2d/Embedding is one group, a BatchNorm's weight and bias share one, and a
    multi-layer nn.LSTM is a single group (superfed.md §2.8, §12 item 7).
    """
    groups: list[list[str]] = []
    seen: set[int] = set()
    for prefix, module in model.named_modules():
        names = []
        for name, p in module.named_parameters(recurse=False):
            if id(p) not in seen:
                seen.add(id(p))
                names.append(f"{prefix}.{name}" if prefix else name)
        if names:
            groups.append(names)
    return groups

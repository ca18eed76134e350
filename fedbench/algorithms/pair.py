"""Two models of one client in one parameter dict: `fed.*` (federated) and `loc.*` (local)."""

from __future__ import annotations

from fedbench.tree import Params

FED, LOC = "fed.", "loc."


def split(params: Params, prefix: str) -> Params:
    """The entries of `params` under `prefix`, with the prefix removed."""
    return {k[len(prefix) :]: v for k, v in params.items() if k.startswith(prefix)}


def joined(prefix: str, params: Params) -> Params:
    """`params` with `prefix` added to every name."""
    return {prefix + k: v for k, v in params.items()}


def mix(global_params: Params, local: Params, weight) -> Params:
    """(1 - weight) θ^g + weight θ^l, key by key (weight a float or a scalar tensor)."""
    return {k: (1 - weight) * v + weight * local[k] for k, v in global_params.items()}

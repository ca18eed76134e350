"""Two models of one client in one parameter dict: `fed.*` (federated) and `loc.*` (local)."""

from __future__ import annotations

from fedbench.engine.functional import Params

FED, LOC = "fed.", "loc."


def split(params: Params, prefix: str) -> Params:
    """The entries of `params` under `prefix`, with the prefix removed."""
    return {k[len(prefix) :]: v for k, v in params.items() if k.startswith(prefix)}


def joined(prefix: str, params: Params) -> Params:
    """`params` with `prefix` added to every name."""
    return {prefix + k: v for k, v in params.items()}

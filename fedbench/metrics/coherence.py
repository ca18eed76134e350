"""Generalized coherence (Gish & Cochran) of a set of vectors: how far they are from orthogonal."""

from __future__ import annotations

import math

import torch


def flatten_rows(stacked: dict[str, torch.Tensor]) -> torch.Tensor:
    """[K, D]: each client's tensors (leading axis = client) flattened and concatenated."""
    return torch.cat([v.reshape(v.shape[0], -1) for v in stacked.values()], dim=1)


def gce(vectors: torch.Tensor) -> float:
    """GCE = 1 - det(G) / ∏ G_ii of the rows' Gram matrix G (0: orthogonal, 1: linearly dependent).

    det(G) / ∏ G_ii is the determinant of the cosine matrix, taken by slogdet in float64 on
    unit-normalised rows (det(G) itself under- or overflows for long vectors). NaN when a row is
    zero (its direction, hence the coherence, is undefined)."""
    v = vectors.detach().to(torch.float64).reshape(vectors.shape[0], -1)
    peak = v.abs().amax(dim=1, keepdim=True) if v.shape[1] else v.new_zeros(len(v), 1)
    if v.shape[0] == 0 or not bool((peak > 0).all()):
        return math.nan
    v = v / peak  # so the norms' squares neither overflow nor underflow
    u = v / v.norm(dim=1, keepdim=True)
    sign, logdet = torch.linalg.slogdet(u @ u.T)
    if sign <= 0:  # singular up to rounding: linearly dependent rows
        return 1.0
    return float(-torch.expm1(logdet))

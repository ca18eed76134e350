"""Label noise by a transition matrix T (T[i, j] = p(noisy label j | clean label i)).

SuPerFed's label-noise experiment (thesis Table 2.6, eqs. 2.7-2.8): pair flipping (Co-teaching)
and symmetric flipping, applied to the clients' training labels only. The released code swaps
the two kinds, noisifies the whole training pool before the split (client test labels noisy
too) and uses Dirichlet alpha = 100 instead of 10; `variant="code"` reproduces the first two.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

KINDS = ("pair", "symmetric")
VARIANTS = ("thesis", "code")
CODE_ALPHA = 100.0  # Dirichlet alpha of every label-noise command in the release (thesis: 10)
THESIS_ALPHA = 10.0


def transition_matrix(kind: str, num_classes: int, eps: float) -> np.ndarray:
    """T of eq. 2.7 (pair: i -> (i+1) mod N w.p. eps) or eq. 2.8 (symmetric: eps/(N-1) each)."""
    if kind not in KINDS:
        raise ValueError(f"noise kind must be one of {KINDS}, got {kind!r}")
    if int(num_classes) != num_classes or num_classes < 2:
        raise ValueError(f"num_classes must be an integer >= 2, got {num_classes!r}")
    if not 0.0 <= eps <= 1.0:
        raise ValueError(f"eps must be in [0, 1], got {eps!r}")
    n = int(num_classes)
    if kind == "pair":
        t = np.eye(n) * (1.0 - eps)
        t[np.arange(n), (np.arange(n) + 1) % n] += eps
    else:
        t = np.full((n, n), eps / (n - 1))
        np.fill_diagonal(t, 1.0 - eps)
    return t


def apply_label_noise(labels: np.ndarray, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A new label per sample drawn from row T[y] (independently; one uniform draw per sample)."""
    labels = np.asarray(labels)
    t = np.asarray(t, dtype=np.float64)
    n = t.shape[0]
    if t.ndim != 2 or t.shape != (n, n) or np.any(t < 0) or not np.allclose(t.sum(1), 1.0):
        raise ValueError("T must be a square matrix of non-negative rows that sum to 1")
    if labels.size and (labels.min() < 0 or labels.max() >= n):
        raise ValueError(f"labels must lie in 0..{n - 1} for a {n}x{n} transition matrix")
    cum = np.cumsum(t, axis=1)
    cum[:, -1] = 1.0
    u = rng.random(labels.shape)
    out = np.empty(labels.shape, dtype=np.int64)
    for c in np.unique(labels):
        at = labels == c
        out[at] = np.searchsorted(cum[c], u[at], side="right")
    return np.minimum(out, n - 1)


def code_kind(kind: str) -> str:
    """The generator the released code actually calls for `kind` (pair and symmetric swapped)."""
    if kind not in KINDS:
        raise ValueError(f"noise kind must be one of {KINDS}, got {kind!r}")
    return "symmetric" if kind == "pair" else "pair"


def noisify_indices(
    labels: np.ndarray, indices: np.ndarray, t: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """A copy of labels in which only labels[indices] are redrawn from T."""
    out = np.asarray(labels, dtype=np.int64).copy()
    idx = np.unique(np.asarray(indices, dtype=np.int64))
    out[idx] = apply_label_noise(out[idx], t, rng)
    return out


def noisy_partition_labels(
    labels: np.ndarray,
    train_parts: Sequence[np.ndarray],
    kind: str,
    eps: float,
    num_classes: int,
    rng: np.random.Generator,
    variant: str = "thesis",
) -> np.ndarray:
    """Labels of the training pool after SuPerFed's label noise, per `variant`.

    thesis: T of `kind`, applied to the clients' training indices only (test splits stay clean).
    code: T of the swapped kind (`code_kind`), applied to every label of the pool, as the release
    noisifies the training set before splitting it. Pair it with Dirichlet alpha CODE_ALPHA.
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    labels = np.asarray(labels, dtype=np.int64)
    if variant == "code":
        return apply_label_noise(labels, transition_matrix(code_kind(kind), num_classes, eps), rng)
    parts = [np.asarray(p, dtype=np.int64) for p in train_parts]
    idx = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return noisify_indices(labels, idx, transition_matrix(kind, num_classes, eps), rng)

"""Per-client train/test splits: random, rounded, LEAF's, stratified, official."""

from __future__ import annotations

import numpy as np


def split_official(
    clients: list[np.ndarray], official_test: np.ndarray
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per client, its rows from the official test split as its test split, the rest as its
    training split (`test_split: official`)."""
    official_test = np.asarray(official_test, dtype=bool)
    train = [np.sort(c[~official_test[c]]) for c in clients]
    test = [np.sort(c[official_test[c]]) for c in clients]
    return train, test


def split_train_test(
    clients: list[np.ndarray],
    test_fraction: float,
    rng: np.random.Generator,
    rounding: str = "floor",
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per client, a random int(test_fraction * n_k) samples for test, the rest for training;
    rounding "round": Python's round(test_fraction * n_k) (AAggFF's Speech Commands split);
    "leaf": LEAF's split, max(1, int((1 - test_fraction) * n_k)) training samples (1 of 2),
    the rest for test (AAggFF's CelebA and Reddit)."""
    if not 0.0 <= test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in [0, 1), got {test_fraction!r}")
    train, test = [], []
    for c in clients:
        perm = rng.permutation(np.asarray(c, dtype=np.int64))
        size = test_fraction * len(perm)
        if rounding == "leaf":
            n = len(perm)
            cut = 0 if n < 2 else n - (1 if n == 2 else max(1, int((1.0 - test_fraction) * n)))
        else:
            cut = round(size) if rounding == "round" else int(size)
        test.append(np.sort(perm[:cut]))
        train.append(np.sort(perm[cut:]))
    return train, test


def _approximate_mode(counts: np.ndarray, draws: int, rng: np.random.Generator) -> np.ndarray:
    """Per-class draws summing to `draws` in proportion to `counts`: floors, then the leftover
    to the largest remainders (ties broken at random)."""
    share = draws * counts / max(int(counts.sum()), 1)
    take = np.floor(share).astype(np.int64)
    left = draws - int(take.sum())
    if left > 0:
        order = np.lexsort((rng.random(len(counts)), -(share - take)))
        take[order[:left]] += 1
    return np.minimum(take, counts)


def split_train_test_stratified(
    clients: list[np.ndarray], labels: np.ndarray, test_fraction: float, rng: np.random.Generator
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per client, a test split of ceil(test_fraction * n_k) samples with the client's class
    shares, allotted as sklearn's train_test_split(stratify=y) does (AAggFF's release): the
    training counts per class first, then the test counts from what is left (ceil of the float
    product, as sklearn)."""
    if not 0.0 <= test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in [0, 1), got {test_fraction!r}")
    labels = np.asarray(labels)
    train, test = [], []
    for c in clients:
        c = np.asarray(c, dtype=np.int64)
        n_test = int(np.ceil(test_fraction * len(c)))
        classes, inverse = np.unique(labels[c], return_inverse=True)
        counts = np.bincount(inverse, minlength=len(classes))
        n_train = _approximate_mode(counts, len(c) - n_test, rng)
        n_test_k = _approximate_mode(counts - n_train, n_test, rng)
        picked = [
            rng.choice(c[inverse == k], size=int(t), replace=False) for k, t in enumerate(n_test_k)
        ]
        chosen = np.concatenate(picked) if picked else np.zeros(0, dtype=np.int64)
        test.append(np.sort(chosen))
        train.append(np.sort(np.setdiff1d(c, chosen)))
    return train, test

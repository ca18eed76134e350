"""FedCorr's non-IID split (DQN-Fed's Clothing1M protocol)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fedbench.data.partition.common import _as_clients, _check_clients


def fedcorr_noniid(
    labels: np.ndarray,
    num_clients: int,
    rng: np.random.Generator,
    class_prob: float = 0.7,
    alpha: float = 10.0,
) -> tuple[list[np.ndarray], dict[str, Any]]:
    """FedCorr's non-IID split (Xu et al., CVPR 2022; the release's util/sampling.py,
    `non_iid_dirichlet_sampling`, lines 16-37, called by util/dataset.py:81 with
    non_iid_prob_class = 0.7 and alpha_dirichlet = 10 from util/options.py).

    Presence Φ ~ Bernoulli(class_prob)^{K x C}; the rows of clients with no class are drawn
    again, all such rows at once, until every client has one. Class by class, in increasing
    label order: shares q ~ Dir(alpha * 1) over the clients that hold the class, then each of
    its samples goes to one of them, independently, with probabilities q (a categorical draw
    per sample: nothing is rounded and a client may get none of a class, or nothing at all).
    The draws are the release's, in its order (binomial, dirichlet, choice); the stream is
    `rng`'s, so a numpy Generator gives another split than the release's global
    np.random.seed(seed) (a `np.random.RandomState(seed)` passed here gives the release's split
    of the same label vector). Ours differs also in: classes are the labels present (the
    release: range(num_classes), the same when every class has a sample); a class no client
    holds is an error naming it (the release crashes in np.random.choice); clients are sorted
    index arrays (the release's are sets). Returns the clients and each client's classes.
    """
    labels = np.asarray(labels)
    _check_clients(num_clients, len(labels))
    ok = isinstance(class_prob, (int, float, np.floating)) and not isinstance(class_prob, bool)
    if not (ok and 0.0 < class_prob <= 1.0):
        raise ValueError(f"class_prob must be a number in (0, 1], got {class_prob!r}")
    if not (isinstance(alpha, (int, float, np.number)) and np.isfinite(alpha) and alpha > 0):
        raise ValueError(f"alpha must be a finite number > 0, got {alpha!r}")
    classes = np.unique(labels)
    presence = rng.binomial(1, class_prob, size=(num_clients, len(classes)))
    per_client = presence.sum(axis=1)
    redrawn = 0
    while per_client.min() == 0:
        empty = np.flatnonzero(per_client == 0)
        presence[empty] = rng.binomial(1, class_prob, size=(len(empty), len(classes)))
        redrawn += len(empty)
        per_client = presence.sum(axis=1)
    holders = [np.flatnonzero(presence[:, j]) for j in range(len(classes))]
    unheld = [int(c) for c, h in zip(classes, holders, strict=True) if len(h) == 0]
    if unheld:
        raise ValueError(
            f"fedcorr_noniid partition: no client drew class(es) {unheld} (the release crashes "
            "here too); raise num_clients or class_prob"
        )
    parts: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
    for c, held in zip(classes, holders, strict=True):
        members = np.flatnonzero(labels == c)
        share = rng.dirichlet([alpha] * len(held))
        owner = rng.choice(held, size=len(members), p=share.tolist())
        for k in held:
            parts[k].append(members[owner == k])
    clients = _as_clients([np.concatenate(p) for p in parts])
    info: dict[str, Any] = {
        "client_classes": [classes[row == 1].tolist() for row in presence],
        "redrawn_rows": int(redrawn),
        "empty_clients": int(sum(len(c) == 0 for c in clients)),
    }
    return clients, info

"""The IID baseline and the label-skew splits: shards, the label-Dirichlet family, one client
per label, random classes per client."""

from __future__ import annotations

from typing import Any

import numpy as np

from fedbench.data.partition.common import _as_clients, _check_clients
from fedbench.data.partition.groups import natural

ASSIGNMENTS = ("sorted_roundrobin", "random")


def iid(n: int, num_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
    """A random permutation dealt into num_clients near-equal parts."""
    _check_clients(num_clients, n)
    return _as_clients(np.array_split(rng.permutation(n), num_clients))


def shards(
    labels: np.ndarray,
    num_clients: int,
    shards_per_client: int,
    rng: np.random.Generator,
    assignment: str = "sorted_roundrobin",
) -> list[np.ndarray]:
    """Label-sorted shards of equal size, shards_per_client per client (McMahan et al., 2017).

    The n mod (num_clients * shards_per_client) samples at the end of the label order are left
    out. assignment "sorted_roundrobin" gives shard s to client s mod K (SuPerFed's code, no
    randomness); "random" shuffles the shard ids and deals them out (the FedAvg paper).
    """
    labels = np.asarray(labels)
    if int(shards_per_client) != shards_per_client or shards_per_client < 1:
        raise ValueError(f"shards_per_client must be a positive integer, got {shards_per_client!r}")
    _check_clients(num_clients * shards_per_client, len(labels))
    num_shards = num_clients * shards_per_client
    size = len(labels) // num_shards
    order = np.argsort(labels, kind="stable")[: num_shards * size].reshape(num_shards, size)
    if assignment == "sorted_roundrobin":
        owner = np.arange(num_shards) % num_clients
    elif assignment == "random":
        owner = np.empty(num_shards, dtype=np.int64)
        owner[rng.permutation(num_shards)] = np.repeat(np.arange(num_clients), shards_per_client)
    else:
        raise ValueError(f"assignment must be one of {ASSIGNMENTS}, got {assignment!r}")
    return _as_clients([order[owner == k].ravel() for k in range(num_clients)])


def _dirichlet(
    labels: np.ndarray,
    num_clients: int,
    alpha: float,
    rng: np.random.Generator,
    min_size: int,
    max_tries: int,
) -> tuple[list[np.ndarray], dict[str, Any]]:
    labels = np.asarray(labels)
    n = len(labels)
    if not np.isfinite(alpha) or alpha <= 0:
        raise ValueError(f"alpha must be a finite number > 0, got {alpha!r}")
    _check_clients(num_clients, n)
    if min_size < 0 or min_size * num_clients > n:
        raise ValueError(
            f"min_size={min_size} is impossible: min_size * num_clients = "
            f"{min_size * num_clients} exceeds the {n} samples"
        )
    if max_tries < 1:
        raise ValueError(f"max_tries must be >= 1, got {max_tries}")
    classes, counts = np.unique(labels, return_counts=True)
    # Sizes are decided first (cheap), samples are dealt once a draw is accepted.
    take = np.zeros((len(classes), num_clients), dtype=np.int64)
    take[:, 0] = counts  # only used if every draw were non-finite; the repair then spreads it
    tries = 0
    while tries < max_tries:
        tries += 1
        p = rng.dirichlet(np.full(num_clients, float(alpha)), size=len(classes))
        if not np.all(np.isfinite(p)):
            continue
        cum = np.floor(np.cumsum(p, axis=1) * counts[:, None]).astype(np.int64)
        cum[:, -1] = counts
        take = np.diff(cum, axis=1, prepend=0)  # (classes, clients)
        if take.sum(axis=0).min() >= min_size:
            break
    parts: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
    for c, row in zip(classes, take, strict=True):
        idx = rng.permutation(np.flatnonzero(labels == c))
        for k, chunk in enumerate(np.split(idx, np.cumsum(row)[:-1])):
            parts[k].append(chunk)
    clients = [np.concatenate(p) for p in parts]
    moved = _repair(clients, min_size)
    return _as_clients(clients), {"tries": tries, "repaired_samples": moved}


def _repair(clients: list[np.ndarray], min_size: int) -> int:
    """Move samples from the largest clients to those under min_size, in place; count moved."""
    moved = 0
    while True:
        sizes = np.array([len(c) for c in clients])
        short = int(np.argmin(sizes))
        if sizes[short] >= min_size:
            return moved
        donor = int(np.argmax(sizes))
        give = int(min(min_size - sizes[short], sizes[donor] - min_size))
        clients[short] = np.concatenate([clients[short], clients[donor][-give:]])
        clients[donor] = clients[donor][:-give]
        moved += give


def dirichlet(
    labels: np.ndarray,
    num_clients: int,
    alpha: float,
    rng: np.random.Generator,
    min_size: int = 10,
    max_tries: int = 100,
) -> list[np.ndarray]:
    """Label-Dirichlet split (Hsu et al., 2019): each class divided by p ~ Dir(alpha * 1_K).

    Redrawn until every client holds >= min_size samples; after max_tries the last draw is
    repaired deterministically by moving samples from the largest clients, so it always ends.
    """
    return _dirichlet(labels, num_clients, alpha, rng, min_size, max_tries)[0]


def dirichlet_capped(
    labels: np.ndarray,
    num_clients: int,
    alpha: float,
    rng: np.random.Generator,
    drop_at_most: int = 10,
) -> list[np.ndarray]:
    """The SuPerFed/FedKT-code variant: class by class, p ~ Dir(alpha * 1_K) with p_k set to 0
    for clients already holding >= N/K samples (then renormalised); clients left with
    <= drop_at_most samples are dropped, so fewer than K clients may remain (spec §4.4, §12.9)."""
    labels = np.asarray(labels)
    n = len(labels)
    if not np.isfinite(alpha) or alpha <= 0:
        raise ValueError(f"alpha must be a finite number > 0, got {alpha!r}")
    _check_clients(num_clients, n)
    cap = n / num_clients
    parts: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
    sizes = np.zeros(num_clients, dtype=np.int64)
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        p = rng.dirichlet(np.full(num_clients, float(alpha)))
        p = np.where(sizes < cap, p, 0.0)
        if p.sum() <= 0:  # every client is full: spread evenly over all of them
            p = np.ones(num_clients)
        p = p / p.sum()
        cuts = (np.cumsum(p) * len(idx)).astype(np.int64)[:-1]
        for k, chunk in enumerate(np.split(idx, cuts)):
            parts[k].append(chunk)
            sizes[k] += len(chunk)
    clients = [np.concatenate(p) for p in parts]
    return _as_clients([c for c in clients if len(c) > drop_at_most])


def dirichlet_equal(
    labels: np.ndarray, num_clients: int, alpha: float, rng: np.random.Generator
) -> list[np.ndarray]:
    """Equal-size clients, each with its own class mix q_k ~ Dir(alpha * 1_C) (Hsu et al. 2019,
    the setting of pFedBreD's Table 4): client k, in turn, draws floor(N/K) samples without
    replacement, class by class from q_k renormalised over the classes not yet used up."""
    labels = np.asarray(labels)
    n = len(labels)
    if not np.isfinite(alpha) or alpha <= 0:
        raise ValueError(f"alpha must be a finite number > 0, got {alpha!r}")
    _check_clients(num_clients, n)
    classes = np.unique(labels)
    pools = [list(rng.permutation(np.flatnonzero(labels == c))) for c in classes]
    left = np.array([len(p) for p in pools], dtype=np.int64)
    size = n // num_clients
    clients = []
    for _ in range(num_clients):
        q = rng.dirichlet(np.full(len(classes), float(alpha)))
        take = np.zeros(len(classes), dtype=np.int64)
        need = size
        while need > 0:
            # Redistribute over classes that still have samples; at tiny alpha q may be
            # concentrated on exhausted classes, so fall back to the classes' remaining sizes.
            room = left - take
            w = np.where(room > 0, q, 0.0)
            w = w / w.sum() if w.sum() > 0 else room / room.sum()
            draw = np.minimum(rng.multinomial(need, w), room)
            take += draw
            need -= int(draw.sum())
        chunk = []
        for j, t in enumerate(take):
            chunk.extend(pools[j][len(pools[j]) - left[j] : len(pools[j]) - left[j] + t])
            left[j] -= t
        clients.append(np.asarray(chunk, dtype=np.int64))
    return _as_clients(clients)


def by_label(labels: np.ndarray) -> list[np.ndarray]:
    """One client per distinct label, in increasing label order, holding every sample of it (the
    q-FFL / AFL Fashion-MNIST protocol: three clients, one class each)."""
    labels = np.asarray(labels)
    if labels.ndim != 1 or len(labels) == 0:
        raise ValueError("by_label partition needs a non-empty 1-D array of labels")
    return natural(labels)


def random_classes(
    labels: np.ndarray, num_clients: int, classes_per_client: int, rng: np.random.Generator
) -> tuple[list[np.ndarray], list[list[int]]]:
    """Each client draws `classes_per_client` distinct classes uniformly at random; each class's
    samples, shuffled, are dealt in near-equal parts to the clients that drew it (FedProx's,
    Ditto's and DQN-Fed's FEMNIST-skewed: 5 of EMNIST's lower-case 'a'-'j' per device). A class
    no client drew is left out. Returns the clients and each client's classes (sorted)."""
    labels = np.asarray(labels)
    if int(classes_per_client) != classes_per_client or classes_per_client < 1:
        raise ValueError(
            f"classes_per_client must be a positive integer, got {classes_per_client!r}"
        )
    _check_clients(num_clients, len(labels))
    classes = np.unique(labels)
    if classes_per_client > len(classes):
        raise ValueError(
            f"classes_per_client={classes_per_client} exceeds the {len(classes)} classes"
        )
    drawn = np.sort(
        np.stack([rng.permutation(len(classes))[:classes_per_client] for _ in range(num_clients)]),
        axis=1,
    )
    parts: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
    for k, c in enumerate(classes):
        holders = np.flatnonzero((drawn == k).any(axis=1))
        members = np.flatnonzero(labels == c)
        if len(holders) == 0:
            continue  # no client drew it: left out
        if len(holders) > len(members):
            raise ValueError(
                f"class {int(c)} has {len(members)} samples for the {len(holders)} clients that "
                "drew it: every client needs one of each of its classes; use fewer clients or "
                "classes_per_client"
            )
        for h, share in zip(holders, np.array_split(rng.permutation(members), len(holders))):
            parts[h].append(share)
    clients = _as_clients([np.concatenate(p) for p in parts])
    return clients, classes[drawn].tolist()

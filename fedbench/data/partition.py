"""Seeded partitioners: index arrays into the training pool, one sorted int64 array per client."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.data.checksum import load_checked, save_checked
from fedbench.data.noise import KINDS as NOISE_KINDS
from fedbench.data.noise import VARIANTS as NOISE_VARIANTS
from fedbench.data.noise import noisy_partition_labels
from fedbench.io import DamagedFile

ASSIGNMENTS = ("sorted_roundrobin", "random")
# A builder's info key carrying the pool labels it changed (popped before the meta is written).
RELABELLED = "_relabelled"


def _check_clients(num_clients: int, n: int) -> None:
    if int(num_clients) != num_clients or num_clients < 1:
        raise ValueError(f"num_clients must be a positive integer, got {num_clients!r}")
    if num_clients > n:
        raise ValueError(f"num_clients={num_clients} exceeds the {n} samples available")


def _as_clients(parts: list[np.ndarray]) -> list[np.ndarray]:
    return [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]


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


def _check_alpha_mincls(alpha: float, mincls: int, num_classes: int) -> None:
    if not np.isfinite(alpha) or alpha <= 0:
        raise ValueError(f"alpha must be a finite number > 0, got {alpha!r}")
    if not (_is_int(mincls) and 1 <= mincls <= num_classes):
        raise ValueError(
            f"mincls must be an integer in [1, {num_classes}] (the number of classes), "
            f"got {mincls!r}"
        )


def _class_counts(labels: np.ndarray, clients: list[np.ndarray]) -> dict[str, Any]:
    """Per-client class histograms (repeated indices counted each time) for a partition's meta."""
    classes, inverse = np.unique(labels, return_inverse=True)
    counts = [np.bincount(inverse[c], minlength=len(classes)).tolist() for c in clients]
    return {"classes": classes.tolist(), "class_counts": counts}


def overlap_summary(clients: list[np.ndarray], n: int) -> dict[str, int]:
    """How clients' index arrays overlap: pool samples held by >= 2 clients (`shared_samples`),
    clients holding any of them (`clients_sharing`), repeated entries within a client
    (`within_client_repeats`, in `clients_with_repeats` clients) and samples nobody holds."""
    holders = np.zeros(n, dtype=np.int64)
    distinct = [np.unique(np.asarray(c, dtype=np.int64)) for c in clients]
    for d in distinct:
        holders[d] += 1
    repeats = [len(c) - len(d) for c, d in zip(clients, distinct, strict=True)]
    return {
        "shared_samples": int((holders >= 2).sum()),
        "clients_sharing": int(sum(bool((holders[d] >= 2).any()) for d in distinct)),
        "within_client_repeats": int(sum(repeats)),
        "clients_with_repeats": int(sum(r > 0 for r in repeats)),
        "unassigned_samples": int((holders == 0).sum()),
    }


def fedevg_code(
    labels: np.ndarray,
    num_clients: int,
    alpha: float,
    rng: np.random.Generator,
    mincls: int = 2,
    min_samples: int = 5,
    max_tries: int = 10_000,
) -> tuple[list[np.ndarray], dict[str, Any]]:
    """FedEvg's released "diri" split, bug included (fedevg.md §3, §7 item 13; the release's
    src/loaders/split.py:110-170), with numpy Generator draws from `rng`.

    Client by client, until it has counted >= ideal = N // K samples: prior u ~ U(0, 1)^L,
    q ~ Dir(alpha * u), `ideal` labels ~ Cat(q); a draw with fewer than `mincls` distinct labels
    is rejected; every class drawn more than `min_samples` times (the release's MIN_SAMPLES =
    int(1 / test_size), 5 at test_size 0.2) adds that many samples, the first ones of the class's
    index list (nothing is shuffled). The release then keeps the *taken* indices as the class's
    list (`class_indices[c] = class_indices[c][:count]`, split.py:162), so later draws of that
    class hand out the same samples again: clients overlap, a client may hold a sample twice,
    and a client gets fewer samples than it counted when the list has shrunk below the count.
    Class index lists are in pool order (a stable sort; the release's np.argsort default is not
    stable). The release loops forever where no draw can succeed; here a client that has not
    reached `ideal` after `max_tries` draws is an error.

    Returns the clients (sorted, repeats kept) and what the split did: `requested_sizes` (the
    counts the release adds up), draws, rejected draws, the overlap (`overlap_summary`) and the
    per-client class histograms.
    """
    labels = np.asarray(labels)
    n = len(labels)
    _check_clients(num_clients, n)
    classes, inverse = np.unique(labels, return_inverse=True)
    num_classes = len(classes)
    _check_alpha_mincls(alpha, mincls, num_classes)
    if not (_is_int(min_samples) and min_samples >= 0):
        raise ValueError(f"min_samples must be an integer >= 0, got {min_samples!r}")
    if max_tries < 1:
        raise ValueError(f"max_tries must be >= 1, got {max_tries}")
    ideal = n // num_clients
    if ideal <= min_samples:
        raise ValueError(
            f"min_samples={min_samples} needs more than N // num_clients = {ideal} samples per "
            "client draw: no class could be kept (the release would loop forever); lower "
            "min_samples or num_clients"
        )
    order = np.argsort(inverse, kind="stable")
    class_lists = np.split(order, np.cumsum(np.bincount(inverse))[:-1])
    clients, requested = [], []
    draws = rejected = 0
    for k in range(num_clients):
        parts: list[np.ndarray] = []
        counted = tries = 0
        while counted < ideal:
            if tries == max_tries:
                raise ValueError(
                    f"fedevg_code partition: client {k} reached {counted} of {ideal} samples in "
                    f"max_tries={max_tries} draws; raise alpha or max_tries, or lower mincls"
                )
            tries += 1
            prior = rng.uniform(size=num_classes)
            q = rng.dirichlet(alpha * prior)
            drawn = rng.choice(num_classes, size=ideal, p=q)
            present, counts = np.unique(drawn, return_counts=True)
            if len(present) < mincls:
                rejected += 1
                continue
            kept = counts * (counts > min_samples)
            for c, m in zip(present, kept, strict=True):
                if m == 0:
                    continue
                parts.append(class_lists[c][:m])
                class_lists[c] = class_lists[c][:m]  # the release's bug: keeps what it took
            counted += int(kept.sum())
        draws += tries
        clients.append(np.concatenate(parts))
        requested.append(counted)
    info: dict[str, Any] = {
        "requested_sizes": requested,
        "draws": draws,
        "rejected_draws": rejected,
        **overlap_summary(clients, n),
        **_class_counts(labels, clients),
    }
    return _as_clients(clients), info


def _allocate(
    q: np.ndarray, alpha: float, size: int, left: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Per-class counts summing to `size`, multinomial in q over the classes with samples left
    (capped at what is left; the overflow drawn again the same way)."""
    take = np.zeros(len(left), dtype=np.int64)
    need = size
    while need > 0:
        room = left - take
        w = np.where(room > 0, q, 0.0)
        if w.sum() <= 0:
            # q's mass lies on used-up classes (its other entries underflowed to 0 at tiny
            # alpha). q restricted to the open classes and renormalised is Dir(alpha) and
            # independent of the mass it drops (Dirichlet neutrality): draw it afresh.
            q = np.zeros(len(left))
            q[room > 0] = rng.dirichlet(np.full(int((room > 0).sum()), float(alpha)))
            w = q
        draw = np.minimum(rng.multinomial(need, w / w.sum()), room)
        take += draw
        need -= int(draw.sum())
    return take


def fedevg_dirichlet(
    labels: np.ndarray,
    num_clients: int,
    alpha: float,
    rng: np.random.Generator,
    mincls: int = 2,
    max_tries: int = 10_000,
) -> tuple[list[np.ndarray], dict[str, Any]]:
    """FedEvg's disjoint per-client Dirichlet split (fedevg.md §7 item 13, the thesis profile).

    Client by client: q_k ~ Dir(alpha * 1_L), then N // K samples without replacement, their
    class counts multinomial in q_k over the classes not yet used up (shuffled per class once);
    the draw is repeated while the client would get fewer than `mincls` classes (fewer only when
    fewer classes are left: counted in `clients_below_mincls`). The N mod K samples at the end
    stay unassigned (`left_out`). A client not satisfied in `max_tries` draws is an error.
    Returns the clients and what the split did (redraws, per-client class histograms).
    """
    labels = np.asarray(labels)
    n = len(labels)
    _check_clients(num_clients, n)
    classes, inverse = np.unique(labels, return_inverse=True)
    num_classes = len(classes)
    _check_alpha_mincls(alpha, mincls, num_classes)
    if max_tries < 1:
        raise ValueError(f"max_tries must be >= 1, got {max_tries}")
    pools = [rng.permutation(np.flatnonzero(inverse == j)) for j in range(num_classes)]
    left = np.array([len(p) for p in pools], dtype=np.int64)
    size = n // num_clients
    clients = []
    redraws = below = 0
    for k in range(num_clients):
        wanted = min(mincls, int(np.count_nonzero(left)))
        below += wanted < mincls
        tries = 0
        while True:
            if tries == max_tries:
                raise ValueError(
                    f"fedevg_dirichlet partition: client {k} drew fewer than mincls={wanted} "
                    f"classes in max_tries={max_tries} draws; raise alpha or max_tries, or lower "
                    "mincls"
                )
            tries += 1
            q = rng.dirichlet(np.full(num_classes, float(alpha)))
            take = _allocate(q, alpha, size, left, rng)
            if np.count_nonzero(take) >= wanted:
                break
        redraws += tries - 1
        start = np.array([len(p) for p in pools]) - left
        clients.append(np.concatenate([p[s : s + t] for p, s, t in zip(pools, start, take)]))
        left -= take
    info: dict[str, Any] = {
        "left_out": int(n - size * num_clients),
        "redraws": redraws,
        "clients_below_mincls": int(below),
        **_class_counts(labels, clients),
    }
    return _as_clients(clients), info


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


def split_official(
    clients: list[np.ndarray], official_test: np.ndarray
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per client, its rows from the official test split as its test split, the rest as its
    training split (`test_split: official`)."""
    official_test = np.asarray(official_test, dtype=bool)
    train = [np.sort(c[~official_test[c]]) for c in clients]
    test = [np.sort(c[official_test[c]]) for c in clients]
    return train, test


def natural(groups: np.ndarray) -> list[np.ndarray]:
    """One client per distinct group id (in increasing id order)."""
    groups = np.asarray(groups)
    if groups.ndim != 1 or len(groups) == 0:
        raise ValueError("natural partition needs a non-empty 1-D array of group ids")
    order = np.argsort(groups, kind="stable")
    _, starts = np.unique(groups[order], return_index=True)
    return _as_clients(np.split(order, starts[1:]))


# Per-(client, label) power-law block sizes of the pFedMe-style generators pFedBreD releases
# (pfedbred.md §3): the offset subtracted from a class's size before the log-normal shares are
# scaled to it, and the block size drawn from a share p.
POWERLAW_SIZES = ("mnist", "cifar10")


def _powerlaw_block(rule: str, share: float, rng: np.random.Generator) -> int:
    if rule == "mnist":  # int(p) * randint(1, 10) + randint(10, 200) (MNIST, FMNIST scripts)
        base = int(rng.integers(10, 201))
        return int(share) * int(rng.integers(1, 11)) + base
    return int(share) + int(rng.integers(300, 601))  # int(p) + randint(300, 600) (CIFAR-10)


def label_powerlaw(
    labels: np.ndarray,
    num_clients: int,
    labels_per_client: int,
    rng: np.random.Generator,
    sizes: str = "mnist",
    mnist_label_bug: bool = False,
) -> tuple[list[np.ndarray], np.ndarray | None]:
    """pFedBreD's (and pFedMe's) label-shard + log-normal power-law split (pfedbred.md §3).

    Client u holds labels l = (u + j) mod C, j < labels_per_client: first 10 samples of each,
    then a block per (u, j) sized from log-normal(0, 2) shares of (class size - offset), offset
    1000 (sizes "mnist") or num_clients ("cifar10"), both doubled when num_clients <= 20; a
    block that would reach the end of its class is skipped. Samples are taken in pool order.
    On real pools (classes above the offset) this is the scripts' procedure with our stream.
    `mnist_label_bug` relabels each client's first 10 samples of its j-th label as j, as the
    released MNIST script does; the relabelled pool labels are returned (else None).
    """
    labels = np.asarray(labels)
    if int(labels_per_client) != labels_per_client or labels_per_client < 1:
        raise ValueError(f"labels_per_client must be a positive integer, got {labels_per_client!r}")
    if sizes not in POWERLAW_SIZES:
        raise ValueError(f"sizes must be one of {POWERLAW_SIZES}, got {sizes!r}")
    if not isinstance(mnist_label_bug, bool):
        raise ValueError(f"mnist_label_bug must be true or false, got {mnist_label_bug!r}")
    _check_clients(num_clients, len(labels))
    classes = np.unique(labels)
    c = len(classes)
    if labels_per_client > c:
        raise ValueError(f"labels_per_client={labels_per_client} exceeds the {c} classes")
    pools = [np.flatnonzero(labels == k) for k in classes]
    wanted = (np.arange(num_clients)[:, None] + np.arange(labels_per_client)) % c
    need = 10 * np.bincount(wanted.ravel(), minlength=c)  # the first blocks, 10 per label
    short = [int(classes[k]) for k in range(c) if need[k] >= len(pools[k])]
    if short:
        raise ValueError(
            f"num_clients={num_clients} with labels_per_client={labels_per_client} needs more "
            f"than 10 samples per client and label; too few of class(es) {short}"
        )
    relabelled = labels.copy() if mnist_label_bug else None
    parts: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
    taken = np.zeros(c, dtype=np.int64)
    for u in range(num_clients):
        for j in range(labels_per_client):
            k = (u + j) % c
            block = pools[k][taken[k] : taken[k] + 10]
            parts[u].append(block)
            taken[k] += 10
            if relabelled is not None:
                relabelled[block] = classes[j]
    offset = 1000 if sizes == "mnist" else num_clients
    props = rng.lognormal(0.0, 2.0, (c, num_clients, labels_per_client))
    counts = np.array([len(p) for p in pools], dtype=np.float64)
    # Clipped at 0: a class smaller than the offset (a stand-in pool) gets the base blocks only;
    # the scripts' negative shares would move their cursor back and hand samples out twice.
    scale = np.maximum(counts - offset, 0.0)[:, None, None]
    props = scale * props / props.sum(axis=(1, 2), keepdims=True)
    group = max(1, num_clients // c)  # the scripts' user // (NUM_USERS / 10)
    for u in range(num_clients):
        for j in range(labels_per_client):
            k = (u + j) % c
            n = _powerlaw_block(sizes, props[k, u // group, j], rng)
            if num_clients <= 20:
                n *= 2
            if taken[k] + n < len(pools[k]):
                parts[u].append(pools[k][taken[k] : taken[k] + n])
                taken[k] += n
    return _as_clients([np.concatenate(p) for p in parts]), relabelled


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


@dataclass
class Partition:
    """Per-client train and test index arrays into the training pool, and how they were made."""

    train: list[np.ndarray]
    test: list[np.ndarray]
    meta: dict[str, Any] = field(default_factory=dict)
    # Training-pool labels after label noise (None = the dataset's own labels).
    labels: np.ndarray | None = None
    # Per-client validation indices held out of `train` (empty list = no validation split).
    val: list[np.ndarray] = field(default_factory=list)


def _pack(parts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(p) for p in parts])
    flat = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)
    return flat, offsets


def _unpack(flat: np.ndarray, offsets: np.ndarray) -> list[np.ndarray]:
    if (
        offsets.ndim != 1
        or offsets[0] != 0
        or offsets[-1] != len(flat)
        or np.any(np.diff(offsets) < 0)
    ):
        raise ValueError("offsets do not match the index array")
    return [flat[a:b].astype(np.int64) for a, b in zip(offsets[:-1], offsets[1:], strict=True)]


def save_partition(path: str | os.PathLike, p: Partition) -> None:
    """Write a partition to .npz atomically: concatenated indices + offsets, meta as JSON."""
    if len(p.train) != len(p.test) or len(p.val) not in (0, len(p.train)):
        raise ValueError(
            f"partition has {len(p.train)} train, {len(p.test)} test, {len(p.val)} val clients"
        )
    train, train_off = _pack(p.train)
    test, test_off = _pack(p.test)
    # Written only when there is one, so partitions without validation keep their bytes.
    val = dict(zip(("val", "val_offsets"), _pack(p.val))) if p.val else {}
    save_checked(
        path,
        dict(
            train=train,
            train_offsets=train_off,
            test=test,
            test_offsets=test_off,
            meta=np.array(json.dumps(p.meta, sort_keys=True)),
            **({} if p.labels is None else {"labels": np.asarray(p.labels, dtype=np.int64)}),
            **val,
        ),
    )


def _parse_partition(a: dict[str, np.ndarray]) -> Partition:
    train = _unpack(a["train"], a["train_offsets"])
    test = _unpack(a["test"], a["test_offsets"])
    meta = json.loads(str(a["meta"]))
    labels = a.get("labels")
    val = _unpack(a["val"], a["val_offsets"]) if "val" in a else []
    return Partition(train, test, meta, labels, val)


def load_partition(path: str | os.PathLike) -> Partition:
    """Read a partition written by `save_partition`; a missing or damaged file is named in the
    error with the snakemake command that writes it again (`fedbench.io.rewrite_advice`)."""
    path = Path(path)
    p = load_checked(path, "partition", "partition", _parse_partition)
    if len(p.train) != len(p.test) or len(p.val) not in (0, len(p.train)):
        problem = f"partition file {path}: train, test and val client counts differ"
        raise DamagedFile(path, problem, "partition")
    return p


@dataclass(frozen=True)
class Partitioner:
    """A partition kind: how to build it and which spec keys it takes."""

    build: Callable[..., tuple[list[np.ndarray], dict[str, Any]]]
    required: tuple[str, ...]
    defaults: dict[str, Any]


def _build_iid(labels, groups, rng, num_clients):
    return iid(len(labels), num_clients, rng), {}


def _build_shards(labels, groups, rng, num_clients, shards_per_client, assignment):
    clients = shards(labels, num_clients, shards_per_client, rng, assignment)
    return clients, {"left_out": int(len(labels) - sum(len(c) for c in clients))}


def _build_dirichlet(labels, groups, rng, num_clients, alpha, min_size, max_tries):
    return _dirichlet(labels, num_clients, alpha, rng, min_size, max_tries)


def _build_dirichlet_capped(labels, groups, rng, num_clients, alpha, drop_at_most):
    clients = dirichlet_capped(labels, num_clients, alpha, rng, drop_at_most)
    return clients, {"clients_kept": len(clients), "clients_asked": num_clients}


def _build_dirichlet_equal(labels, groups, rng, num_clients, alpha):
    return dirichlet_equal(labels, num_clients, alpha, rng), {}


def _build_fedevg_code(labels, groups, rng, num_clients, alpha, mincls, min_samples, max_tries):
    return fedevg_code(labels, num_clients, alpha, rng, mincls, min_samples, max_tries)


def _build_fedevg_dirichlet(labels, groups, rng, num_clients, alpha, mincls, max_tries):
    return fedevg_dirichlet(labels, num_clients, alpha, rng, mincls, max_tries)


def _build_natural(labels, groups, rng, num_clients):
    if groups is None:
        raise ValueError("partition kind 'natural' needs a dataset with groups (natural clients)")
    clients = natural(groups)
    info: dict[str, Any] = {"groups_available": len(clients)}
    if num_clients is not None and num_clients < len(clients):
        keep = np.sort(rng.choice(len(clients), size=int(num_clients), replace=False))
        clients = [clients[i] for i in keep]
        info["groups_kept"] = keep.tolist()
    return clients, info


def _build_by_label(labels, groups, rng):
    clients = by_label(labels)
    return clients, {"labels": [int(labels[c[0]]) for c in clients]}


def _build_label_powerlaw(
    labels, groups, rng, num_clients, labels_per_client, sizes, mnist_label_bug
):
    clients, relabelled = label_powerlaw(
        labels, num_clients, labels_per_client, rng, sizes, mnist_label_bug
    )
    info: dict[str, Any] = {"left_out": int(len(labels) - sum(len(c) for c in clients))}
    if relabelled is not None:
        info["mislabelled"] = int((relabelled != np.asarray(labels)).sum())
        info[RELABELLED] = relabelled
    return clients, info


def _build_random_classes(labels, groups, rng, num_clients, classes_per_client):
    clients, drawn = random_classes(labels, num_clients, classes_per_client, rng)
    left_out = int(len(labels) - sum(len(c) for c in clients))
    return clients, {"client_classes": drawn, "left_out": left_out}


def _build_fedcorr_noniid(labels, groups, rng, num_clients, class_prob, alpha):
    return fedcorr_noniid(labels, num_clients, rng, class_prob, alpha)


PARTITIONERS: dict[str, Partitioner] = {
    "iid": Partitioner(_build_iid, ("num_clients",), {}),
    "shards": Partitioner(
        _build_shards, ("num_clients", "shards_per_client"), {"assignment": "sorted_roundrobin"}
    ),
    "dirichlet": Partitioner(
        _build_dirichlet, ("num_clients", "alpha"), {"min_size": 10, "max_tries": 100}
    ),
    "dirichlet_capped": Partitioner(
        _build_dirichlet_capped, ("num_clients", "alpha"), {"drop_at_most": 10}
    ),
    "dirichlet_equal": Partitioner(_build_dirichlet_equal, ("num_clients", "alpha"), {}),
    # FedEvg (fedevg.md §7 item 13): the release's split, overlap bug included, and the
    # thesis profile's disjoint one
    "fedevg_code": Partitioner(
        _build_fedevg_code,
        ("num_clients", "alpha"),
        {"mincls": 2, "min_samples": 5, "max_tries": 10_000},
    ),
    "fedevg_dirichlet": Partitioner(
        _build_fedevg_dirichlet, ("num_clients", "alpha"), {"mincls": 2, "max_tries": 10_000}
    ),
    "natural": Partitioner(_build_natural, (), {"num_clients": None}),
    # DQN-Fed's Table 9 (the q-FFL / AFL Fashion-MNIST protocol): one client per class
    "by_label": Partitioner(_build_by_label, (), {}),
    # DQN-Fed's FEMNIST-skewed (specs/qffl-dqnfed.md B.5.1 FEM-skew): k random classes a client
    "random_classes": Partitioner(_build_random_classes, ("num_clients", "classes_per_client"), {}),
    # DQN-Fed's Table 12: FedCorr's Clothing1M split (util/sampling.py; options.py's defaults)
    "fedcorr_noniid": Partitioner(
        _build_fedcorr_noniid, ("num_clients",), {"class_prob": 0.7, "alpha": 10.0}
    ),
    "label_powerlaw": Partitioner(
        _build_label_powerlaw,
        ("num_clients", "labels_per_client"),
        {"sizes": "mnist", "mnist_label_bug": False},
    ),
}
# Every kind. val_fraction: share of each client's training split held out for validation
# (choosing a personalisation setting, e.g. SuPerFed's λ, without looking at the test split).
# pool_fraction < 1: the clients are built on a seeded random share of the pool (small-scale
# grids on a full dataset); drawn first, and only then, so 1.0 leaves every partition unchanged.
# pool_max: the same with a number of samples (the whole pool when it is smaller, e.g. a smoke
# stand-in); at most one of the two.
# test_is_val: the validation split takes the test split's place and the test samples are left
# out (a hyperparameter selection, DQN-Fed's B-D13, reads a share of each client's training
# split held out, on the very clients and training samples of the partition at the same seed,
# and never sees its test samples); needs val_fraction > 0.
COMMON_KEYS = {
    "test_fraction": 0.0,
    "val_fraction": 0.0,
    "test_is_val": False,
    "label_noise": None,
    "pool_fraction": 1.0,
    "pool_max": None,
    # "random": int(f n) test samples; "random_round": round(f n); "leaf": n - max(1,
    # int((1 - f) n)) (LEAF's split); "stratified": ceil(f n) with the client's class shares
    # (sklearn's stratified split); "official": the client's rows that came from the source's
    # official test split (a pool the `pool: merged` transform built; test_fraction 0)
    "test_split": "random",
}
TEST_SPLITS = ("random", "random_round", "leaf", "stratified", "official")
NOISE_KEYS = ("kind", "eps", "variant")
LABEL_KEYS = ("name", "description")  # accepted and recorded, never used


def check_partition_spec(spec: dict[str, Any]) -> None:
    """Raise ValueError naming the bad key of a partition spec (kind, keys, fractions)."""
    kind = spec.get("kind")
    if kind not in PARTITIONERS:
        raise ValueError(f"partition kind {kind!r} is unknown; valid: {sorted(PARTITIONERS)}")
    p = PARTITIONERS[kind]
    valid = {"kind", *p.required, *p.defaults, *COMMON_KEYS, *LABEL_KEYS}
    unknown = sorted(set(spec) - valid)
    if unknown:
        raise ValueError(f"{kind} partition: unknown key(s) {unknown}; valid: {sorted(valid)}")
    missing = [k for k in p.required if k not in spec]
    if missing:
        raise ValueError(f"{kind} partition: missing key(s) {missing}; valid: {sorted(valid)}")
    if spec.get("test_is_val") is True and not spec.get("val_fraction"):
        raise ValueError(
            f"{kind} partition: test_is_val evaluates on the validation split; set val_fraction "
            "(e.g. 0.1: a tenth of each client's training split)"
        )
    for key in ("test_fraction", "val_fraction"):
        value = spec.get(key, COMMON_KEYS[key])
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not (ok and 0.0 <= value < 1.0):
            raise ValueError(f"{kind} partition: {key} must be a number in [0, 1), got {value!r}")
    value = spec.get("pool_fraction", 1.0)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not (ok and 0.0 < value <= 1.0):
        raise ValueError(
            f"{kind} partition: pool_fraction must be a number in (0, 1], got {value!r}"
        )
    pool_max = spec.get("pool_max")
    if pool_max is not None and not (_is_int(pool_max) and pool_max >= 1):
        raise ValueError(
            f"{kind} partition: pool_max must be a positive integer or null, got {pool_max!r}"
        )
    if pool_max is not None and value < 1.0:
        raise ValueError(f"{kind} partition: give pool_fraction or pool_max, not both")
    for key, value in spec.items():
        why = _bad_value(key, value)
        if why is not None:
            raise ValueError(f"{kind} partition: {key} must be {why}, got {value!r}")
    if spec.get("test_split") == "official" and spec.get("test_fraction", 0.0):
        raise ValueError(
            f"{kind} partition: test_split official takes each client's official test rows as "
            f"its test split; drop test_fraction (got {spec['test_fraction']!r}) or choose "
            "another test_split"
        )


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _bad_value(key: str, v: Any) -> str | None:
    """Why a spec value is out of range (None = fine): checked when the config is loaded, so a
    bad value fails at DAG build rather than in the partition job."""
    if key == "num_clients":
        return None if v is None or (_is_int(v) and v >= 1) else "a positive integer"
    if key in ("shards_per_client", "labels_per_client", "classes_per_client", "max_tries"):
        return None if _is_int(v) and v >= 1 else "a positive integer"
    if key == "mincls":
        return None if _is_int(v) and v >= 1 else "a positive integer (at most the classes)"
    if key in ("min_size", "drop_at_most", "min_samples"):
        return None if _is_int(v) and v >= 0 else "an integer >= 0"
    if key == "alpha":
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) and v > 0
        return None if ok else "a finite number > 0"
    if key == "class_prob":
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 1
        return None if ok else "a number in (0, 1]"
    if key == "test_is_val":
        return None if isinstance(v, bool) else "true or false"
    if key == "assignment":
        return None if v in ASSIGNMENTS else f"one of {list(ASSIGNMENTS)}"
    if key == "sizes":
        return None if v in POWERLAW_SIZES else f"one of {list(POWERLAW_SIZES)}"
    if key == "test_split":
        return None if v in TEST_SPLITS else f"one of {list(TEST_SPLITS)}"
    if key == "mnist_label_bug":
        return None if isinstance(v, bool) else "true or false"
    if key in LABEL_KEYS:
        return None if isinstance(v, str) else "a string"
    if key == "label_noise" and v is not None:
        ok = isinstance(v, dict) and not set(v) - set(NOISE_KEYS) and "kind" in v and "eps" in v
        eps = v.get("eps") if isinstance(v, dict) else None
        ok = ok and v["kind"] in NOISE_KINDS and v.get("variant", "thesis") in NOISE_VARIANTS
        ok = ok and isinstance(eps, (int, float)) and not isinstance(eps, bool) and 0 <= eps <= 1
        return (
            None
            if ok
            else (
                f"null or a mapping {{kind: {'|'.join(NOISE_KINDS)}, eps: a number in [0, 1], "
                f"variant: {'|'.join(NOISE_VARIANTS)} (optional)}}"
            )
        )
    return None


def make_partition(
    labels: np.ndarray,
    groups: np.ndarray | None,
    spec: dict[str, Any],
    rng: np.random.Generator,
    num_classes: int | None = None,
    official_test: np.ndarray | None = None,
) -> Partition:
    """Build the partition a catalog entry describes, split each client into train/test, apply
    the entry's `label_noise` ({kind: pair|symmetric, eps, variant: thesis|code}) if any, and
    hold out `val_fraction` of each client's training split for validation if set.

    `official_test`: the prepared dataset's marks of the pool rows from the official test split
    (`ArrayDataset.official_test`); `test_split: official` needs them."""
    check_partition_spec(spec)
    if spec.get("test_split") == "official":
        if official_test is None or len(official_test) != len(labels):
            raise ValueError(
                f"{spec['kind']} partition: test_split official needs a dataset whose pool marks "
                "its official test rows: give the dataset `transform: {pool: merged}`"
            )
    kind = spec["kind"]
    p = PARTITIONERS[kind]
    params = {**p.defaults, **{k: spec[k] for k in (*p.required, *p.defaults) if k in spec}}
    test_fraction = float(spec.get("test_fraction", COMMON_KEYS["test_fraction"]))
    val_fraction = float(spec.get("val_fraction", COMMON_KEYS["val_fraction"]))
    labels = np.asarray(labels)
    pool_fraction = float(spec.get("pool_fraction", 1.0))
    pool_max = spec.get("pool_max")
    pool = None
    if pool_fraction < 1.0 or (pool_max is not None and pool_max < len(labels)):
        size = max(1, int(round(pool_fraction * len(labels))))
        if pool_max is not None:
            size = int(pool_max)
        pool = np.sort(rng.choice(len(labels), size=size, replace=False))
        sub_groups = None if groups is None else np.asarray(groups)[pool]
        clients, info = p.build(labels[pool], sub_groups, rng, **params)
        clients = [pool[c] for c in clients]  # back to indices into the whole pool
        if RELABELLED in info:
            full = labels.copy()
            full[pool] = info[RELABELLED]
            info[RELABELLED] = full
    else:
        clients, info = p.build(labels, groups, rng, **params)
    relabelled = info.pop(RELABELLED, None)  # a generator's own labels (pFedBreD's MNIST bug)
    base = labels if relabelled is None else relabelled
    test_split = spec.get("test_split", COMMON_KEYS["test_split"])
    if test_split == "official":
        train, test = split_official(clients, official_test)
    elif test_split == "stratified":
        train, test = split_train_test_stratified(clients, base, test_fraction, rng)
    else:
        rounding = {"random_round": "round", "leaf": "leaf"}.get(test_split, "floor")
        train, test = split_train_test(clients, test_fraction, rng, rounding)
    noise = spec.get("label_noise")
    noisy = None
    if noise is not None:
        bad = sorted(set(noise) - set(NOISE_KEYS)) if isinstance(noise, dict) else ["?"]
        if bad or "kind" not in noise or "eps" not in noise:
            raise ValueError(
                f"{kind} partition: label_noise needs kind and eps (and optionally variant), "
                f"got {noise!r}"
            )
        classes = int(num_classes) if num_classes is not None else int(labels.max()) + 1
        noisy = noisy_partition_labels(
            base,
            train,
            noise["kind"],
            float(noise["eps"]),
            classes,
            rng,
            noise.get("variant", "thesis"),
        )
    meta = {
        "kind": kind,
        "params": params,
        "test_fraction": test_fraction,
        **({"test_split": test_split} if test_split != "random" else {}),
        "num_samples": int(len(labels)),
        **(
            {"pool_fraction": pool_fraction, "pool_size": int(len(pool))}
            if pool is not None
            else {}
        ),
        "num_clients": len(clients),
        "client_sizes": [len(c) for c in clients],
        "train_sizes": [len(t) for t in train],
        "test_sizes": [len(t) for t in test],
        **info,
        **{k: spec[k] for k in LABEL_KEYS if k in spec},
    }
    if noisy is not None:
        meta["label_noise"] = dict(noise)
        meta["flipped_train_labels"] = int(sum(int((noisy[t] != base[t]).sum()) for t in train))
    val: list[np.ndarray] = []
    if val_fraction > 0:
        # Drawn last, so the clients, test splits and label noise equal the val_fraction=0 ones;
        # validation labels carry the training noise, as a client's own labels would.
        train, val = split_train_test(train, val_fraction, rng)
        meta.update(
            val_fraction=val_fraction,
            train_sizes=[len(t) for t in train],
            val_sizes=[len(v) for v in val],
        )
    if spec.get("test_is_val"):  # the test samples are left out: nothing reads them
        meta.update(test_is_val=True, left_out_test_sizes=meta["test_sizes"])
        test, val = val, []
        meta["test_sizes"] = meta.pop("val_sizes")
    return Partition(train, test, meta, noisy if noisy is not None else relabelled, val)

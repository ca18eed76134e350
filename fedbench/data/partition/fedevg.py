"""FedEvg's splits: the release's overlapping "diri" split and the thesis profile's disjoint one."""

from __future__ import annotations

from typing import Any

import numpy as np

from fedbench.data.partition.common import _as_clients, _check_clients, _is_int


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

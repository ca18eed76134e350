"""pFedBreD's (and pFedMe's) label-shard + log-normal power-law split."""

from __future__ import annotations

import numpy as np

from fedbench.data.partition.common import _as_clients, _check_clients

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

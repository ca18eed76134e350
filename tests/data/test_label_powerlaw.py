"""pFedBreD's label power-law partitioner (pfedbred.md §3): labels, block sizes, the MNIST bug."""

from __future__ import annotations

import numpy as np
import pytest

from fedbench.config import PARTITION_KINDS
from fedbench.data.partition import (
    PARTITIONERS,
    label_powerlaw,
    load_partition,
    make_partition,
    save_partition,
)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def pool(per_class: int = 7000, classes: int = 10) -> np.ndarray:
    """Labels of a pool with `per_class` samples of each class, classes interleaved."""
    return np.arange(per_class * classes) % classes


def blocks(labels: np.ndarray, client: np.ndarray) -> dict[int, int]:
    return {int(k): int(n) for k, n in zip(*np.unique(labels[client], return_counts=True))}


MNIST = {"kind": "label_powerlaw", "num_clients": 100, "labels_per_client": 3}
FMNIST = {**MNIST, "labels_per_client": 2}
CIFAR = {**MNIST, "num_clients": 20, "sizes": "cifar10"}


@pytest.mark.parametrize("spec", [MNIST, FMNIST, CIFAR], ids=["mnist", "fmnist", "cifar10"])
def test_disjoint_labels_and_block_sizes(spec):
    labels = pool(6000 if spec is CIFAR else 7000)
    clients, _ = label_powerlaw(
        labels, spec["num_clients"], spec["labels_per_client"], rng(1), spec.get("sizes", "mnist")
    )
    k, per = spec["num_clients"], spec["labels_per_client"]
    assert len(clients) == k
    flat = np.concatenate(clients)
    assert len(np.unique(flat)) == len(flat), "a sample is in two clients"
    assert all(np.all(np.diff(c) > 0) for c in clients)
    for u, c in enumerate(clients):
        counts = blocks(labels, c)
        assert sorted(counts) == sorted((u + j) % 10 for j in range(per))  # exactly its labels
        for n in counts.values():
            extra = n - 10  # the first 10 of each label, then one power-law block or none
            if spec is CIFAR:  # (int(p) + randint(300, 600)) * 2, doubled as num_clients <= 20
                assert extra == 0 or (extra >= 600 and extra % 2 == 0)
            else:  # int(p) * randint(1, 10) + randint(10, 200)
                assert extra == 0 or extra >= 10
    # Samples are taken in pool order: each class's used samples are its first ones.
    for cls in range(10):
        used = np.sort(flat[labels[flat] == cls])
        assert np.array_equal(used, np.flatnonzero(labels == cls)[: len(used)])
        assert len(used) < (labels == cls).sum()  # a block never reaches the class's end


def test_seed_stable_and_seed_dependent():
    labels = pool()
    a, _ = label_powerlaw(labels, 100, 3, rng(5))
    b, _ = label_powerlaw(labels, 100, 3, rng(5))
    c, _ = label_powerlaw(labels, 100, 3, rng(6))
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert [len(x) for x in a] != [len(x) for x in c]


def test_mnist_label_bug_relabels_the_first_blocks_as_j():
    labels = pool()
    clients, bugged = label_powerlaw(labels, 100, 3, rng(2), mnist_label_bug=True)
    fixed, none = label_powerlaw(labels, 100, 3, rng(2))
    assert none is None
    assert all(np.array_equal(x, y) for x, y in zip(clients, fixed, strict=True))  # same split
    wrong = np.flatnonzero(bugged != labels)
    # Client u's j-th label l = (u + j) mod 10 is relabelled j unless l == j, i.e. u mod 10 != 0:
    # 90 clients x 3 labels x 10 images = 2,700 (spec §3).
    assert len(wrong) == 2700
    for u, c in enumerate(clients):
        mine = np.intersect1d(c, wrong)
        assert len(mine) == (0 if u % 10 == 0 else 30)
        for j in range(3):
            first = np.flatnonzero(labels == (u + j) % 10)
            first = np.intersect1d(first, c)[:10]  # its first 10 samples of that label
            assert np.all(bugged[first] == j)


@pytest.mark.parametrize("sizes", ["mnist", "cifar10"])
def test_classes_below_the_offset_get_the_base_blocks_only(sizes):
    labels = pool(700)  # 700 < the MNIST rule's offset of 1000
    clients, _ = label_powerlaw(labels, 10, 3, rng(0), sizes)
    flat = np.concatenate(clients)
    assert len(np.unique(flat)) == len(flat), "a sample is in two clients"
    if sizes == "mnist":  # share 0: randint(10, 200), doubled (num_clients <= 20)
        extras = [n - 10 for c in clients for n in blocks(labels, c).values()]
        assert all(e == 0 or (20 <= e <= 400 and e % 2 == 0) for e in extras)
        assert any(e > 0 for e in extras)


def test_make_partition_splits_75_25_and_keeps_the_bugged_labels(tmp_path):
    labels = pool(700)
    spec = {**MNIST, "num_clients": 20, "mnist_label_bug": True, "test_fraction": 0.25}
    p = make_partition(labels, None, spec, rng(0), num_classes=10)
    for tr, te, n in zip(p.train, p.test, p.meta["client_sizes"], strict=True):
        assert len(te) == int(0.25 * n) and len(tr) + len(te) == n
        assert len(np.intersect1d(tr, te)) == 0
    assert p.meta["mislabelled"] == int((p.labels != labels).sum()) > 0
    assert p.meta["left_out"] == len(labels) - sum(p.meta["client_sizes"])
    assert "_relabelled" not in p.meta
    save_partition(tmp_path / "p.npz", p)
    assert np.array_equal(load_partition(tmp_path / "p.npz").labels, p.labels)
    clean = make_partition(labels, None, {**spec, "mnist_label_bug": False}, rng(0))
    assert clean.labels is None and "mislabelled" not in clean.meta
    assert all(np.array_equal(a, b) for a, b in zip(clean.test, p.test, strict=True))


def test_validation_split_and_label_noise_on_top_of_the_bug():
    labels = pool(700)
    spec = {**MNIST, "num_clients": 20, "mnist_label_bug": True, "test_fraction": 0.25}
    base = make_partition(labels, None, spec, rng(3), num_classes=10)
    val = make_partition(labels, None, {**spec, "val_fraction": 0.2}, rng(3), num_classes=10)
    assert all(np.array_equal(a, b) for a, b in zip(base.test, val.test, strict=True))
    for tr0, tr, v in zip(base.train, val.train, val.val, strict=True):
        assert np.array_equal(np.sort(np.concatenate([tr, v])), tr0) and len(v) > 0
    noisy = make_partition(
        labels,
        None,
        {**spec, "label_noise": {"kind": "pair", "eps": 0.5}},
        rng(3),
        num_classes=10,
    )
    test = np.concatenate(noisy.test)
    assert np.array_equal(noisy.labels[test], base.labels[test])  # test keeps the bugged labels
    assert noisy.meta["flipped_train_labels"] > 0


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"labels_per_client": 0}, "labels_per_client must be a positive integer"),
        ({"labels_per_client": 11}, "labels_per_client=11 exceeds the 10 classes"),
        ({"sizes": "femnist"}, "sizes must be one of"),
        ({"mnist_label_bug": "yes"}, "mnist_label_bug must be true or false"),
        ({"num_clients": 0}, "num_clients must be a positive integer"),
        ({"num_clients": 500}, "num_clients=500 with labels_per_client=3 needs more"),
        ({"label_per_client": 3}, "label_per_client.*valid"),
    ],
)
def test_bad_parameters_are_rejected_naming_the_key(change, needle):
    with pytest.raises(ValueError, match=needle):
        make_partition(pool(100), None, {**MNIST, **change}, rng())


def test_missing_key_is_named():
    spec = {"kind": "label_powerlaw", "num_clients": 10}
    with pytest.raises(ValueError, match="missing.*labels_per_client"):
        make_partition(pool(100), None, spec, rng())


def test_registered_and_accepted_by_the_catalog():
    assert "label_powerlaw" in PARTITIONERS and "label_powerlaw" in PARTITION_KINDS

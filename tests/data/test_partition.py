"""Partitioners: disjoint, covering, seeded, minimum sizes honoured, no hang at tiny alpha."""

from __future__ import annotations

import numpy as np
import pytest

from fedbench.data.partition import (
    PARTITIONERS,
    Partition,
    dirichlet,
    iid,
    load_partition,
    make_partition,
    natural,
    save_partition,
    shards,
    split_train_test,
)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def labels_of(n: int = 1000, classes: int = 10) -> np.ndarray:
    return np.arange(n) % classes


def assert_disjoint_sorted(clients: list[np.ndarray], n: int, cover: bool = True) -> None:
    flat = np.concatenate(clients)
    assert all(c.dtype == np.int64 and np.all(np.diff(c) > 0) for c in clients if len(c) > 1)
    assert len(np.unique(flat)) == len(flat), "a sample is in two clients"
    assert flat.min() >= 0 and flat.max() < n
    if cover:
        assert len(flat) == n


def same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_iid():
    clients = iid(103, 10, rng())
    assert_disjoint_sorted(clients, 103)
    assert sorted(len(c) for c in clients) == [10] * 7 + [11] * 3
    assert same(clients, iid(103, 10, rng()))
    assert not same(clients, iid(103, 10, rng(1)))
    with pytest.raises(ValueError, match="num_clients"):
        iid(5, 10, rng())


def test_shards_roundrobin_equal_shards_per_client():
    labels = labels_of(1000)
    clients = shards(labels, 10, 2, rng(), "sorted_roundrobin")
    assert_disjoint_sorted(clients, 1000)
    order = np.argsort(labels, kind="stable").reshape(20, 50)
    for k, c in enumerate(clients):
        assert len(c) == 100
        assert same([c], [np.sort(np.concatenate([order[k], order[k + 10]]))])
        assert len(np.unique(labels[c])) == 2  # pathological: two labels per client
    assert same(clients, shards(labels, 10, 2, rng(5), "sorted_roundrobin"))  # no randomness


def test_shards_random_and_remainder():
    labels = labels_of(1005)
    a = shards(labels, 10, 2, rng(0), "random")
    assert_disjoint_sorted(a, 1005, cover=False)
    assert [len(c) for c in a] == [100] * 10  # 5 samples left out
    assert same(a, shards(labels, 10, 2, rng(0), "random"))
    assert not same(a, shards(labels, 10, 2, rng(1), "random"))
    with pytest.raises(ValueError, match="assignment"):
        shards(labels, 10, 2, rng(), "zigzag")


def test_dirichlet_basic():
    labels = labels_of(2000)
    a = dirichlet(labels, 20, 0.5, rng(0), min_size=10)
    assert_disjoint_sorted(a, 2000)
    assert min(len(c) for c in a) >= 10
    assert same(a, dirichlet(labels, 20, 0.5, rng(0), min_size=10))
    assert not same(a, dirichlet(labels, 20, 0.5, rng(1), min_size=10))


def test_dirichlet_tiny_alpha_terminates_and_repairs():
    labels = np.random.default_rng(3).integers(0, 10, 60_000)
    clients = dirichlet(labels, 100, 0.01, rng(0), min_size=10, max_tries=100)
    assert len(clients) == 100
    assert_disjoint_sorted(clients, 60_000)
    assert min(len(c) for c in clients) >= 10
    # Skewed: most clients see very few labels.
    assert np.median([len(np.unique(labels[c])) for c in clients]) <= 3


def test_dirichlet_validation():
    labels = labels_of(100)
    with pytest.raises(ValueError, match="alpha"):
        dirichlet(labels, 5, 0.0, rng())
    with pytest.raises(ValueError, match="min_size"):
        dirichlet(labels, 20, 1.0, rng(), min_size=6)
    with pytest.raises(ValueError, match="num_clients"):
        dirichlet(labels, 200, 1.0, rng(), min_size=0)


def test_natural():
    groups = np.array([3, 1, 3, 7, 1, 1, 7], dtype=np.int64)
    clients = natural(groups)
    assert [c.tolist() for c in clients] == [[1, 4, 5], [0, 2], [3, 6]]


def test_split_train_test_sizes():
    clients = iid(1000, 7, rng())
    train, test = split_train_test(clients, 0.2, rng(1))
    for c, tr, te in zip(clients, train, test, strict=True):
        assert len(te) == int(0.2 * len(c)) and len(tr) == len(c) - len(te)
        assert same([np.union1d(tr, te)], [c]) and len(np.intersect1d(tr, te)) == 0
    again = split_train_test(clients, 0.2, rng(1))
    assert same(train, again[0]) and same(test, again[1])
    with pytest.raises(ValueError, match="test_fraction"):
        split_train_test(clients, 1.0, rng())


def test_make_partition_and_meta():
    labels = labels_of(600)
    spec = {
        "kind": "dirichlet",
        "num_clients": 10,
        "alpha": 0.1,
        "min_size": 5,
        "test_fraction": 0.2,
    }
    p = make_partition(labels, None, spec, rng(0))
    assert p.meta["kind"] == "dirichlet" and p.meta["params"]["alpha"] == 0.1
    assert p.meta["params"]["max_tries"] == 100 and p.meta["num_clients"] == 10
    assert p.meta["client_sizes"] == [
        a + b for a, b in zip(p.meta["train_sizes"], p.meta["test_sizes"], strict=True)
    ]
    assert_disjoint_sorted([*p.train, *p.test], 600)
    q = make_partition(labels, None, spec, rng(0))
    assert same(p.train, q.train) and same(p.test, q.test)


def test_make_partition_natural_with_cap():
    groups = np.repeat(np.arange(6, dtype=np.int64), 10)
    p = make_partition(groups * 0, groups, {"kind": "natural", "num_clients": 4}, rng(0))
    assert len(p.train) == 4 and len(p.meta["groups_kept"]) == 4
    with pytest.raises(ValueError, match="groups"):
        make_partition(groups, None, {"kind": "natural"}, rng(0))


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ({"kind": "voronoi", "num_clients": 3}, "voronoi.*valid"),
        ({"kind": "iid", "num_client": 3}, "num_client.*valid"),
        ({"kind": "dirichlet", "num_clients": 3}, "missing.*alpha"),
        ({"kind": "shards", "num_clients": 3, "alpha": 1.0}, "alpha.*valid"),
    ],
)
def test_make_partition_rejects_bad_specs(spec, needle):
    with pytest.raises(ValueError, match=needle):
        make_partition(labels_of(100), None, spec, rng())


def test_registry_kinds():
    assert sorted(PARTITIONERS) == [
        "by_label",
        "dirichlet",
        "dirichlet_capped",
        "dirichlet_equal",
        "fedcorr_noniid",
        "fedevg_code",
        "fedevg_dirichlet",
        "iid",
        "label_powerlaw",
        "natural",
        "random_classes",
        "shards",
    ]


def test_partition_round_trip(tmp_path):
    p = make_partition(
        labels_of(300), None, {"kind": "iid", "num_clients": 4, "test_fraction": 0.25}, rng()
    )
    path = tmp_path / "p.npz"
    save_partition(path, p)
    q = load_partition(path)
    assert same(p.train, q.train) and same(p.test, q.test) and q.meta == p.meta
    empty = Partition([np.array([2, 0], dtype=np.int64)], [np.zeros(0, dtype=np.int64)], {})
    save_partition(path, empty)
    r = load_partition(path)
    assert r.train[0].tolist() == [2, 0] and len(r.test[0]) == 0


def test_truncated_partition_names_the_file(tmp_path):
    path = tmp_path / "part.npz"
    save_partition(
        path, make_partition(labels_of(300), None, {"kind": "iid", "num_clients": 3}, rng())
    )
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(ValueError, match="part.npz"):
        load_partition(path)
    with pytest.raises(FileNotFoundError, match="missing.npz"):
        load_partition(tmp_path / "missing.npz")


def test_dirichlet_capped_caps_drops_and_is_seeded():
    from fedbench.data.partition import dirichlet_capped

    labels = np.random.default_rng(0).integers(0, 10, 5000)
    a = dirichlet_capped(labels, 50, 0.1, np.random.default_rng(1))
    b = dirichlet_capped(labels, 50, 0.1, np.random.default_rng(1))
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    flat = np.concatenate(a)
    assert len(flat) == len(np.unique(flat))  # disjoint
    assert all(len(c) > 10 for c in a)  # clients with <= 10 samples are dropped
    assert len(a) <= 50
    # A client stops receiving new classes once it holds N/K samples: its size exceeds the cap by
    # at most what one class's draw gave it.
    class_max = np.bincount(labels).max()
    assert max(len(c) for c in a) <= 5000 / 50 + class_max
    kept = dirichlet_capped(labels, 50, 100.0, np.random.default_rng(1))
    assert len(kept) == 50 and sum(len(c) for c in kept) == 5000


def test_label_noise_only_on_training_labels_and_round_trips(tmp_path):
    labels = np.repeat(np.arange(10), 200)
    spec = {
        "kind": "iid",
        "num_clients": 10,
        "test_fraction": 0.2,
        "label_noise": {"kind": "pair", "eps": 0.4},
    }
    p = make_partition(labels, None, spec, np.random.default_rng(0), num_classes=10)
    train = np.concatenate(p.train)
    test = np.concatenate(p.test)
    flipped = p.labels[train] != labels[train]
    assert np.array_equal(p.labels[test], labels[test])  # test labels stay clean (thesis)
    assert abs(flipped.mean() - 0.4) < 5 * np.sqrt(0.4 * 0.6 / len(train))
    assert np.all(p.labels[train][flipped] == (labels[train][flipped] + 1) % 10)  # pair: i -> i+1
    assert p.meta["flipped_train_labels"] == int(flipped.sum())
    save_partition(tmp_path / "p.npz", p)
    assert np.array_equal(load_partition(tmp_path / "p.npz").labels, p.labels)
    clean = make_partition(
        labels, None, {"kind": "iid", "num_clients": 10}, np.random.default_rng(0)
    )
    assert clean.labels is None
    with pytest.raises(ValueError, match="label_noise"):
        make_partition(
            labels, None, {**spec, "label_noise": {"eps": 0.1}}, np.random.default_rng(0)
        )


def test_validation_split_is_held_out_of_training_and_seeded(tmp_path):
    labels = np.repeat(np.arange(10), 60)
    base = {"kind": "dirichlet", "num_clients": 8, "alpha": 0.5, "test_fraction": 0.2}
    noise = {"label_noise": {"kind": "symmetric", "eps": 0.3}}
    off = make_partition(labels, None, {**base, **noise}, rng(3), num_classes=10)
    on = make_partition(labels, None, {**base, **noise, "val_fraction": 0.25}, rng(3), 10)
    assert off.val == [] and "val_fraction" not in off.meta  # off by default: nothing added
    assert len(on.val) == 8 and on.meta["val_sizes"] == [len(v) for v in on.val]
    assert same(on.test, off.test) and np.array_equal(on.labels, off.labels)  # drawn last
    for tr_off, tr, va, te in zip(off.train, on.train, on.val, on.test, strict=True):
        assert len(va) == int(0.25 * len(tr_off)) and len(va) > 0
        assert same([np.union1d(tr, va)], [tr_off])  # carved from the training split only
        assert not set(va) & set(tr) and not set(va) & set(te)
    assert on.meta["train_sizes"] == [len(t) for t in on.train]
    again = make_partition(labels, None, {**base, **noise, "val_fraction": 0.25}, rng(3), 10)
    other = make_partition(labels, None, {**base, **noise, "val_fraction": 0.25}, rng(4), 10)
    assert same(on.val, again.val) and same(on.train, again.train)
    assert not same(on.val, other.val)
    save_partition(tmp_path / "v.npz", on)
    back = load_partition(tmp_path / "v.npz")
    assert same(back.val, on.val) and same(back.train, on.train) and back.meta == on.meta
    save_partition(tmp_path / "o.npz", off)
    assert load_partition(tmp_path / "o.npz").val == []
    with np.load(tmp_path / "o.npz") as z:
        assert "val" not in z.files


def test_test_is_val_evaluates_on_the_held_out_share_and_leaves_the_test_split_out():
    """B-D13's selection: the same clients and training samples as the partition's own at the
    same seed, a tenth of each training split read as the test split, no test sample anywhere."""
    labels = np.repeat(np.arange(10), 60)
    base = {"kind": "dirichlet", "num_clients": 8, "alpha": 0.5, "test_fraction": 0.2}
    own = make_partition(labels, None, base, rng(3), num_classes=10)
    held = make_partition(labels, None, {**base, "val_fraction": 0.1}, rng(3), 10)
    sel = make_partition(labels, None, {**base, "val_fraction": 0.1, "test_is_val": True}, rng(3))
    assert same(sel.test, held.val) and same(sel.train, held.train) and sel.val == []
    for tr_own, tr, va, te in zip(own.train, sel.train, sel.test, own.test, strict=True):
        assert same([np.union1d(tr, va)], [tr_own])  # carved from the run's own training split
        assert not set(te) & (set(tr) | set(va))  # the test samples are nowhere
    assert sel.meta["test_is_val"] is True
    assert sel.meta["test_sizes"] == [len(v) for v in sel.test]
    assert sel.meta["left_out_test_sizes"] == [len(t) for t in own.test]
    with pytest.raises(ValueError, match="test_is_val evaluates on the validation split; set"):
        make_partition(labels, None, {**base, "test_is_val": True}, rng(3))
    with pytest.raises(ValueError, match="test_is_val must be true or false"):
        make_partition(labels, None, {**base, "val_fraction": 0.1, "test_is_val": "yes"}, rng(3))


@pytest.mark.parametrize("value", [1.0, -0.1, "0.1", True])
def test_bad_val_fraction_names_the_key(value):
    spec = {"kind": "iid", "num_clients": 3, "val_fraction": value}
    with pytest.raises(ValueError, match="val_fraction"):
        make_partition(labels_of(100), None, spec, rng())


def test_pool_fraction_builds_clients_on_a_seeded_share_of_the_pool():
    labels = np.repeat(np.arange(10), 100)
    base = {"kind": "shards", "num_clients": 10, "shards_per_client": 2, "test_fraction": 0.2}
    full = make_partition(labels, None, base, rng(5))
    explicit = make_partition(labels, None, {**base, "pool_fraction": 1.0}, rng(5))
    assert same(full.train, explicit.train) and "pool_size" not in explicit.meta
    part = make_partition(labels, None, {**base, "pool_fraction": 0.25}, rng(5))
    used = np.concatenate(part.train + part.test)
    # A quarter of the pool: 20 shards of 12 samples, 10 left out (shards' remainder).
    assert len(used) == 240 and len(np.unique(used)) == 240 and part.meta["left_out"] == 10
    assert part.meta["pool_size"] == 250 and part.meta["num_samples"] == 1000
    # The share is drawn first from the partition stream, then the kind runs on it as on any
    # pool; its client indices are mapped back to positions in the whole pool.
    r = rng(5)
    pool = np.sort(r.choice(1000, size=250, replace=False))
    direct = make_partition(labels[pool], None, base, r)
    assert same(part.train, [pool[t] for t in direct.train])
    assert same(part.test, [pool[t] for t in direct.test])
    again = make_partition(labels, None, {**base, "pool_fraction": 0.25}, rng(5))
    other = make_partition(labels, None, {**base, "pool_fraction": 0.25}, rng(6))
    assert same(part.train, again.train) and not same(part.train, other.train)


def test_pool_fraction_keeps_natural_groups_and_generator_labels():
    groups = np.repeat(np.arange(20), 10)
    labels = np.arange(200) % 3
    part = make_partition(labels, groups, {"kind": "natural", "pool_fraction": 0.5}, rng(1))
    for t in part.train:  # every client is still one writer
        assert len(np.unique(groups[t])) == 1
    assert sum(len(t) for t in part.train) == 100
    mnist = np.repeat(np.arange(10), 700)
    spec = {
        "kind": "label_powerlaw",
        "num_clients": 20,
        "labels_per_client": 2,
        "mnist_label_bug": True,
        "pool_fraction": 0.5,
    }
    bugged = make_partition(mnist, None, spec, rng(2))
    assert bugged.labels is not None and len(bugged.labels) == len(mnist)


@pytest.mark.parametrize("value", [0.0, 1.5, "0.5", True])
def test_bad_pool_fraction_names_the_key(value):
    spec = {"kind": "iid", "num_clients": 3, "pool_fraction": value}
    with pytest.raises(ValueError, match="pool_fraction"):
        make_partition(labels_of(100), None, spec, rng())

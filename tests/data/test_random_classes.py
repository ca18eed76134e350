"""The random_classes partitioner (DQN-Fed's FEMNIST-skewed, specs/qffl-dqnfed.md B.5.1): each
client draws k distinct classes at random and each class is dealt in near-equal parts to the
clients that drew it."""

from __future__ import annotations

import numpy as np
import pytest

from fedbench.data.partition import make_partition, random_classes

SKEW = {"kind": "random_classes", "num_clients": 100, "classes_per_client": 5}


def pool(per_class: int = 300, classes: int = 10) -> np.ndarray:
    """Labels with `per_class` samples of each class, classes interleaved."""
    return np.arange(per_class * classes) % classes


def test_every_client_holds_exactly_its_drawn_classes_and_no_sample_twice():
    labels = pool()
    clients, drawn = random_classes(labels, 100, 5, np.random.default_rng(3))
    assert len(clients) == 100 and len(drawn) == 100
    for client, classes in zip(clients, drawn):
        assert len(classes) == 5 == len(set(classes)) and classes == sorted(classes)
        assert sorted(set(labels[client].tolist())) == classes
    everything = np.concatenate(clients)
    assert len(everything) == len(np.unique(everything))  # no sample on two clients
    # every class was drawn (10 classes, 500 draws): every sample is dealt
    assert len(everything) == len(labels)
    # a class's share: its 300 samples over the clients that drew it, sizes differing by <= 1
    for c in range(10):
        holders = [k for k, cl in enumerate(drawn) if c in cl]
        counts = [int((labels[clients[k]] == c).sum()) for k in holders]
        assert sum(counts) == 300 and max(counts) - min(counts) <= 1


def test_by_hand_two_clients_one_class_each_of_two():
    # 2 clients, 1 of 2 classes each: the draws come first, rng.permutation(2)[:1] per client,
    # so a generator with the same seed gives the classes. A class both drew is halved between
    # them; a class none drew is left out. Seeds 0-5 hold both cases.
    labels = np.array([0, 1, 0, 1, 0, 1, 0, 1])
    cases = set()
    for seed in range(6):
        clients, drawn = random_classes(labels, 2, 1, np.random.default_rng(seed))
        check = np.random.default_rng(seed)
        expect = [int(check.permutation(2)[0]) for _ in range(2)]
        assert [d[0] for d in drawn] == expect
        if expect[0] == expect[1]:
            own = np.flatnonzero(labels == expect[0]).tolist()
            assert sorted(np.concatenate(clients).tolist()) == own
            assert [len(x) for x in clients] == [2, 2]
        else:
            for client, c in zip(clients, expect):
                assert client.tolist() == np.flatnonzero(labels == c).tolist()
        cases.add(expect[0] == expect[1])
    assert cases == {True, False}


def test_seeded_reproducible_and_the_seed_matters():
    labels = pool()
    a = make_partition(
        labels,
        None,
        {**SKEW, "test_split": "stratified", "test_fraction": 0.2},
        np.random.default_rng(0),
    )
    b = make_partition(
        labels,
        None,
        {**SKEW, "test_split": "stratified", "test_fraction": 0.2},
        np.random.default_rng(0),
    )
    c = make_partition(
        labels,
        None,
        {**SKEW, "test_split": "stratified", "test_fraction": 0.2},
        np.random.default_rng(1),
    )
    assert a.meta["client_classes"] == b.meta["client_classes"]
    assert all(np.array_equal(x, y) for x, y in zip(a.train + a.test, b.train + b.test))
    assert a.meta["client_classes"] != c.meta["client_classes"]
    assert a.meta["left_out"] == 0 and a.meta["num_clients"] == 100
    # per-client test splits (B.10 item 10): from the client's own samples, its classes only
    for train, test, classes in zip(a.train, a.test, a.meta["client_classes"]):
        assert not np.intersect1d(train, test).size
        assert set(labels[test].tolist()) <= set(classes) == set(labels[train].tolist())


def test_too_few_samples_or_classes_are_refused_by_name():
    with pytest.raises(ValueError, match="class 1 has 1 samples for the .* clients"):
        random_classes(np.array([0, 0, 0, 0, 1, 2, 2, 2, 2]), 4, 3, np.random.default_rng(0))
    with pytest.raises(ValueError, match="classes_per_client=11 exceeds the 10 classes"):
        random_classes(pool(), 5, 11, np.random.default_rng(0))
    with pytest.raises(ValueError, match="classes_per_client must be a positive integer"):
        make_partition(pool(), None, {**SKEW, "classes_per_client": 0}, np.random.default_rng(0))
    with pytest.raises(ValueError, match="missing key"):
        make_partition(
            pool(), None, {"kind": "random_classes", "num_clients": 3}, np.random.default_rng(0)
        )

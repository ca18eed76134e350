"""FedEvg's partitions (fedevg.md §3, §7 item 13): the release's overlapping "diri" split and the
disjoint thesis-profile split."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from fedbench.data.partition import (
    fedevg_code,
    fedevg_dirichlet,
    load_partition,
    make_partition,
    overlap_summary,
    save_partition,
)


def _labels(classes: int, per_class: int) -> np.ndarray:
    return np.repeat(np.arange(classes), per_class)


class ScriptedRng:
    """Stands in for a Generator: fixed prior and q, and the label draws given in order."""

    def __init__(self, draws: list[list[int]]):
        self.draws = [np.asarray(d) for d in draws]

    def uniform(self, size: int) -> np.ndarray:
        return np.full(size, 0.5)

    def dirichlet(self, alpha: np.ndarray) -> np.ndarray:
        return np.full(len(alpha), 1.0 / len(alpha))

    def choice(self, n: int, size: int, p: np.ndarray) -> np.ndarray:
        out = self.draws.pop(0)
        assert len(out) == size and out.max() < n
        return out


def test_release_split_by_hand():
    """3 classes x 10 (class c = indices 10c..10c+9), K = 3: ideal 10, kept counts > 2."""
    draws = [
        [0] * 7 + [1] * 3,  # client 0 takes 0-6 and 10-12; class 0 keeps 0-6, class 1 10-12
        [2] * 10,  # client 1: one class < mincls, rejected
        [0] * 4 + [2] * 6,  # 0-3 (client 0's again), 20-25; class 0 keeps 0-3
        [0] * 8 + [1] + [2],  # client 2: 8 of class 0 counted, 4 left to give; 1 and 2 dropped
        [0] * 3 + [1] * 3 + [2] * 4,  # 0-2 (a second time), 10-12, 20-23: 18 counted
    ]
    rng = ScriptedRng(draws)
    clients, info = fedevg_code(_labels(3, 10), 3, 1.0, rng, mincls=2, min_samples=2)
    assert rng.draws == []
    expected = [
        [0, 1, 2, 3, 4, 5, 6, 10, 11, 12],
        [0, 1, 2, 3, 20, 21, 22, 23, 24, 25],
        [0, 0, 1, 1, 2, 2, 3, 10, 11, 12, 20, 21, 22, 23],
    ]
    assert [c.tolist() for c in clients] == expected
    assert info["requested_sizes"] == [10, 10, 18]  # client 2 counted 18, got 14
    assert (info["draws"], info["rejected_draws"]) == (5, 1)
    # 0-3 held by all three, 10-12 by clients 0 and 2, 20-23 by clients 1 and 2
    assert info["shared_samples"] == 4 + 3 + 4
    assert info["clients_sharing"] == 3
    assert (info["within_client_repeats"], info["clients_with_repeats"]) == (3, 1)
    assert info["unassigned_samples"] == 30 - 16
    assert info["class_counts"] == [[7, 3, 0], [4, 0, 6], [7, 3, 4]]


def _release_transcript(labels, k, alpha, rng, mincls=2, min_samples=5):
    """split.py:110-170 written out again, lists and all, with the same Generator calls."""
    num_classes = int(labels.max()) + 1
    class_indices = {
        c: [i for i in range(len(labels)) if labels[i] == c] for c in range(num_classes)
    }
    ideal = len(labels) // k
    out, counted = [], []
    for _ in range(k):
        mine, satisfied = [], 0
        while satisfied < ideal:
            cat = rng.dirichlet(alpha * rng.uniform(size=num_classes))
            sampled = rng.choice(num_classes, size=ideal, p=cat)
            unique, counts = np.unique(sampled, return_counts=True)
            if len(unique) < mincls:
                continue
            required = counts * (counts > min_samples)
            for c, r in zip(unique.tolist(), required.tolist()):
                if r == 0:
                    continue
                mine += class_indices[c][:r]
                class_indices[c] = class_indices[c][:r]
            satisfied += int(required.sum())
        out.append(sorted(mine))
        counted.append(satisfied)
    return out, counted


@pytest.mark.parametrize(("alpha", "seed"), [(1.0, 0), (0.01, 1), (0.1, 2)])
def test_release_split_matches_a_transcript_and_overlaps(alpha, seed):
    labels = _labels(10, 50)
    clients, info = fedevg_code(labels, 10, alpha, np.random.default_rng(seed))
    want, counted = _release_transcript(labels, 10, alpha, np.random.default_rng(seed))
    assert [c.tolist() for c in clients] == want
    assert info["requested_sizes"] == counted and min(counted) >= 50
    # the overlap the spec describes, counted independently
    holders = Counter(i for c in want for i in set(c))
    shared = {i for i, h in holders.items() if h >= 2}
    assert shared and info["shared_samples"] == len(shared)
    assert info["clients_sharing"] == sum(bool(shared & set(c)) for c in want)
    assert info["within_client_repeats"] == sum(len(c) - len(set(c)) for c in want)
    assert info["unassigned_samples"] == 500 - len(holders)
    assert any(len(c) < n for c, n in zip(want, counted))  # fewer samples than counted


def test_overlap_summary_of_a_disjoint_split_is_zero():
    s = overlap_summary([np.array([0, 1]), np.array([2])], 4)
    assert s == {
        "shared_samples": 0,
        "clients_sharing": 0,
        "within_client_repeats": 0,
        "clients_with_repeats": 0,
        "unassigned_samples": 1,
    }


@pytest.mark.parametrize("kind", ["fedevg_code", "fedevg_dirichlet"])
def test_seeded(kind):
    spec = {"kind": kind, "num_clients": 10, "alpha": 0.1, "test_fraction": 0.2}
    a, b, c = (
        make_partition(_labels(10, 50), None, spec, np.random.default_rng(s)) for s in (4, 4, 5)
    )
    assert a.meta == b.meta
    assert all(np.array_equal(x, y) for x, y in zip(a.train + a.test, b.train + b.test))
    assert a.meta["client_sizes"] != c.meta["client_sizes"] or any(
        not np.array_equal(x, y) for x, y in zip(a.train, c.train)
    )


@pytest.mark.parametrize("alpha", [0.01, 1.0, 100.0])
def test_disjoint_split(alpha):
    labels = _labels(10, 50)[:-7]  # 493 samples: 49 per client, 3 left out
    clients, info = fedevg_dirichlet(labels, 10, alpha, np.random.default_rng(0))
    flat = np.concatenate(clients)
    assert len(np.unique(flat)) == len(flat)  # no sample twice
    assert [len(c) for c in clients] == [49] * 10 and info["left_out"] == 3
    hist = np.array(info["class_counts"])
    assert hist.tolist() == [np.bincount(labels[c], minlength=10).tolist() for c in clients]
    assert ((hist > 0).sum(axis=1) >= 2).all() and info["clients_below_mincls"] == 0


def test_disjoint_split_follows_alpha():
    labels = _labels(10, 50)
    spread = {}
    for alpha in (0.01, 100.0):
        clients, _ = fedevg_dirichlet(labels, 10, alpha, np.random.default_rng(0))
        spread[alpha] = np.mean([len(np.unique(labels[c])) for c in clients])
    assert spread[0.01] < 4 and spread[100.0] > 7


@pytest.mark.parametrize("mincls", [2, 3])
def test_disjoint_split_redraws_at_tiny_alpha_and_honours_mincls(mincls):
    labels = _labels(10, 50)
    split = fedevg_dirichlet(labels, 10, 1e-3, np.random.default_rng(0), mincls=mincls)
    clients, info = split
    assert info["redraws"] > 0  # a single class per draw is the rule at alpha = 1e-3
    classes = [len(np.unique(labels[c])) for c in clients]
    # fewer only where fewer classes were left (here the last client, with two, at mincls 3)
    assert sum(n < mincls for n in classes) == info["clients_below_mincls"] == (mincls == 3)
    assert min(classes) >= 2
    flat = np.concatenate(clients)
    assert len(np.unique(flat)) == len(flat) == 500


def test_tiny_alpha_does_not_spread_the_overflow_over_every_class():
    """A client whose class runs out continues with q's next classes, not all of them."""
    labels = _labels(10, 50)
    clients, _ = fedevg_dirichlet(labels, 5, 1e-3, np.random.default_rng(0), mincls=1)
    assert max(len(np.unique(labels[c])) for c in clients) <= 3


@pytest.mark.parametrize("split", [fedevg_code, fedevg_dirichlet])
def test_hopeless_draws_stop_with_an_error_naming_max_tries(split):
    with pytest.raises(ValueError, match="max_tries=5"):
        split(_labels(2, 250), 5, 1e-12, np.random.default_rng(0), mincls=2, max_tries=5)


def test_release_split_round_trips_with_its_repeats(tmp_path):
    spec = {"kind": "fedevg_code", "num_clients": 10, "alpha": 1.0, "test_fraction": 0.2}
    p = make_partition(_labels(10, 50), None, spec, np.random.default_rng(0))
    assert p.meta["shared_samples"] > 0 and p.meta["params"]["min_samples"] == 5
    save_partition(tmp_path / "p.npz", p)
    q = load_partition(tmp_path / "p.npz")
    assert q.meta == p.meta
    for k in range(10):  # each client's entries, repeats included, across train and test
        both = np.sort(np.concatenate([q.train[k], q.test[k]]))
        assert len(both) == p.meta["client_sizes"][k]
        assert np.array_equal(both, np.sort(np.concatenate([p.train[k], p.test[k]])))


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ({"alpha": 0}, "alpha"),
        ({"alpha": float("inf")}, "alpha"),
        ({"alpha": "0.1"}, "alpha"),
        ({"mincls": 0}, "mincls"),
        ({"mincls": 1.5}, "mincls"),
        ({"mincls": 11}, "mincls"),  # more than the 10 classes
        ({"max_tries": 0}, "max_tries"),
        ({"min_samples": -1}, "min_samples"),
        ({"min_samples": 50}, "min_samples"),  # no class count can exceed it at 50 per client
    ],
)
def test_bad_release_spec_names_the_key(extra, key):
    spec = {"kind": "fedevg_code", "num_clients": 10, "alpha": 0.1, **extra}
    with pytest.raises(ValueError, match=key):
        make_partition(_labels(10, 50), None, spec, np.random.default_rng(0))


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ({"alpha": -1.0}, "alpha"),
        ({"mincls": 0}, "mincls"),
        ({"mincls": 11}, "mincls"),
        ({"min_samples": 5}, "min_samples"),  # the release's key only
    ],
)
def test_bad_disjoint_spec_names_the_key(extra, key):
    spec = {"kind": "fedevg_dirichlet", "num_clients": 10, "alpha": 0.1, **extra}
    with pytest.raises(ValueError, match=key):
        make_partition(_labels(10, 50), None, spec, np.random.default_rng(0))

"""The equal-size client-Dirichlet partitioner (pFedBreD's Table 4)."""

import numpy as np
import pytest

from fedbench.data.partition import dirichlet_equal, make_partition


def _labels(per_class: list[int]) -> np.ndarray:
    return np.concatenate([np.full(n, c) for c, n in enumerate(per_class)])


def test_equal_sizes_disjoint_and_seeded():
    labels = _labels([300] * 10)
    a = dirichlet_equal(labels, 40, 0.5, np.random.default_rng(3))
    b = dirichlet_equal(labels, 40, 0.5, np.random.default_rng(3))
    assert [len(c) for c in a] == [3000 // 40] * 40
    flat = np.concatenate(a)
    assert len(np.unique(flat)) == len(flat)  # no sample twice
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    c = dirichlet_equal(labels, 40, 0.5, np.random.default_rng(4))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))


def _top_share(labels, clients):
    return np.mean([np.bincount(labels[c]).max() / len(c) for c in clients])


def test_alpha_controls_skew():
    labels = _labels([1000] * 10)
    rng = np.random.default_rng(0)
    skewed = dirichlet_equal(labels, 40, 0.01, rng)
    mixed = dirichlet_equal(labels, 40, 1000.0, rng)
    # Dir(0.01) puts nearly all mass on one class. Only the first four clients are free of
    # exhaustion (each class holds four clients' worth), so the later ones mix by necessity.
    assert _top_share(labels, skewed[:4]) > 0.85
    # Dir(1000): each class ~1/10 of a client of 250, the largest ~0.1 + a few binomial
    # standard deviations (~0.02 each).
    assert _top_share(labels, mixed) < 0.2


def test_exhausted_classes_are_skipped_not_overdrawn():
    # One class is tiny: clients that want it must take the rest from the other classes.
    labels = _labels([5, 400, 400])
    clients = dirichlet_equal(labels, 8, 0.05, np.random.default_rng(1))
    assert [len(c) for c in clients] == [805 // 8] * 8
    assert np.bincount(labels[np.concatenate(clients)], minlength=3)[0] <= 5


def test_catalog_kind_and_bad_alpha():
    labels = _labels([50] * 4)
    p = make_partition(
        labels,
        None,
        {"kind": "dirichlet_equal", "num_clients": 4, "alpha": 1.0},
        np.random.default_rng(0),
    )
    assert len(p.train) == 4
    with pytest.raises(ValueError, match="alpha"):
        make_partition(
            labels,
            None,
            {"kind": "dirichlet_equal", "num_clients": 4, "alpha": 0.0},
            np.random.default_rng(0),
        )


def test_pool_max_is_pool_fraction_with_a_count_and_the_whole_pool_when_smaller():
    labels = _labels([100] * 10)
    spec = {"kind": "iid", "num_clients": 4, "test_fraction": 0.25}
    by_fraction = make_partition(
        labels, None, {**spec, "pool_fraction": 0.2}, np.random.default_rng(5)
    )
    by_count = make_partition(labels, None, {**spec, "pool_max": 200}, np.random.default_rng(5))
    assert all(np.array_equal(a, b) for a, b in zip(by_fraction.train, by_count.train, strict=True))
    assert sum(len(c) for c in by_count.train + by_count.test) == 200
    whole = make_partition(labels, None, {**spec, "pool_max": 5000}, np.random.default_rng(5))
    plain = make_partition(labels, None, spec, np.random.default_rng(5))
    assert all(np.array_equal(a, b) for a, b in zip(whole.train, plain.train, strict=True))
    for bad, needle in (
        ({"pool_max": 0}, "pool_max"),
        ({"pool_max": 10, "pool_fraction": 0.5}, "not both"),
    ):
        with pytest.raises(ValueError, match=needle):
            make_partition(labels, None, {**spec, **bad}, np.random.default_rng(5))

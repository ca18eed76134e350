"""Per-client stratified test splits (AAggFF's release: sklearn train_test_split(stratify=y))."""

from __future__ import annotations

import numpy as np
import pytest

from fedbench.data.partition import make_partition, split_train_test_stratified


def test_class_shares_and_sizes_by_hand():
    # sklearn's allotment: training counts first (floors + largest remainders), then test.
    # client 0: classes 0/1 = 8/2, 2 test, 8 train: 6.4/1.6 -> 6/1 + 1 to class 1 -> 6/2,
    #   left 2/0 -> test 2/0
    # client 1: classes 0/2 = 5/5 -> train 4/4, test 1/1
    # client 2: classes 1/2 = 6/1, ceil(1.4) = 2 test, 5 train: 4.29/0.71 -> 4/0 + 1 to class 2
    #   -> 4/1, left 2/0 -> test 2/0
    labels = np.array([0] * 8 + [1] * 2 + [0] * 5 + [2] * 5 + [1] * 6 + [2])
    clients = [np.arange(10), np.arange(10, 20), np.arange(20, 27)]
    train, test = split_train_test_stratified(clients, labels, 0.2, np.random.default_rng(0))
    assert [len(t) for t in test] == [2, 2, 2]
    assert [sorted(labels[t].tolist()) for t in test] == [[0, 0], [0, 2], [1, 1]]
    for c, tr, te in zip(clients, train, test, strict=True):
        assert np.array_equal(np.sort(np.concatenate([tr, te])), c)
        assert not set(tr) & set(te)


def test_largest_remainder_and_seed():
    # shares 5:3:2, 2 test, 8 train: 4/2.4/1.6 -> 4/2/1 + 1 to class 2 -> 4/2/2; left 1/1/0
    labels = np.array([0] * 5 + [1] * 3 + [2] * 2)
    _, test = split_train_test_stratified([np.arange(10)], labels, 0.2, np.random.default_rng(1))
    assert sorted(labels[test[0]].tolist()) == [0, 1]
    again = split_train_test_stratified([np.arange(10)], labels, 0.2, np.random.default_rng(1))[1]
    assert np.array_equal(test[0], again[0])
    # sklearn rounds the test size up: ceil(0.2 * 11) = 3 (the random split takes int(2.2) = 2)
    eleven = np.arange(11) % 3
    _, test = split_train_test_stratified([np.arange(11)], eleven, 0.2, np.random.default_rng(2))
    assert len(test[0]) == 3


def test_partition_option():
    labels = np.array([0, 1] * 20)
    groups = np.repeat(np.arange(4), 10)
    spec = {"kind": "natural", "test_fraction": 0.2, "test_split": "stratified"}
    part = make_partition(labels, groups, spec, np.random.default_rng(0))
    assert all(sorted(labels[t].tolist()) == [0, 1] for t in part.test)
    assert part.meta["test_split"] == "stratified"
    with pytest.raises(ValueError, match="test_split"):
        make_partition(labels, groups, {**spec, "test_split": "balanced"}, np.random.default_rng(0))


def test_random_round_split_sizes():
    # Python's round (half to even), as the release's Speech Commands split: 3 -> round(0.6) = 1,
    # 8 -> round(1.6) = 2, 10 -> 2, 15 -> round(3.0) = 3; the floor split gives 0, 1, 2, 3
    labels = np.zeros(36, dtype=np.int64)
    groups = np.repeat(np.arange(4), [3, 8, 10, 15])
    for split, want in (("random_round", [1, 2, 2, 3]), ("random", [0, 1, 2, 3])):
        spec = {"kind": "natural", "test_fraction": 0.2, "test_split": split}
        part = make_partition(labels, groups, spec, np.random.default_rng(0))
        assert [len(t) for t in part.test] == want


def test_leaf_split_sizes():
    # LEAF: max(1, int(0.8 n)) training samples, 1 of 2: n = 2, 3, 5, 7, 10 -> 1, 1, 1, 2, 2 test
    # (the floor split would give 0, 0, 1, 1, 2); a single sample stays in training
    sizes = [2, 3, 5, 7, 10, 1]
    labels = np.zeros(sum(sizes), dtype=np.int64)
    groups = np.repeat(np.arange(len(sizes)), sizes)
    spec = {"kind": "natural", "test_fraction": 0.2, "test_split": "leaf"}
    part = make_partition(labels, groups, spec, np.random.default_rng(0))
    assert [len(t) for t in part.test] == [1, 1, 1, 2, 2, 0]
    assert [len(t) for t in part.train] == [1, 2, 4, 5, 8, 1]

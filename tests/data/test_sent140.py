"""Sent140 (LEAF + GloVe-50, pfedbred.md §3): LEAF steps, regrouping, fetch, stand-in."""

from __future__ import annotations

import numpy as np
import pytest

from fedbench.data.base import ArrayDataset, load_dataset, save_dataset


def _tiny(extras: dict) -> ArrayDataset:
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    y = np.array([0, 1, 0], dtype=np.int64)
    return ArrayDataset("t", x, y, x[:0], y[:0], 2, True, "test", extras=extras)


def test_extra_arrays_round_trip_through_the_dataset_file(tmp_path):
    table = np.linspace(0, 1, 12, dtype=np.float32).reshape(4, 3)
    save_dataset(_tiny({"embedding": table}), tmp_path / "d.npz")
    back = load_dataset(tmp_path / "d.npz")
    assert list(back.extras) == ["embedding"] and np.array_equal(back.extras["embedding"], table)
    save_dataset(_tiny({}), tmp_path / "plain.npz")
    assert load_dataset(tmp_path / "plain.npz").extras == {}
    with pytest.raises(ValueError, match="extra 'bad name'"):
        _tiny({"bad name": table})

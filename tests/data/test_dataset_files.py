"""ArrayDataset files: round trips, and damaged files named in the error."""

from __future__ import annotations

import numpy as np
import pytest

from fedbench.data.base import ArrayDataset, load_dataset, save_dataset


def _dataset(groups: bool) -> ArrayDataset:
    rng = np.random.default_rng(0)
    return ArrayDataset(
        name="toy",
        x_train=rng.random((6, 1, 2, 2), dtype=np.float32),
        y_train=np.arange(6, dtype=np.int64) % 3,
        x_test=np.zeros((0, 1, 2, 2), dtype=np.float32),
        y_test=np.zeros(0, dtype=np.int64),
        num_classes=3,
        standin=True,
        provenance="generated stand-in for toy",
        groups=np.array([0, 0, 1, 1, 2, 2], dtype=np.int64) if groups else None,
    )


@pytest.mark.parametrize("groups", [True, False])
def test_dataset_round_trip(tmp_path, groups):
    ds = _dataset(groups)
    path = tmp_path / "sub" / "toy.npz"
    save_dataset(ds, path)
    back = load_dataset(path)
    assert [p.name for p in path.parent.iterdir()] == ["toy.npz"]  # no temporary file left
    for key in ("x_train", "y_train", "x_test", "y_test"):
        a, b = getattr(ds, key), getattr(back, key)
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    assert (back.name, back.num_classes, back.standin, back.provenance) == (
        "toy",
        3,
        True,
        "generated stand-in for toy",
    )
    assert (back.groups is None) == (not groups)
    if groups:
        assert np.array_equal(back.groups, ds.groups)


def test_truncated_dataset_names_the_file(tmp_path):
    path = tmp_path / "broken.npz"
    save_dataset(_dataset(True), path)
    path.write_bytes(path.read_bytes()[:300])
    with pytest.raises(ValueError, match="broken.npz"):
        load_dataset(path)
    with pytest.raises(FileNotFoundError, match="absent.npz"):
        load_dataset(tmp_path / "absent.npz")


def test_dataset_checks_dtypes():
    ds = _dataset(False)
    with pytest.raises(ValueError, match="float32"):
        ArrayDataset(**{**ds.__dict__, "x_train": ds.x_train.astype(np.float64)})
    with pytest.raises(ValueError, match="int64"):
        ArrayDataset(**{**ds.__dict__, "y_train": ds.y_train.astype(np.int32)})

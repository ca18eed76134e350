"""Dataset transforms: merged pools and the data scripts' standardisations, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from fedbench.data.base import ArrayDataset
from fedbench.data.transform import apply_transform, check_transform


def toy(groups: bool = False) -> ArrayDataset:
    x_train = np.array([[[0.0, 1.0]], [[1.0, 1.0]], [[0.5, 0.0]]], dtype=np.float32)
    x_test = np.array([[[0.5, 0.0]]], dtype=np.float32)
    return ArrayDataset(
        name="toy",
        x_train=x_train,
        y_train=np.array([0, 1, 2], dtype=np.int64),
        x_test=x_test,
        y_test=np.array([1], dtype=np.int64),
        num_classes=3,
        standin=False,
        provenance="toy arrays",
        groups=np.array([0, 0, 1]) if groups else None,
    )


def test_no_transform_is_the_same_dataset():
    ds = toy()
    assert apply_transform(ds, None) is ds and apply_transform(ds, {}) is ds


def test_merged_pool_has_every_image_and_no_global_test_set():
    out = apply_transform(toy(), {"pool": "merged"})
    assert out.x_train.shape == (4, 1, 2) and out.y_train.tolist() == [0, 1, 2, 1]
    assert out.x_test.shape == (0, 1, 2) and len(out.y_test) == 0
    np.testing.assert_array_equal(out.x_train[3], toy().x_test[0])
    assert "pool merged" in out.provenance and out.x_train.dtype == np.float32


def test_global_standardisation_over_every_image_by_hand():
    # The 8 pixel values: 0, 1, 1, 1, 0.5, 0, 0.5, 0 -> mean 0.5, population std 0.433.
    vals = np.array([0, 1, 1, 1, 0.5, 0, 0.5, 0])
    mean, std = vals.mean(), vals.std()
    out = apply_transform(toy(), {"pool": "merged", "standardise": "global"})
    np.testing.assert_allclose(
        out.x_train[1, 0], (np.array([1.0, 1.0]) - mean) / (std + 0.001), rtol=1e-6
    )
    assert mean == 0.5 and abs(std - 0.4330127) < 1e-6


def test_per_pixel_standardisation_by_hand():
    out = apply_transform(toy(), {"standardise": "per_pixel"})
    # First pixel: 0, 1, 0.5 (train), 0.5 (test) -> mean 0.5, std sqrt(0.125).
    first = (np.array([0.0, 1.0, 0.5]) - 0.5) / (np.sqrt(0.125) + 0.001)
    np.testing.assert_allclose(out.x_train[:, 0, 0], first, rtol=1e-6)
    assert out.x_test.shape == (1, 1, 2)  # split pool kept
    # Second pixel: 1, 1, 0, 0 -> mean 0.5, std 0.5.
    np.testing.assert_allclose(out.x_test[0, 0, 1], (0.0 - 0.5) / 0.501, rtol=1e-6)


def test_half_is_torchvision_normalize_half():
    out = apply_transform(toy(), {"standardise": "half"})
    np.testing.assert_allclose(out.x_train[0, 0], [-1.0, 1.0], rtol=1e-6)


@pytest.mark.parametrize(
    "transform, needle",
    [
        ({"pool": "joined"}, "pool"),
        ({"scale": "global"}, "scale"),
        ({"standardise": 1}, "standardise"),
    ],
)
def test_bad_transform_names_dataset_and_key(transform, needle):
    with pytest.raises(ValueError, match=f"dataset toy.*{needle}"):
        check_transform("toy", transform)


def test_merging_a_grouped_dataset_is_refused():
    with pytest.raises(ValueError, match="groups"):
        apply_transform(toy(groups=True), {"pool": "merged"})

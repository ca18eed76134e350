"""The q-FFL Fashion-MNIST protocol's pieces (DQN-Fed's Table 9): the MNIST family's `classes`
and `standardise` parameters, the merged pool's official-test marks, and the `by_label`
partition with `test_split: official`, each by hand on tiny arrays."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from fedbench.data import SOURCES
from fedbench.data.base import ArrayDataset, load_dataset, save_dataset
from fedbench.data.mnist import IDX_FILES, keep_classes, standardise_train_per_pixel
from fedbench.data.partition import by_label, check_partition_spec, make_partition
from fedbench.data.transform import apply_transform


def _idx_folder(tmp_path, encode_idx, train_labels, test_labels):
    """The four IDX files with 28x28 images whose every pixel is 10 x the label (+ the index)."""
    for name, labels in (("train", train_labels), ("t10k", test_labels)):
        labels = np.asarray(labels, dtype=np.uint8)
        images = (10 * labels[:, None, None] + np.arange(len(labels))[:, None, None]) * np.ones(
            (1, 28, 28), dtype=np.uint8
        )
        images = images.astype(np.uint8)
        for kind, arr in (("images-idx3", images), ("labels-idx1", labels)):
            (tmp_path / f"{name}-{kind}-ubyte.gz").write_bytes(gzip.compress(encode_idx(arr)))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(IDX_FILES)
    return tmp_path


def test_keep_classes_relabels_in_the_lists_order():
    x = np.arange(7, dtype=np.float32)[:, None]
    y = np.array([6, 0, 1, 2, 6, 9, 0])
    kx, ky = keep_classes(x, y, [0, 2, 6])
    # the q-FFL script: label 0 -> 0, 2 -> 1 (y - 1), 6 -> 2 (y - 4); others dropped, order kept
    assert kx[:, 0].tolist() == [0, 1, 3, 4, 6] and ky.tolist() == [2, 0, 1, 2, 0]
    assert ky.dtype == np.int64
    assert keep_classes(x, y, [6, 0])[1].tolist() == [0, 1, 0, 1]


@pytest.mark.parametrize("arithmetic", ["release", "exact"])
def test_standardise_train_per_pixel_by_hand(arithmetic):
    # one pixel over 4 training images: 0, 51, 102, 153 on the 0-255 scale -> mean 76.5,
    # population std sqrt(3251.25) (= 255 sqrt(0.05)); the script adds 0.001 on that scale
    x_train = (np.array([0, 51, 102, 153], dtype=np.float32) / np.float32(255)).reshape(4, 1, 1, 1)
    x_test = np.array([1.0], dtype=np.float32).reshape(1, 1, 1, 1)
    train, test = standardise_train_per_pixel(x_train, x_test, arithmetic)
    denom = np.sqrt(3251.25) + 0.001
    np.testing.assert_allclose(
        train.ravel(), (np.array([0, 51, 102, 153]) - 76.5) / denom, rtol=1e-6
    )
    np.testing.assert_allclose(test.ravel(), (255.0 - 76.5) / denom, rtol=1e-6)
    assert train.dtype == np.float32 and test.dtype == np.float32
    assert train.shape == x_train.shape and test.shape == x_test.shape


def test_standardise_arithmetics_differ_where_float32_accumulation_rounds():
    # 60,000 random 0-255 values of two pixels: float32 sums of that many lose low bits that
    # float64 keeps, so the release's statistics are off the exact ones
    rng = np.random.default_rng(3)
    pixels = rng.integers(0, 256, size=(60_000, 1, 1, 2)).astype(np.uint8)
    x = np.divide(pixels, np.float32(255), dtype=np.float32)
    rel, _ = standardise_train_per_pixel(x, x[:1], "release")
    exact, _ = standardise_train_per_pixel(x, x[:1], "exact")
    u = pixels.astype(np.float64)
    want = (u - u.mean(axis=0)) / (u.std(axis=0) + 0.001)
    # exact: float64 statistics, one float32 rounding at the end
    np.testing.assert_allclose(exact, want, rtol=2e-7, atol=1e-7)
    assert not np.array_equal(rel, exact)  # float32 accumulation moves the release's values
    np.testing.assert_allclose(rel, want, rtol=1e-3, atol=1e-3)
    with pytest.raises(ValueError, match="standardise_arithmetic must be one of"):
        standardise_train_per_pixel(x, x, "float32")


def _release_client_arrays(folder):
    """fair_flearn's data/fmnist/create_dataset.py (litian96/fair_flearn f097971), transcribed:
    its load_mnist, generate_dataset and per-class loops, each client's (x, y) as float32 arrays
    (the release writes them to JSON with tolist() and reads them back as float32)."""

    def load_mnist(path, kind):
        with gzip.open(path / f"{kind}-labels-idx1-ubyte.gz", "rb") as lbpath:
            labels = np.frombuffer(lbpath.read(), dtype=np.uint8, offset=8)
        with gzip.open(path / f"{kind}-images-idx3-ubyte.gz", "rb") as imgpath:
            images = np.frombuffer(imgpath.read(), dtype=np.uint8, offset=16).reshape(
                len(labels), 784
            )
        return images, labels

    X_train, y_train = load_mnist(folder, "train")
    X_test, y_test = load_mnist(folder, "t10k")
    mu = np.mean(X_train.astype(np.float32), 0)
    sigma = np.std(X_train.astype(np.float32), 0)
    X_train = (X_train.astype(np.float32) - mu) / (sigma + 0.001)
    X_test = (X_test.astype(np.float32) - mu) / (sigma + 0.001)
    clients = {}
    for label, shift in ((0, 0), (2, 1), (6, 4)):  # users 0:T-shirt(top), 2:pullover, 6:shirt
        tr = [i for i in range(len(y_train)) if y_train[i] == label]
        te = [i for i in range(len(y_test)) if y_test[i] == label]
        clients[label] = (
            np.asarray([X_train[i].tolist() for i in tr], dtype=np.float32),
            np.asarray([int(y_train[i]) - shift for i in tr]),
            np.asarray([X_test[i].tolist() for i in te], dtype=np.float32),
            np.asarray([int(y_test[i]) - shift for i in te]),
        )
    return clients


def test_dqnfed_fmnist_client_arrays_equal_the_releases_bit_for_bit(tmp_path, encode_idx):
    # random 28x28 images of all 10 classes; the q-FFL protocol's catalog entry, loaded,
    # pooled and partitioned as the workflow does, against the release's script on the same files
    rng = np.random.default_rng(7)
    for name, n in (("train", 600), ("t10k", 150)):
        labels = rng.integers(0, 10, size=n).astype(np.uint8)
        images = rng.integers(0, 256, size=(n, 28, 28)).astype(np.uint8)
        images[:, :3] = 0  # blank border rows, as Fashion-MNIST's: sigma = 0 there
        for kind, arr in (("images-idx3", images), ("labels-idx1", labels)):
            (tmp_path / f"{name}-{kind}-ubyte.gz").write_bytes(gzip.compress(encode_idx(arr)))
    release = _release_client_arrays(tmp_path)

    from fedbench.config import load_catalog

    entry = load_catalog("config/config.yaml")["datasets"]["dqnfed-fmnist"]
    assert entry["params"]["standardise_arithmetic"] == "release"
    ds = SOURCES["fashion_mnist"].load(tmp_path, **entry["params"])
    pool = apply_transform(ds, entry["transform"])
    part = make_partition(
        pool.y_train,
        None,
        {"kind": "by_label", "test_split": "official"},
        np.random.default_rng(0),
        pool.num_classes,
        pool.official_test,
    )
    for k, label in enumerate((0, 2, 6)):
        rx, ry, rtx, rty = release[label]
        got_x, got_tx = pool.x_train[part.train[k]], pool.x_train[part.test[k]]
        assert got_x.dtype == np.float32 and len(got_x) == len(rx) > 0
        # bit for bit: the same float32 words, not merely close values
        assert np.array_equal(got_x.reshape(len(rx), 784).view(np.uint32), rx.view(np.uint32))
        assert np.array_equal(got_tx.reshape(len(rtx), 784).view(np.uint32), rtx.view(np.uint32))
        assert pool.y_train[part.train[k]].tolist() == ry.tolist()
        assert pool.y_train[part.test[k]].tolist() == rty.tolist()
    exact = SOURCES["fashion_mnist"].load(
        tmp_path, **{**entry["params"], "standardise_arithmetic": "exact"}
    )
    assert "float64" in exact.provenance and "float32 arithmetic" in ds.provenance
    np.testing.assert_allclose(exact.x_train, ds.x_train, rtol=1e-5, atol=1e-5)


def test_fashion_mnist_classes_and_standardise_on_idx_files(tmp_path, encode_idx):
    folder = _idx_folder(tmp_path, encode_idx, [0, 1, 2, 6, 2, 0], [6, 0, 3, 2])
    src = SOURCES["fashion_mnist"]
    ds = src.load(folder, classes=[0, 2, 6], standardise="train_per_pixel")
    assert ds.num_classes == 3 and ds.y_train.tolist() == [0, 1, 2, 1, 0]
    assert ds.y_test.tolist() == [2, 0, 1]
    # statistics over ALL six training images (label 1 included), before the classes are kept
    raw = (10 * np.array([0, 1, 2, 6, 2, 0]) + np.arange(6)) / 255.0
    mean, std = raw.mean(), raw.std()
    np.testing.assert_allclose(
        ds.x_train[:, 0, 0, 0], (raw[[0, 2, 3, 4, 5]] - mean) / (std + 0.001 / 255), rtol=1e-5
    )
    test_raw = (10 * np.array([6, 0, 2]) + np.array([0, 1, 3])) / 255.0
    np.testing.assert_allclose(
        ds.x_test[:, 0, 13, 13], (test_raw - mean) / (std + 0.001 / 255), rtol=1e-5
    )
    assert "classes [0, 2, 6]" in ds.provenance and "standardised per pixel" in ds.provenance
    plain = src.load(folder)  # the defaults leave the dataset as it was
    assert plain.num_classes == 10 and len(plain.y_train) == 6 and plain.x_train.max() <= 1.0


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"classes": [0, 0]}, "classes must be null"),
        ({"classes": [10]}, r"labels in \[0, 10\)"),
        ({"classes": []}, "non-empty list"),
        ({"classes": 2}, "e.g. \\[0, 2, 6\\]"),
        (
            {"standardise": "per_pixel"},
            "standardise must be one of \\['none', 'train_per_pixel'\\]",
        ),
        (
            {"standardise_arithmetic": "float64"},
            "standardise_arithmetic must be one of \\['release', 'exact'\\]",
        ),
    ],
)
def test_bad_source_options_name_the_key(params, match):
    with pytest.raises(ValueError, match=match):
        SOURCES["fashion_mnist"].check_params(params)


def test_standin_keeps_the_classes_and_is_standardised():
    src = SOURCES["fashion_mnist"]
    rng = np.random.default_rng(0)
    ds = src.standin(rng, n_train=300, n_test=100, classes=[0, 2, 6], standardise="train_per_pixel")
    assert ds.standin and ds.num_classes == 3
    # 400 balanced stand-in images of 10 classes: 40 of each, 3 classes kept
    assert set(ds.y_train.tolist()) == {0, 1, 2} and len(ds.y_train) + len(ds.y_test) == 120
    assert ds.x_train.shape[1:] == (1, 28, 28) and ds.x_train.dtype == np.float32
    assert abs(float(ds.x_train.mean())) < 0.5  # centred by the 10-class stand-in's own means


def _toy(n_train=6, n_test=3) -> ArrayDataset:
    return ArrayDataset(
        name="toy",
        x_train=np.arange(n_train, dtype=np.float32)[:, None],
        y_train=np.arange(n_train, dtype=np.int64) % 3,
        x_test=np.arange(n_test, dtype=np.float32)[:, None] + 100,
        y_test=np.arange(n_test, dtype=np.int64) % 3,
        num_classes=3,
        standin=False,
        provenance="toy",
    )


def test_merged_pool_marks_the_official_test_rows(tmp_path):
    out = apply_transform(_toy(), {"pool": "merged"})
    assert out.official_test.tolist() == [False] * 6 + [True] * 3
    save_dataset(out, tmp_path / "d.npz")
    back = load_dataset(tmp_path / "d.npz")
    assert back.official_test.tolist() == out.official_test.tolist()
    assert _toy().official_test is None and apply_transform(_toy(), None).official_test is None
    with pytest.raises(ValueError, match="official_test must be bool"):
        ArrayDataset(**{**_toy().__dict__, "official_test": np.zeros(6, dtype=np.int64)})


def test_by_label_one_client_per_label():
    labels = np.array([2, 0, 1, 2, 0, 0])
    clients = by_label(labels)
    assert [c.tolist() for c in clients] == [[1, 4, 5], [2], [0, 3]]
    with pytest.raises(ValueError, match="non-empty"):
        by_label(np.array([], dtype=np.int64))


def test_official_test_split_is_each_clients_official_test_rows():
    ds = apply_transform(_toy(9, 6), {"pool": "merged"})
    spec = {"kind": "by_label", "test_split": "official"}
    p = make_partition(ds.y_train, None, spec, np.random.default_rng(0), 3, ds.official_test)
    # pool rows 0-8 train (labels 0,1,2,...), rows 9-14 official test (labels 0,1,2,0,1,2)
    assert [t.tolist() for t in p.train] == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]
    assert [t.tolist() for t in p.test] == [[9, 12], [10, 13], [11, 14]]
    assert p.meta["test_split"] == "official" and p.meta["labels"] == [0, 1, 2]
    again = make_partition(ds.y_train, None, spec, np.random.default_rng(5), 3, ds.official_test)
    assert all(np.array_equal(a, b) for a, b in zip(p.test, again.test, strict=True))


def test_official_test_split_needs_the_marks_and_no_fraction():
    labels = np.arange(9) % 3
    spec = {"kind": "by_label", "test_split": "official"}
    with pytest.raises(ValueError, match="transform: \\{pool: merged\\}"):
        make_partition(labels, None, spec, np.random.default_rng(0), 3)
    with pytest.raises(ValueError, match="drop test_fraction"):
        check_partition_spec({**spec, "test_fraction": 0.2})
    with pytest.raises(ValueError, match="unknown key"):
        check_partition_spec({"kind": "by_label", "num_clients": 3})


def test_by_label_with_a_random_validation_split():
    labels = np.arange(40) % 4
    spec = {"kind": "by_label", "test_fraction": 0.25}
    p = make_partition(labels, None, spec, np.random.default_rng(0), 4)
    assert [len(t) for t in p.train] == [8] * 4 and [len(t) for t in p.test] == [2] * 4
    for k, (tr, te) in enumerate(zip(p.train, p.test, strict=True)):
        assert set(labels[tr]) == {k} and set(labels[te]) == {k}
        assert not set(tr) & set(te)

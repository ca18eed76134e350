"""MedMNIST+ sources (DermaMNIST, OrganCMNIST) through the medmnist package, on medmnist-layout
.npz files a test writes where the package looks for them.

No test touches the network: urllib and sockets are made to fail (a download the package tries
is recorded and refused), and the package's MD5 is pointed at the test's file where a test
fetches one.
"""

from __future__ import annotations

import hashlib
import socket
import urllib.error
import urllib.request
from pathlib import Path

import medmnist
import numpy as np
import pytest

import fedbench.data.medmnist as mm
from fedbench.data import SOURCES, prepare_dataset
from fedbench.data.base import manifest_verifies
from fedbench.data.fetch import FetchError

SUBSETS = {"dermamnist": (3, 7), "organcmnist": (1, 11)}  # name -> (channels, classes)


def write_npz(folder: Path, name: str, size: int, n: dict[str, int], seed: int = 0) -> Path:
    """A .npz as the package ships it: uint8 (N, H, W[, 3]) images and uint8 (N, 1) labels per
    split (train, val, test), named `{flag}.npz` at 28 px and `{flag}_{size}.npz` otherwise."""
    channels, classes = SUBSETS[name]
    rng = np.random.default_rng(seed)
    per_image = (size, size) if channels == 1 else (size, size, channels)
    arrays = {}
    for split, count in n.items():
        arrays[f"{split}_images"] = rng.integers(0, 256, (count, *per_image), dtype=np.uint8)
        arrays[f"{split}_labels"] = (np.arange(count) % classes).astype(np.uint8)[:, None]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / mm.npz_name(name, size)
    np.savez_compressed(path, **arrays)
    return path


@pytest.fixture
def offline(monkeypatch):
    """No network: every URL urllib is asked for (the package downloads through torchvision's
    download_url, which uses urllib) is recorded and refused; sockets refuse to connect.
    Returns the record."""
    tried = []

    def urlopen(req, *args, **kwargs):
        tried.append(getattr(req, "full_url", req))
        raise urllib.error.URLError("network is unreachable (test)")

    def refuse(*args, **kwargs):
        raise AssertionError("a MedMNIST source tried to open a connection")

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    return tried


@pytest.mark.parametrize("name", list(SUBSETS))
def test_load_reads_train_and_test_as_float_nchw(tmp_path, offline, name):
    channels, classes = SUBSETS[name]
    path = write_npz(tmp_path, name, 64, {"train": 9, "val": 4, "test": 5})
    ds = SOURCES[name].load(tmp_path)
    assert ds.x_train.shape == (9, channels, 64, 64) and ds.x_test.shape == (5, channels, 64, 64)
    assert ds.x_train.dtype == np.float32 and ds.x_train.flags.c_contiguous
    assert ds.y_train.dtype == np.int64 and ds.y_train.shape == (9,)
    assert ds.y_train.tolist() == [i % classes for i in range(9)]
    assert ds.num_classes == classes and not ds.standin
    with np.load(path) as npz:  # pixel (i, h, w, c) / 255 lands at (i, c, h, w); val unused
        images = npz["test_images"]
    images = images[..., None] if channels == 1 else images
    assert np.array_equal(ds.x_test, images.transpose(0, 3, 1, 2) / np.float32(255.0))
    assert 0.0 <= ds.x_train.min() and ds.x_train.max() <= 1.0
    assert "native 64x64" in ds.provenance and "9 train / 5 test" in ds.provenance


def test_sizes_follow_the_package_naming(tmp_path, offline):
    write_npz(tmp_path, "organcmnist", 28, {"train": 3, "val": 1, "test": 2})
    ds = SOURCES["organcmnist"].load(tmp_path, size=28)  # organcmnist.npz: no suffix at 28
    assert ds.x_train.shape == (3, 1, 28, 28)
    write_npz(tmp_path, "dermamnist", 128, {"train": 2, "val": 1, "test": 1})
    assert SOURCES["dermamnist"].load(tmp_path, size=128).x_test.shape == (1, 3, 128, 128)
    assert [f.filename for f in SOURCES["dermamnist"].files] == ["dermamnist_64.npz"]


def test_missing_file_names_it_its_folder_and_the_fix(tmp_path, offline):
    raw = tmp_path / "resources" / "raw" / "dermamnist"
    raw.mkdir(parents=True)
    with pytest.raises(FileNotFoundError) as err:
        SOURCES["dermamnist"].load(raw)
    msg = str(err.value)
    assert msg.startswith("dermamnist: medmnist.DermaMNIST found no data in " + str(raw))
    assert f"{raw / 'dermamnist_64.npz'}  <-  {medmnist.INFO['dermamnist']['url_64']}" in msg
    assert medmnist.INFO["dermamnist"]["MD5_64"] in msg
    assert f"SOURCES['dermamnist'].fetch('{raw}', size=64)" in msg  # the fetch step
    with pytest.raises(FileNotFoundError, match=r"organcmnist\.npz  <-  .*organcmnist\.npz"):
        SOURCES["organcmnist"].load(raw, size=28)
    assert offline == [] and list(raw.iterdir()) == []  # loading never downloads


def test_offline_fetch_names_the_dataset_folder_and_file(tmp_path, offline):
    raw = tmp_path / "raw"
    with pytest.raises(FetchError) as err:
        SOURCES["organcmnist"].fetch(raw, timeout=1)
    msg = str(err.value)
    assert "organcmnist: medmnist.OrganCMNIST could not download in " + str(raw) in msg
    assert str(raw / "organcmnist_64.npz") in msg and "zenodo.org" in msg
    assert offline == [medmnist.INFO["organcmnist"]["url_64"]]
    assert not (raw / "MANIFEST.json").exists()


@pytest.mark.parametrize("bad", [32, 64.0, "64", True, None])
def test_bad_size_names_the_key_and_valid_values(tmp_path, bad):
    needle = r"dermamnist: size must be one of \[28, 64, 128, 224\]"
    with pytest.raises(ValueError, match=needle):
        SOURCES["dermamnist"].check_params({"size": bad})
    with pytest.raises(ValueError, match=needle):
        SOURCES["dermamnist"].load(tmp_path, size=bad)
    with pytest.raises(ValueError, match="flag.*valid.*size"):
        SOURCES["dermamnist"].check_params({"flag": "dermamnist"})


def test_malformed_files_are_refused(tmp_path, offline):
    path = write_npz(tmp_path, "dermamnist", 64, {"train": 2, "test": 1})
    with np.load(path) as npz:
        arrays = dict(npz)
    np.savez(path, **{k: v for k, v in arrays.items() if k != "test_labels"})
    with pytest.raises(ValueError, match="test_labels"):
        SOURCES["dermamnist"].load(tmp_path)
    np.savez(path, **{**arrays, "train_images": arrays["train_images"][..., 0]})  # grey
    with pytest.raises(ValueError, match=r"train_images: expected uint8 images .*64, 64, 3"):
        SOURCES["dermamnist"].load(tmp_path)
    np.savez(path, **{**arrays, "train_labels": np.array([[0], [7]], dtype=np.uint8)})
    with pytest.raises(ValueError, match=r"labels outside \[0, 7\)"):
        SOURCES["dermamnist"].load(tmp_path)
    path.write_bytes(b"<html>not an npz</html>")
    with pytest.raises(ValueError, match="dermamnist_64.npz"):
        SOURCES["dermamnist"].load(tmp_path)


@pytest.mark.parametrize("name", list(SUBSETS))
def test_standins_are_shape_faithful(offline, name):
    channels, classes = SUBSETS[name]
    ds = prepare_dataset(
        name, {"n_train": 60, "n_test": 20}, None, "standin", np.random.default_rng(0)
    )
    assert ds.standin and f"generated stand-in for {name}" in ds.provenance
    assert ds.x_train.shape == (60, channels, 64, 64) and ds.x_test.shape == (20, channels, 64, 64)
    assert ds.num_classes == classes and sorted(np.unique(ds.y_train)) == list(range(classes))
    small = SOURCES[name].standin(np.random.default_rng(0), n_train=10, n_test=2, size=28)
    assert small.x_train.shape == (10, channels, 28, 28)


def test_standin_defaults_to_the_official_split_sizes(monkeypatch):
    seen = []
    monkeypatch.setattr(
        mm,
        "image_standin",
        lambda src, rng, shape, k, a, b, p: seen.append((src.name, shape, k, a, b)),
    )
    for name in SUBSETS:
        SOURCES[name].standin(np.random.default_rng(0))
    assert seen == [
        ("dermamnist", (3, 64, 64), 7, 7007, 2005),
        ("organcmnist", (1, 64, 64), 11, 12975, 8216),
    ]


def test_fetch_keeps_a_copy_with_the_packages_md5(tmp_path, offline, monkeypatch):
    src, raw = SOURCES["dermamnist"], tmp_path / "raw"
    good = write_npz(raw, "dermamnist", 64, {"train": 4, "val": 1, "test": 2}).read_bytes()
    small = write_npz(raw, "dermamnist", 28, {"train": 3, "val": 1, "test": 1}).read_bytes()
    info = medmnist.INFO["dermamnist"]
    monkeypatch.setitem(info, "MD5_64", hashlib.md5(good).hexdigest())
    monkeypatch.setitem(info, "MD5", hashlib.md5(small).hexdigest())
    manifest = src.fetch(raw, timeout=1)  # the workflow's fetch rule: no params, size 64
    assert list(manifest) == ["dermamnist_64.npz"] and offline == []
    assert manifest["dermamnist_64.npz"]["origin"] == f"already present in {raw}"
    assert "medmnist" in manifest["dermamnist_64.npz"]["verified_by"]
    assert manifest_verifies(raw, src.files) and src.present(raw)
    ds = prepare_dataset("dermamnist", {}, raw, "real", np.random.default_rng(0))
    assert ds.x_train.shape == (4, 3, 64, 64)
    assert list(src.fetch(raw, timeout=1, size=28)) == ["dermamnist.npz"]
    assert src.load(raw, size=28).x_train.shape == (3, 3, 28, 28)
    # A copy whose MD5 differs is downloaded again by the package: here, refused and named.
    monkeypatch.setitem(info, "MD5_64", "0" * 32)
    with pytest.raises(FetchError, match="dermamnist_64.npz"):
        src.fetch(raw, timeout=1)
    assert offline == [info["url_64"]]


def test_split_sizes_and_classes_match_the_package():
    for name, (channels, classes) in SUBSETS.items():
        src, entry = SOURCES[name], medmnist.INFO[name]
        assert (src.flag, src.python_class) == (name, entry["python_class"])
        assert (src.channels, src.num_classes) == (channels, classes)
        assert (entry["n_channels"], len(entry["label"])) == (channels, classes)
        assert src.n_samples == entry["n_samples"]
        assert src.fetch_route() == f"medmnist.{entry['python_class']}(size=64, download=True)"

"""MedMNIST+ sources (DermaMNIST, OrganCMNIST) on medmnist-layout .npz files a test writes.

No test touches the network: loading runs with urllib and sockets made to fail and the medmnist
package made unimportable; fetching runs against a server on 127.0.0.1.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import socket
import sys
import urllib.request
from pathlib import Path

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
    """Fail any attempt to reach the network or to use the medmnist package."""

    def refuse(*args, **kwargs):
        raise AssertionError("a MedMNIST source tried to reach the network")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setitem(sys.modules, "medmnist", None)  # `import medmnist` raises ImportError


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
    with pytest.raises(FileNotFoundError) as err:
        SOURCES["dermamnist"].load(raw)
    msg = str(err.value)
    assert "dermamnist_64.npz" in msg and str(raw) in msg and "never downloads" in msg
    assert f"SOURCES['dermamnist'].fetch({str(raw)!r}, size=64)" in msg  # the fetch step
    assert "medmnist.DermaMNIST(split='train', size=64" in msg and "download=True" in msg
    assert "b70a2f5635c6199aeaa28c31d7202e1f" in msg and "zenodo.org" in msg
    with pytest.raises(FileNotFoundError, match=r"organcmnist\.npz .* 28 px"):
        SOURCES["organcmnist"].load(raw, size=28)
    assert not raw.exists()  # nothing was created, let alone downloaded


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


def test_fetch_gets_the_requested_size_verified(http_root, tmp_path, monkeypatch):
    base, root = http_root
    src = SOURCES["dermamnist"]
    good = write_npz(root, "dermamnist", 64, {"train": 4, "val": 1, "test": 2}).read_bytes()
    small = write_npz(root, "dermamnist", 28, {"train": 3, "val": 1, "test": 1}).read_bytes()
    md5 = {64: hashlib.md5(good).hexdigest(), 28: hashlib.md5(small).hexdigest()}
    monkeypatch.setattr(src, "mirrors", (base + "missing/", base))
    monkeypatch.setattr(src, "md5", md5)
    raw = tmp_path / "raw"
    manifest = src.fetch(raw, timeout=2)  # the workflow's fetch rule: no params, size 64
    assert list(manifest) == ["dermamnist_64.npz"]
    assert manifest["dermamnist_64.npz"]["origin"] == base + "dermamnist_64.npz?download=1"
    assert manifest["dermamnist_64.npz"]["verified_by"] == "archive"
    assert manifest_verifies(raw, src.files)
    ds = prepare_dataset("dermamnist", {}, raw, "real", np.random.default_rng(0))
    assert ds.x_train.shape == (4, 3, 64, 64)
    assert list(src.fetch(raw, timeout=2, size=28)) == ["dermamnist.npz"]
    assert src.load(raw, size=28).x_train.shape == (3, 3, 28, 28)
    monkeypatch.setattr(src, "md5", {**md5, 64: "0" * 32})  # a corrupted download is rejected
    with pytest.raises(FetchError, match="checksum mismatch"):
        src.fetch(tmp_path / "raw2", timeout=2)
    assert list((tmp_path / "raw2").iterdir()) == []


def _package_source(name: str) -> str | None:
    spec = importlib.util.find_spec("medmnist")  # found, not imported (no ~/.medmnist made)
    if spec is None or spec.origin is None:
        return None
    return (Path(spec.origin).parent / name).read_text()


@pytest.mark.skipif(_package_source("info.py") is None, reason="medmnist is not installed")
def test_pinned_metadata_matches_the_installed_package():
    # INFO is a literal dict in medmnist/info.py: read it without running the package.
    tree = ast.parse(_package_source("info.py"))
    (info,) = [
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "INFO"
    ]
    for name, (channels, classes) in SUBSETS.items():
        src, entry = SOURCES[name], info[name]
        assert (src.flag, src.python_class) == (name, entry["python_class"])
        assert (src.channels, src.num_classes) == (channels, classes)
        assert (entry["n_channels"], len(entry["label"])) == (channels, classes)
        assert src.n_samples == entry["n_samples"]
        for size in mm.SIZES:
            flag = "" if size == 28 else f"_{size}"
            rf = src.remote_file(size)
            assert rf.md5 == entry[f"MD5{flag}"] and rf.urls == (entry[f"url{flag}"],)
    # The package's own loader: file `{flag}{size_flag}.npz`, keys `{split}_images`/`_labels`.
    loader = _package_source("dataset.py")
    assert 'f"{self.flag}{self.size_flag}.npz"' in loader
    assert 'npz_file[f"{self.split}_images"]' in loader
    assert 'npz_file[f"{self.split}_labels"]' in loader

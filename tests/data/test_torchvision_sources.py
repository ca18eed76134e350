"""MNIST, Fashion-MNIST, CIFAR-10 and CIFAR-100 through torchvision.datasets, on tiny files a
test writes in torchvision's own on-disk layout (IDX .gz archives in {root}/MNIST/raw/, the CIFAR
python tarball with its pickled batches).

No test touches the network: every URL urllib is asked for (torchvision downloads with urllib) is
recorded and refused, sockets refuse to connect, and torchvision's MD5s are pointed at the test's
files where a test lets torchvision verify them.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import pickle
import socket
import tarfile
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import torchvision.datasets as tvd

import fedbench.data.mnist as mn
from fedbench.data import SOURCES, prepare_dataset
from fedbench.data.base import manifest_verifies
from fedbench.data.fetch import FetchError

GREY = {"mnist": tvd.MNIST, "fashion_mnist": tvd.FashionMNIST}


def _md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


@pytest.fixture
def offline(monkeypatch):
    """Record and refuse every URL urllib is asked for; sockets refuse to connect."""
    tried = []

    def urlopen(req, *args, **kwargs):
        tried.append(getattr(req, "full_url", req))
        raise urllib.error.URLError("network is unreachable (test)")

    def refuse(*args, **kwargs):
        raise AssertionError("a torchvision source tried to open a connection")

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    return tried


def _trust(monkeypatch, cls, contents: dict[str, bytes]) -> None:
    """Point torchvision's MD5 list of an MNIST-type class at the test's archives."""
    monkeypatch.setattr(cls, "resources", [(n, _md5(contents[n])) for n in mn.IDX_FILES])


@pytest.mark.parametrize("name", list(GREY))
def test_fetch_verifies_and_unpacks_archives_placed_in_torchvisions_layout(
    tmp_path, offline, monkeypatch, fake_idx_set, name
):
    src, cls, raw = SOURCES[name], GREY[name], tmp_path / "raw"
    contents = fake_idx_set(raw / cls.__name__ / "raw")
    _trust(monkeypatch, cls, contents)
    manifest = src.fetch(raw, timeout=1)
    assert offline == []  # the archives' MD5 matched: nothing was downloaded
    assert sorted(manifest) == sorted(f"{cls.__name__}/raw/{n[:-3]}" for n in mn.IDX_FILES)
    assert all("torchvision" in e["verified_by"] for e in manifest.values())
    assert manifest_verifies(raw, src.files) and src.present(raw)
    ds = prepare_dataset(name, {}, raw, "real", np.random.default_rng(0))
    assert ds.x_train.shape == (12, 1, 28, 28) and ds.x_test.shape == (5, 1, 28, 28)
    assert ds.y_train.tolist() == [i % 10 for i in range(12)] and ds.y_train.dtype == np.int64
    images = np.frombuffer(gzip.decompress(contents[mn.IDX_FILES[0]])[16:], np.uint8)
    assert np.array_equal(ds.x_train, (images.reshape(12, 1, 28, 28) / np.float32(255.0)))
    assert ds.x_train.dtype == np.float32 and not ds.standin
    assert ds.provenance == f"{name}: torchvision.datasets.{cls.__name__} in {raw}"


def test_archive_with_the_wrong_md5_is_downloaded_again_and_named(
    tmp_path, offline, monkeypatch, fake_idx_set
):
    raw = tmp_path / "raw"
    contents = fake_idx_set(raw / "MNIST" / "raw")
    _trust(monkeypatch, tvd.MNIST, {**contents, mn.IDX_FILES[1]: b"the real file"})
    with pytest.raises(FetchError) as err:
        SOURCES["mnist"].fetch(raw, timeout=1)
    assert [u.rsplit("/", 1)[1] for u in offline] == [mn.IDX_FILES[1]] * 2  # both mirrors
    assert str(raw / "MNIST" / "raw" / mn.IDX_FILES[1]) in str(err.value)


@pytest.mark.parametrize("name", list(GREY))
def test_offline_with_no_files_names_dataset_folder_and_files(tmp_path, offline, monkeypatch, name):
    src, tv_class, raw = SOURCES[name], GREY[name].__name__, tmp_path / "raw"
    if name == "fashion_mnist":  # without the Debian package
        monkeypatch.setattr(src, "system_dir", tmp_path / "no-package")
    with pytest.raises(FetchError) as err:
        src.fetch(raw, timeout=1)
    msg = str(err.value)
    assert msg.startswith(f"{name}: torchvision.datasets.{tv_class} could not download in {raw}")
    for archive in mn.IDX_FILES:
        assert f"{raw / tv_class / 'raw' / archive}  <-  {src.mirror}{archive}" in msg
    assert f"SOURCES['{name}'].fetch('{raw}')" in msg
    assert offline and all(u.startswith(tuple(GREY[name].mirrors)) for u in offline)
    assert not (raw / "MANIFEST.json").exists()
    with pytest.raises(FileNotFoundError, match=f"{tv_class} found no data in"):
        src.load(tmp_path / "empty")


def test_flat_archives_and_unpacked_files_are_read_without_fetching(tmp_path, fake_idx_set):
    flat = tmp_path / "flat"  # fedbench's layout before torchvision: the four .gz in raw_dir
    contents = fake_idx_set(flat)
    manifest = {
        n: {"bytes": len(b), "sha256": hashlib.sha256(b).hexdigest()} for n, b in contents.items()
    }
    (flat / "MANIFEST.json").write_text(json.dumps(manifest))  # as the earlier fetch wrote it
    assert "SHA-256 checked against" in SOURCES["mnist"].place_local(flat)
    ds = SOURCES["mnist"].load(flat)
    assert (flat / "MNIST" / "raw" / "t10k-labels-idx1-ubyte").is_file()
    assert ds.y_test.tolist() == [0, 1, 2, 3, 4]
    unpacked = tmp_path / "unpacked" / "FashionMNIST" / "raw"  # torchvision's unpacked files
    unpacked.mkdir(parents=True)
    for archive in (flat / "MNIST" / "raw").iterdir():
        (unpacked / archive.name).write_bytes(archive.read_bytes())
    again = SOURCES["fashion_mnist"].load(tmp_path / "unpacked")
    assert np.array_equal(again.x_train, ds.x_train) and again.name == "fashion_mnist"


def test_debian_copy_is_checked_against_dpkg_and_unpacked(
    tmp_path, offline, monkeypatch, fake_idx_set
):
    src = SOURCES["fashion_mnist"]
    system = tmp_path / "usr" / "share" / "datasets" / "fashion-mnist"
    contents = fake_idx_set(system)  # gzip mtime 0: not the MD5s torchvision lists
    md5sums = tmp_path / "dataset-fashion-mnist.md5sums"
    md5sums.write_text(
        "".join(f"{_md5(contents[n])}  {system.relative_to('/')}/{n}\n" for n in mn.IDX_FILES)
    )
    monkeypatch.setattr(src, "system_dir", system)
    monkeypatch.setattr(src, "dpkg_md5sums", md5sums)
    assert src.available_offline() and "Debian package" in src.fetch_route()
    manifest = src.fetch(tmp_path / "raw", timeout=1)
    assert offline == []
    assert all(
        e["origin"] == f"unpacked from {system} (MD5 checked against {md5sums})"
        for e in manifest.values()
    )
    assert src.load(tmp_path / "raw").y_train.tolist() == [i % 10 for i in range(12)]
    md5sums.write_text(md5sums.read_text().replace(_md5(contents[mn.IDX_FILES[0]]), "0" * 32))
    with pytest.raises(FetchError, match=f"{mn.IDX_FILES[0]} has md5 .* lists 0000"):
        src.fetch(tmp_path / "raw2", timeout=1)
    assert not (tmp_path / "raw2" / "FashionMNIST" / "raw" / "t10k-labels-idx1-ubyte").exists()
    md5sums.unlink()
    manifest = src.fetch(tmp_path / "raw3", timeout=1)
    assert all(
        e["origin"].endswith(
            "(not checked: torchvision checks archives only when it downloads them)"
        )
        for e in manifest.values()
    )


@pytest.mark.skipif(
    not SOURCES["fashion_mnist"].available_offline(),
    reason="/usr/share/datasets/fashion-mnist absent (apt-get install dataset-fashion-mnist)",
)
def test_fashion_mnist_debian_package_reads_through_torchvision(tmp_path, offline):
    src = SOURCES["fashion_mnist"]
    src.place_local(tmp_path)  # the labels alone would do, but the layout wants all four
    labels = tvd.FashionMNIST(str(tmp_path), train=False).targets.numpy()
    assert np.bincount(labels).tolist() == [1000] * 10 and offline == []


def _cifar_tarball(path: Path, folder: str, batches: dict[str, int], keys: tuple[str, ...]):
    """A CIFAR python tarball as torchvision reads it (str keys, as the Python 2 pickles
    unpickle with encoding latin1); returns each member's MD5."""
    rng = np.random.default_rng(0)
    md5 = {}
    with tarfile.open(path, "w:gz") as tar:
        for name, n in batches.items():
            batch = {"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8)}
            batch.update({k: [(i * (j + 3)) % 20 for i in range(n)] for j, k in enumerate(keys)})
            if n == 0:  # the meta file
                batch = {"label_names": ["a"], "fine_label_names": ["a"]}
            data = pickle.dumps(batch, protocol=2)
            md5[name] = _md5(data)
            info = tarfile.TarInfo(f"{folder}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return md5


def _trust_cifar(monkeypatch, cls, tarball: Path, md5: dict[str, str]) -> None:
    monkeypatch.setattr(cls, "tgz_md5", _md5(tarball.read_bytes()))
    monkeypatch.setattr(cls, "train_list", [[n, md5[n]] for n, _ in cls.train_list])
    monkeypatch.setattr(cls, "test_list", [[n, md5[n]] for n, _ in cls.test_list])
    monkeypatch.setattr(cls, "meta", {**cls.meta, "md5": md5[cls.meta["filename"]]})


def test_cifar10_fetch_load_and_resize(tmp_path, offline, monkeypatch):
    raw = tmp_path / "raw"
    raw.mkdir()
    batches = {f"data_batch_{i}": 3 for i in range(1, 6)} | {"test_batch": 2, "batches.meta": 0}
    tarball = raw / "cifar-10-python.tar.gz"  # where the by-hand step places it
    md5 = _cifar_tarball(tarball, "cifar-10-batches-py", batches, ("labels",))
    _trust_cifar(monkeypatch, tvd.CIFAR10, tarball, md5)
    src = SOURCES["cifar10"]
    assert src.manual_files(raw)[0] == (tarball, tvd.CIFAR10.url)
    manifest = src.fetch(raw, timeout=1)
    assert offline == [] and len(manifest) == 7 and manifest_verifies(raw, src.files)
    ds = prepare_dataset("cifar10", {}, raw, "real", np.random.default_rng(0))
    assert ds.x_train.shape == (15, 3, 32, 32) and ds.x_test.shape == (2, 3, 32, 32)
    assert ds.x_train.dtype == np.float32 and ds.x_train.flags.c_contiguous
    with tarfile.open(tarball) as tar:  # row-major CHW bytes / 255, as CIFAR stores them
        first = pickle.load(tar.extractfile("cifar-10-batches-py/data_batch_1"))["data"]
    assert np.array_equal(ds.x_train[:3], first.reshape(3, 3, 32, 32) / np.float32(255.0))
    assert ds.y_train[:3].tolist() == [0, 3, 6] and ds.num_classes == 10
    small = src.load(raw, resize=28)
    assert small.x_train.shape == (15, 3, 28, 28) and "resize" in small.provenance
    # torchvision checks each batch's MD5 on every read: a damaged batch is refused, named.
    (raw / "cifar-10-batches-py" / "test_batch").write_bytes(b"damaged")
    with pytest.raises(FileNotFoundError, match="cifar10: torchvision.datasets.CIFAR10 found no"):
        src.load(raw)


def test_cifar100_fine_and_coarse(tmp_path, offline, monkeypatch):
    raw = tmp_path / "raw"
    raw.mkdir()
    tarball = raw / "cifar-100-python.tar.gz"
    md5 = _cifar_tarball(
        tarball,
        "cifar-100-python",
        {"train": 4, "test": 2, "meta": 0},
        ("fine_labels", "coarse_labels"),
    )
    _trust_cifar(monkeypatch, tvd.CIFAR100, tarball, md5)
    src = SOURCES["cifar100"]
    src.fetch(raw, timeout=1)
    fine, coarse = src.load(raw), src.load(raw, label="coarse")
    assert fine.num_classes == 100 and coarse.num_classes == 20
    assert fine.y_train.tolist() == [0, 3, 6, 9] and coarse.y_train.tolist() == [0, 4, 8, 12]
    assert np.array_equal(fine.x_train, coarse.x_train) and coarse.y_train.dtype == np.int64
    with pytest.raises(ValueError, match="label must be"):
        src.load(raw, label="medium")


def test_cifar_offline_with_no_files_names_the_tarball(tmp_path, offline):
    raw = tmp_path / "raw"
    with pytest.raises(FetchError) as err:
        SOURCES["cifar100"].fetch(raw, timeout=1)
    msg = str(err.value)
    assert msg.startswith(f"cifar100: torchvision.datasets.CIFAR100 could not download in {raw}")
    assert f"{raw / 'cifar-100-python.tar.gz'}  <-  {tvd.CIFAR100.url}" in msg
    assert offline  # tried (and refused), once


def test_names_and_urls_are_torchvisions():
    assert list(mn.IDX_FILES) == [n for n, _ in tvd.MNIST.resources]
    assert [n for n, _ in tvd.FashionMNIST.resources] == list(mn.IDX_FILES)
    for name, cls in GREY.items():
        assert SOURCES[name].mirror == cls.mirrors[0] and SOURCES[name].tv_class == cls.__name__
    for name, cls in (("cifar10", tvd.CIFAR10), ("cifar100", tvd.CIFAR100)):
        src = SOURCES[name]
        assert src.archives == ((cls.filename, cls.url),) and src.folder == cls.base_folder
        names = [n for n, _ in cls.train_list + cls.test_list] + [cls.meta["filename"]]
        assert [f.filename for f in src.files] == [f"{cls.base_folder}/{n}" for n in names]
        assert src.fetch_route() == f"torchvision.datasets.{cls.__name__}(download=True)"
        assert not src.needs_manual_step()

"""Download and verification against a local HTTP server: no test touches the network."""

from __future__ import annotations

import hashlib
import json
import socket
from pathlib import Path

import numpy as np
import pytest

from fedbench.data import SOURCES, prepare_dataset
from fedbench.data.base import RemoteFile, manifest_verifies
from fedbench.data.fetch import FetchError, download, verify
from fedbench.data.mnist import IDX_FILES


def _md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def _closed_port_url(name: str) -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/{name}"


def test_good_file_is_downloaded_and_verified(http_root, tmp_path):
    base, root = http_root
    data = b"hello federated world\n" * 100
    (root / "good.bin").write_bytes(data)
    dest = tmp_path / "out" / "good.bin"
    used = download(
        [base + "good.bin"], dest, md5=_md5(data), sha256=hashlib.sha256(data).hexdigest()
    )
    assert used == base + "good.bin"
    assert dest.read_bytes() == data
    assert verify(dest, md5=_md5(data))
    assert not verify(dest, md5="0" * 32)


def test_corrupted_file_is_rejected_and_nothing_is_left(http_root, tmp_path):
    base, root = http_root
    (root / "bad.bin").write_bytes(b"corrupted content")
    out = tmp_path / "out"
    with pytest.raises(FetchError) as err:
        download([base + "bad.bin"], out / "bad.bin", md5=_md5(b"the real content"))
    msg = str(err.value)
    assert "bad.bin" in msg and base + "bad.bin" in msg and "checksum mismatch" in msg
    assert str(out / "bad.bin") in msg  # where to place it by hand
    assert list(out.iterdir()) == []  # neither the file nor a temporary file remains


def test_404_then_good_mirror(http_root, tmp_path):
    base, root = http_root
    data = b"mirror copy"
    (root / "f.bin").write_bytes(data)
    dest = tmp_path / "f.bin"
    used = download([base + "missing/f.bin", base + "f.bin"], dest, md5=_md5(data))
    assert used == base + "f.bin"
    assert dest.read_bytes() == data


def test_all_mirrors_fail_names_every_url(http_root, tmp_path):
    base, _ = http_root
    urls = [base + "nope1/x.gz", base + "nope2/x.gz"]
    with pytest.raises(FetchError) as err:
        download(urls, tmp_path / "out" / "x.gz", md5="0" * 32)
    assert all(u in str(err.value) for u in urls) and "404" in str(err.value)
    assert list((tmp_path / "out").iterdir()) == []


def test_unreachable_url_fails_fast(tmp_path):
    url = _closed_port_url("file.gz")
    with pytest.raises(FetchError, match="file.gz") as err:
        download([url], tmp_path / "file.gz", timeout=0.5)
    # The refusal is reported as such (not as a time-out), with the URL tried.
    assert url in str(err.value) and "refused" in str(err.value).lower()
    assert list(tmp_path.iterdir()) == []


def test_source_fetch_end_to_end(http_root, tmp_path, monkeypatch, fake_idx_set):
    base, root = http_root
    contents = fake_idx_set(root / "mirror")
    files = [
        RemoteFile(name, (base + "down/" + name, base + "mirror/" + name), md5=_md5(contents[name]))
        for name in IDX_FILES
    ]
    src = SOURCES["mnist"]
    monkeypatch.setattr(src, "files", files)
    raw = tmp_path / "raw"
    manifest = src.fetch(raw, timeout=2)
    assert set(manifest) == set(IDX_FILES)
    assert all(e["origin"] == base + "mirror/" + n for n, e in manifest.items())
    assert json.loads((raw / "MANIFEST.json").read_text()) == manifest
    assert manifest_verifies(raw, files)
    ds = src.load(raw)
    assert ds.x_train.shape == (12, 1, 28, 28) and ds.x_test.shape == (5, 1, 28, 28)
    assert ds.y_train.tolist() == [i % 10 for i in range(12)]
    assert not ds.standin and 0.0 <= ds.x_train.min() and ds.x_train.max() <= 1.0
    # A second fetch keeps the verified files and downloads nothing.
    (root / "mirror" / IDX_FILES[0]).unlink()
    again = src.fetch(raw, timeout=2)
    assert again[IDX_FILES[0]]["origin"].startswith("already present")
    # prepare_dataset trusts a verifying manifest and re-fetches after damage.
    (raw / IDX_FILES[1]).write_bytes(b"damaged")
    assert not manifest_verifies(raw, files)
    ds2 = prepare_dataset("mnist", {}, raw, "real", np.random.default_rng(0))
    assert np.array_equal(ds2.y_train, ds.y_train)


def test_source_fetch_failure_names_file_and_place(tmp_path, monkeypatch):
    src = SOURCES["cifar10"]
    url = _closed_port_url("cifar-10-python.tar.gz")
    monkeypatch.setattr(src, "files", [RemoteFile("cifar-10-python.tar.gz", (url,), md5="0" * 32)])
    with pytest.raises(FetchError) as err:
        src.fetch(tmp_path / "raw", timeout=0.5)
    msg = str(err.value)
    assert "cifar-10-python.tar.gz" in msg and url in msg
    assert str(tmp_path / "raw" / "cifar-10-python.tar.gz") in msg
    assert not (tmp_path / "raw" / "MANIFEST.json").exists()


def test_offline_copy_is_verified(tmp_path, monkeypatch, fake_idx_set):
    offline = tmp_path / "system"
    contents = fake_idx_set(offline)
    src = SOURCES["fashion_mnist"]
    monkeypatch.setattr(src, "system_dir", offline)
    good = [RemoteFile(n, (), md5=_md5(contents[n])) for n in IDX_FILES]
    monkeypatch.setattr(src, "files", good)
    assert src.available_offline()
    manifest = src.fetch(tmp_path / "raw")
    assert all(Path(e["origin"]).parent == offline for e in manifest.values())
    bad = [RemoteFile(n, (), md5="0" * 32) for n in IDX_FILES]
    monkeypatch.setattr(src, "files", bad)
    with pytest.raises(FetchError, match="does not match"):
        src.fetch(tmp_path / "raw2")
    assert [p.name for p in (tmp_path / "raw2").iterdir()] == []


def test_unknown_fetch_param(tmp_path):
    with pytest.raises(ValueError, match="colour.*valid"):
        SOURCES["mnist"].fetch(tmp_path, colour="red")

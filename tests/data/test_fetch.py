"""Download and verification against a local HTTP server: no test touches the network."""

from __future__ import annotations

import hashlib
import json
import socket
from pathlib import Path

import pytest

from fedbench.data import SOURCES
from fedbench.data.base import RemoteFile, Source, manifest_verifies
from fedbench.data.fetch import FetchError, download, verify


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


class Files(Source):
    """A minimal urllib-fetched source (the route of the sources no library serves)."""

    name = "files"
    input_shape = (1,)
    num_classes = 2

    def __init__(self, files: list[RemoteFile], offline: Path | None = None) -> None:
        self.files, self.folder = files, offline

    def offline_dir(self) -> Path | None:
        return self.folder

    def load(self, raw_dir, **params):
        raise NotImplementedError

    def standin(self, rng, *, n_train=2000, n_test=500, **params):
        raise NotImplementedError


def test_source_fetch_end_to_end(http_root, tmp_path, fake_idx_set):
    base, root = http_root
    contents = fake_idx_set(root / "mirror")
    files = [
        RemoteFile(name, (base + "down/" + name, base + "mirror/" + name), md5=_md5(contents[name]))
        for name in contents
    ]
    src, raw = Files(files), tmp_path / "raw"
    manifest = src.fetch(raw, timeout=2)
    assert set(manifest) == set(contents)
    assert all(e["origin"] == base + "mirror/" + n for n, e in manifest.items())
    assert json.loads((raw / "MANIFEST.json").read_text()) == manifest
    assert manifest_verifies(raw, files) and src.present(raw)
    assert all((raw / n).read_bytes() == data for n, data in contents.items())
    # A second fetch keeps the verified files and downloads nothing.
    first = files[0].filename
    (root / "mirror" / first).unlink()
    again = src.fetch(raw, timeout=2)
    assert again[first]["origin"].startswith("already present")
    # Damage fails the manifest (a changed size already fails the cheap `present`); fetch
    # downloads the file again.
    (raw / files[1].filename).write_bytes(b"damaged")
    assert not manifest_verifies(raw, files) and not src.present(raw)
    assert src.fetch(raw, timeout=2)[files[1].filename]["origin"].endswith(files[1].filename)
    assert manifest_verifies(raw, files)


def test_source_fetch_failure_names_file_and_place(tmp_path):
    url = _closed_port_url("data.tar.gz")
    src = Files([RemoteFile("data.tar.gz", (url,), md5="0" * 32)])
    with pytest.raises(FetchError) as err:
        src.fetch(tmp_path / "raw", timeout=0.5)
    msg = str(err.value)
    assert "data.tar.gz" in msg and url in msg
    assert str(tmp_path / "raw" / "data.tar.gz") in msg
    assert not (tmp_path / "raw" / "MANIFEST.json").exists()
    assert src.manual_files(tmp_path) == [(tmp_path / "data.tar.gz", url)]
    assert src.fetch_route() == "urllib from " + url.split("/")[2]
    assert not src.needs_manual_step() and Files([RemoteFile("x", ())]).needs_manual_step()


def test_offline_copy_is_verified(tmp_path, fake_idx_set):
    offline = tmp_path / "system"
    contents = fake_idx_set(offline)
    src = Files([RemoteFile(n, (), md5=_md5(contents[n])) for n in contents], offline)
    assert src.available_offline()
    manifest = src.fetch(tmp_path / "raw")
    assert all(Path(e["origin"]).parent == offline for e in manifest.values())
    src.files = [RemoteFile(n, (), md5="0" * 32) for n in contents]
    with pytest.raises(FetchError, match="does not match"):
        src.fetch(tmp_path / "raw2")
    assert [p.name for p in (tmp_path / "raw2").iterdir()] == []


def test_unknown_fetch_param(tmp_path):
    with pytest.raises(ValueError, match="colour.*valid"):
        SOURCES["mnist"].fetch(tmp_path, colour="red")

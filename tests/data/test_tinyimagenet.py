"""TinyImageNet's original route (`source: original`): the zip layout read on a tiny handcrafted
copy, fetch, stand-in. The hub route: test_hub_tinyimagenet.py."""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from fedbench.data import SOURCES, prepare_dataset
from fedbench.data import tinyimagenet as ti
from fedbench.data.base import RemoteFile, manifest_verifies
from fedbench.data.fetch import FetchError

WNIDS = ["n02", "n01", "n03"]  # wnids.txt is not sorted; classes follow the sorted order


def _jpeg(value: int, grey: bool = False) -> bytes:
    mode, colour = ("L", value) if grey else ("RGB", (value, 255 - value, 128))
    buf = io.BytesIO()
    Image.new(mode, (64, 64), colour).save(buf, format="JPEG", quality=95)
    return buf.getvalue()


def write_tiny_zip(path: Path) -> bytes:
    """A TinyImageNet-layout zip: 2 train images per wnid, 3 val images, 1 test image."""
    r = ti.TINY_ROOT
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{r}/wnids.txt", "\n".join(WNIDS) + "\n")
        z.writestr(f"{r}/words.txt", "n01\tone\nn02\ttwo\nn03\tthree\n")
        for k, w in enumerate(WNIDS):
            z.writestr(f"{r}/train/{w}/{w}_boxes.txt", f"{w}_0.JPEG\t0\t0\t10\t10\n")
            for i in range(2):
                z.writestr(f"{r}/train/{w}/images/{w}_{i}.JPEG", _jpeg(40 * k + i, grey=i == 1))
        rows = [("val_1.JPEG", "n03"), ("val_0.JPEG", "n02"), ("val_2.JPEG", "n01")]
        z.writestr(
            f"{r}/val/val_annotations.txt", "".join(f"{f}\t{w}\t0\t0\t5\t5\n" for f, w in rows)
        )
        for f, _ in rows:
            z.writestr(f"{r}/val/images/{f}", _jpeg(200))
        z.writestr(f"{r}/test/images/test_0.JPEG", _jpeg(10))
    return path.read_bytes()


def test_tinyimagenet_load(tmp_path):
    write_tiny_zip(tmp_path / ti.TINY_ZIP)
    ds = SOURCES["tinyimagenet"].load(tmp_path, source="original")
    assert ds.x_train.shape == (6, 3, 64, 64) and ds.x_test.shape == (3, 3, 64, 64)
    assert ds.num_classes == 200 and not ds.standin and "source original" in ds.provenance
    # Rows by label: n01 (class 0), n02 (1), n03 (2); val_0 -> n02, val_1 -> n03, val_2 -> n01.
    assert ds.y_train.tolist() == [0, 0, 1, 1, 2, 2]
    assert ds.y_test.tolist() == [0, 1, 2]
    # n01's two images: one colour, one grey (its channels equal); either may come first.
    grey = next(x for x in ds.x_train[:2] if np.array_equal(x[0], x[2]))
    assert np.array_equal(grey[0], grey[1]) and np.array_equal(grey[1], grey[2])
    assert 0.0 <= ds.x_train.min() and ds.x_train.max() <= 1.0
    small = SOURCES["tinyimagenet"].load(tmp_path, source="original", resize=32)
    assert small.x_train.shape == (6, 3, 32, 32) and small.y_train.tolist() == ds.y_train.tolist()
    assert "resized to 32 x 32" in small.provenance
    mean = ds.x_train.mean(axis=(2, 3))  # a bilinear, antialiased resize keeps each image's mean
    assert np.allclose(small.x_train.mean(axis=(2, 3)), mean, atol=0.02)
    with pytest.raises(ValueError, match="resize must be a positive integer"):
        SOURCES["tinyimagenet"].load(tmp_path, resize=0)
    with pytest.raises(ValueError, match="source must be one of"):
        SOURCES["tinyimagenet"].load(tmp_path, source="kaggle")


def test_tinyimagenet_rejects_bad_zips(tmp_path):
    r = ti.TINY_ROOT
    with zipfile.ZipFile(tmp_path / ti.TINY_ZIP, "w") as z:
        z.writestr(f"{r}/wnids.txt", "n01\n")
        z.writestr(f"{r}/train/n01/images/n01_0.JPEG", b"not a jpeg")
        z.writestr(f"{r}/val/val_annotations.txt", "")
    with pytest.raises(ValueError, match="n01_0.JPEG: cannot decode"):
        SOURCES["tinyimagenet"].load(tmp_path, source="original")
    with zipfile.ZipFile(tmp_path / ti.TINY_ZIP, "w") as z:
        z.writestr(f"{r}/wnids.txt", "n01\n")
        z.writestr(f"{r}/val/val_annotations.txt", "val_0.JPEG\tn09\t0\t0\t1\t1\n")
    with pytest.raises(ValueError, match="val_annotations"):
        SOURCES["tinyimagenet"].load(tmp_path, source="original")
    (tmp_path / ti.TINY_ZIP).write_bytes(b"truncated")
    with pytest.raises(ValueError, match="not a readable TinyImageNet zip"):
        SOURCES["tinyimagenet"].load(tmp_path, source="original")


def test_tinyimagenet_fetch(http_root, tmp_path, monkeypatch):
    base, root = http_root
    data = write_tiny_zip(root / ti.TINY_ZIP)
    (root / "corrupt.zip").write_bytes(data[:-10])
    src = SOURCES["tinyimagenet"]
    md5 = hashlib.md5(data).hexdigest()
    monkeypatch.setattr(
        src,
        "original_files",
        [RemoteFile(ti.TINY_ZIP, (base + "corrupt.zip", base + ti.TINY_ZIP), md5=md5)],
    )
    raw = tmp_path / "raw"
    manifest = src.fetch(raw, timeout=2, source="original")
    assert manifest[ti.TINY_ZIP]["origin"] == base + ti.TINY_ZIP  # the corrupted copy rejected
    files = src.routed({"source": "original"}).files
    assert manifest[ti.TINY_ZIP]["verified_by"] == "archive" and manifest_verifies(raw, files)
    ds = prepare_dataset(
        "tinyimagenet", {"source": "original"}, raw, "real", np.random.default_rng(0)
    )
    assert len(ds.y_train) == 6
    monkeypatch.setattr(
        src, "original_files", [RemoteFile(ti.TINY_ZIP, (base + "corrupt.zip",), md5=md5)]
    )
    with pytest.raises(FetchError, match="checksum mismatch"):
        src.fetch(tmp_path / "raw2", timeout=2, source="original")
    assert list((tmp_path / "raw2").iterdir()) == []


def test_tinyimagenet_registry_and_standin():
    src = SOURCES["tinyimagenet"]
    assert src.original_files[0].md5 == "90528d7ca1a48142e341f4ef8d21d0de"
    ds = src.standin(np.random.default_rng(0), n_train=200, n_test=40)
    assert ds.standin and ds.x_train.shape == (200, 3, 64, 64) and ds.x_test.shape[0] == 40
    small = src.standin(np.random.default_rng(0), n_train=20, n_test=4, resize=32)
    assert small.x_train.shape == (20, 3, 32, 32)
    assert ds.num_classes == 200 and ds.y_train.max() < 200

"""The fetch job's routes (fedbench.jobs.fetch, fedbench.data.hub.fetch_routes): a source with
`source: hub | original` fetches the routes its catalog datasets name, so a grid whose dataset
says `source: original` fetches no hub copy; offline, on small TinyImageNet files in both
formats (the zip, a parquet copy of the hub repo placed by hand)."""

from __future__ import annotations

import hashlib
import io
import json
import socket
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

datasets = pytest.importorskip("datasets")

from fedbench import jobs  # noqa: E402
from fedbench.data import SOURCES, FetchError, hub  # noqa: E402
from fedbench.data import tinyimagenet as ti  # noqa: E402
from fedbench.data.base import RemoteFile  # noqa: E402


def _jpeg(seed: int) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="JPEG")
    return buf.getvalue()


def write_zip(path: Path) -> None:
    """CS231n's layout: one wnid, one training and one validation image."""
    r = ti.TINY_ROOT
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{r}/wnids.txt", "n01443537\n")
        z.writestr(f"{r}/train/n01443537/images/n01443537_0.JPEG", _jpeg(1))
        z.writestr(f"{r}/val/val_annotations.txt", "val_0.JPEG\tn01443537\t0\t0\t9\t9\n")
        z.writestr(f"{r}/val/images/val_0.JPEG", _jpeg(2))


def write_copy(copy: Path) -> None:
    """zh-plus/tiny-imagenet's layout with the same two images."""
    features = datasets.Features(
        {"image": datasets.Image(), "label": datasets.ClassLabel(names=["n01443537"])}
    )
    for split, seed in (("train", 1), ("valid", 2)):
        path = copy / "data" / f"{split}-00000-of-00001-0123456789abcdef.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        rows = {"image": [{"bytes": _jpeg(seed), "path": None}], "label": [0]}
        datasets.Dataset.from_dict(rows, features=features).to_parquet(str(path))


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """No network (lookups and connects recorded and refused), `datasets`' cache in tmp_path, and
    the zip's MD5 the fixture's (else fetch would reject the placed zip and try its URL)."""
    monkeypatch.setattr(hub, "CACHE_DIR", str(tmp_path / "hf-cache"))
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    calls = []

    def refuse(self, *args):
        calls.append(args)
        raise OSError("no network in tests")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: refuse(None, *a))
    write_zip(tmp_path / "zip" / ti.TINY_ZIP)
    md5 = hashlib.md5((tmp_path / "zip" / ti.TINY_ZIP).read_bytes()).hexdigest()
    urls = ti.TinyImageNet.original_files[0].urls
    monkeypatch.setattr(
        SOURCES["tinyimagenet"], "original_files", [RemoteFile(ti.TINY_ZIP, urls, md5)]
    )
    return calls


def _entry(route: str | None = None, source: str = "tinyimagenet") -> dict:
    return {"source": source, **({"params": {"source": route}} if route else {})}


def test_routes_named_by_the_catalog():
    tin, mnist = SOURCES["tinyimagenet"], SOURCES["mnist"]
    assert hub.fetch_routes(tin, []) == [None]  # no dataset uses it: the default, fallback kept
    assert hub.fetch_routes(tin, [_entry(), _entry()]) == [None]
    assert hub.fetch_routes(tin, [_entry("original")]) == ["original"]  # no hub copy
    assert hub.fetch_routes(tin, [_entry(), _entry("original")]) == ["original", None]
    assert hub.fetch_routes(tin, [_entry(), _entry("hub")]) == ["hub"]  # the default, by name
    both = [_entry("hub"), _entry("original"), _entry("original", "leaf_celeba")]
    assert hub.fetch_routes(tin, both) == ["hub", "original"]
    assert hub.fetch_routes(mnist, [_entry("original", "mnist")]) == [None]  # no routes
    with pytest.raises(ValueError, match="source must be one of"):
        hub.fetch_routes(tin, [_entry("kaggle")])


def test_a_dataset_naming_original_fetches_no_hub_copy(tmp_path, offline):
    raw = tmp_path / "raw" / "tinyimagenet"
    write_copy(raw / hub.LOCAL_COPY)  # a hub copy is there; the job must not convert it
    (raw / ti.TINY_ZIP).write_bytes((tmp_path / "zip" / ti.TINY_ZIP).read_bytes())
    catalog = {"tin": _entry("original"), "cifar": _entry(source="cifar10")}
    jobs.fetch("tinyimagenet", raw / "MANIFEST.json", tmp_path / "fetch.log", catalog)
    assert set(json.loads((raw / "MANIFEST.json").read_text())) == {ti.TINY_ZIP}
    assert not (raw / ti.HUB_NPZ).exists() and not offline
    assert "route original" in (tmp_path / "fetch.log").read_text()


def test_both_routes_named_fetch_both(tmp_path, offline):
    raw = tmp_path / "raw" / "tinyimagenet"
    write_copy(raw / hub.LOCAL_COPY)
    (raw / ti.TINY_ZIP).write_bytes((tmp_path / "zip" / ti.TINY_ZIP).read_bytes())
    catalog = {"a": _entry(), "b": _entry("original")}
    jobs.fetch("tinyimagenet", raw / "MANIFEST.json", None, catalog)
    assert set(json.loads((raw / "MANIFEST.json").read_text())) == {ti.TINY_ZIP, ti.HUB_NPZ}
    assert not offline


def test_without_a_catalog_the_default_route_and_its_fallback(tmp_path, offline):
    raw = tmp_path / "raw" / "tinyimagenet"
    (raw).mkdir(parents=True)
    (raw / ti.TINY_ZIP).write_bytes((tmp_path / "zip" / ti.TINY_ZIP).read_bytes())
    jobs.fetch("tinyimagenet", raw / "MANIFEST.json", None)  # hub offline: the placed zip
    assert set(json.loads((raw / "MANIFEST.json").read_text())) == {ti.TINY_ZIP}
    catalog = {"a": _entry("hub")}  # named: no fallback, the job fails saying what to place
    with pytest.raises(FetchError, match="zh-plus/tiny-imagenet"):
        jobs.fetch("tinyimagenet", raw / "MANIFEST.json", None, catalog)

"""FEMNIST `source: hub` (fedbench/data/hub.py, leaf_femnist.py) offline: one set of NIST-like
images written in both formats, NIST's two zips and a parquet copy in the hub repo's layout
(default/train/0000.parquet, the columns of flwrlabs/femnist), give the same clients and samples;
with HF_HUB_OFFLINE the hub route stops at once naming the dataset and what to place; the fetch
rule's call (no `source`) falls back to original files placed by hand."""

from __future__ import annotations

import io
import json
import socket
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

datasets = pytest.importorskip("datasets")

from fedbench.data import SOURCES, FetchError, hub, prepare_dataset  # noqa: E402
from fedbench.data import leaf_femnist as fm  # noqa: E402

# writer -> by_class hex codes of its images (each image drawn from its own seed)
WRITERS = {
    "f0003_40": ["30", "31", "41", "61", "7a"],
    "f0000_14": ["39", "4a", "62"],
    "f0001_14": ["35", "36"],
    "f0002_22": ["5a", "32", "33", "34"],
}
CLASSES = (
    [str(c) for c in range(10)] + [chr(c) for c in range(65, 91)] + [chr(c) for c in range(97, 123)]
)


def _png(seed: int) -> bytes:
    """A 128x128 NIST-like image: white page, one dark stroke."""
    rng = np.random.default_rng(seed)
    arr = np.full((128, 128), 255, dtype=np.uint8)
    r, c = rng.integers(10, 80, 2)
    arr[r : r + 30 + seed % 9, c : c + 8 + seed % 7] = rng.integers(0, 60)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


def write_both(orig: Path, copy: Path, *, inverted: bool = False) -> None:
    """NIST's zips under `orig`; the same images as LEAF's 28x28 thumbnails in a parquet copy of
    the hub repo under `copy` (writers in another order than the zips' name order)."""
    orig.mkdir(parents=True, exist_ok=True)
    rows: dict[str, list] = {"image": [], "writer_id": [], "hsf_id": [], "character": []}
    n = 0
    with (
        zipfile.ZipFile(orig / fm.BY_CLASS, "w") as zc,
        zipfile.ZipFile(orig / fm.BY_WRITE, "w") as zw,
    ):
        for writer, codes in WRITERS.items():
            for k, code in enumerate(codes):
                png = _png(n)
                zw.writestr(f"by_write/hsf_4/{writer}/d{writer[1:]}/d_{k:05d}.png", png)
                zc.writestr(f"by_class/{code}/hsf_4/hsf_4_{n:05d}.png", png)
                pixels = np.rint(fm.nist_image(png) * 255).astype(np.uint8)
                rows["image"].append(Image.fromarray(255 - pixels if inverted else pixels))
                rows["writer_id"].append(writer)
                rows["hsf_id"].append(4)
                rows["character"].append(fm.leaf_label(code))
                n += 1
    features = datasets.Features(
        {
            "image": datasets.Image(),
            "writer_id": datasets.Value("string"),
            "hsf_id": datasets.Value("int64"),
            "character": datasets.ClassLabel(names=CLASSES),
        }
    )
    path = copy / "default" / "train" / "0000.parquet"
    path.parent.mkdir(parents=True)
    datasets.Dataset.from_dict(rows, features=features).to_parquet(str(path))


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    """`datasets`' cache in a temporary folder; the hub offline; any socket connect recorded."""
    monkeypatch.setattr(hub, "CACHE_DIR", str(tmp_path / "hf-cache"))
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    calls = []

    def refuse(self, *args):
        calls.append(args)
        raise OSError("no network in tests")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    return calls


PARAMS = [
    {},
    {"min_samples": 3},
    {"max_clients": 2, "seed": 1},
    {"sample": "leaf_niid", "fraction": 0.5, "seed": 3},
]


@pytest.mark.parametrize("inverted", [False, True])
def test_hub_copy_and_nist_zips_give_the_same_clients_and_samples(tmp_path, hf_cache, inverted):
    orig, raw = tmp_path / "orig", tmp_path / "raw"
    write_both(orig, raw / hub.LOCAL_COPY, inverted=inverted)
    src = SOURCES["femnist"]
    manifest = src.fetch(raw)  # the default route: hub, read from the placed copy
    assert list(manifest) == [fm.HUB_NPZ] and "placed by hand" in manifest[fm.HUB_NPZ]["origin"]
    assert ("stored inverted" in manifest[fm.HUB_NPZ]["origin"]) == inverted
    for params in PARAMS:
        a = src.load(raw, **params)
        b = src.load(orig, source="original", **params)
        assert a.groups.tolist() == b.groups.tolist(), params
        np.testing.assert_array_equal(a.y_train, b.y_train)
        np.testing.assert_array_equal(a.x_train, b.x_train)
        assert "source hub" in a.provenance and "source original" in b.provenance
    assert np.bincount(src.load(raw).groups).tolist() == [3, 2, 4, 5]  # writers in name order
    assert not hf_cache


def test_prepare_reads_the_route_its_params_name(tmp_path, hf_cache):
    orig, raw = tmp_path / "orig", tmp_path / "raw"
    write_both(orig, raw / hub.LOCAL_COPY)
    for f in (fm.BY_CLASS, fm.BY_WRITE):
        (raw / f).write_bytes((orig / f).read_bytes())
    rng = np.random.default_rng(0)
    hub_ds = prepare_dataset("femnist", {}, raw, "real", rng)
    orig_ds = prepare_dataset("femnist", {"source": "original"}, raw, "real", rng)
    np.testing.assert_array_equal(hub_ds.x_train, orig_ds.x_train)
    # Both routes' files stay listed in one manifest (the other route's entries are kept).
    manifest = json.loads((raw / "MANIFEST.json").read_text())
    assert set(manifest) == {fm.HUB_NPZ, fm.BY_CLASS, fm.BY_WRITE}
    assert SOURCES["femnist"].routed({}).present(raw)
    assert SOURCES["femnist"].routed({"source": "original"}).present(raw)


def test_offline_without_a_copy_names_the_dataset_and_what_to_place(tmp_path, hf_cache):
    src = SOURCES["femnist"]
    with pytest.raises(FetchError) as err:
        src.fetch(tmp_path)
    msg = str(err.value)
    assert msg.startswith("femnist: datasets.load_dataset('flwrlabs/femnist'")
    assert str(tmp_path / hub.LOCAL_COPY) in msg and fm.FEMNIST_HUB.revision in msg
    assert fm.FEMNIST_HUB.download_command(tmp_path / hub.LOCAL_COPY) in msg
    assert "source: original" in msg and "Traceback" not in msg
    assert err.value.__cause__ is None and err.value.__suppress_context__
    assert not hf_cache  # no connection tried: no retry loop
    assert not (tmp_path / "MANIFEST.json").exists()


def test_fetch_rule_falls_back_to_original_files_placed_by_hand(tmp_path, hf_cache):
    orig = tmp_path / "orig"
    write_both(orig, tmp_path / "unused")
    src = SOURCES["femnist"]
    manifest = src.fetch(orig)  # no `source`: hub fails offline, the placed zips are used
    assert set(manifest) == {fm.BY_CLASS, fm.BY_WRITE}
    assert all(e["verified_by"] == "unchecked" for e in manifest.values())
    ds = prepare_dataset("femnist", {"source": "original"}, orig, "real", np.random.default_rng(0))
    assert len(ds.y_train) == sum(len(c) for c in WRITERS.values())
    with pytest.raises(FetchError, match="flwrlabs/femnist"):
        src.fetch(orig, source="hub")  # asked for by name: no fallback
    assert not hf_cache


def test_routes_in_status_words():
    src = SOURCES["femnist"]
    assert src.fetch_route().startswith("datasets.load_dataset('flwrlabs/femnist'")
    assert [f.filename for f in src.files] == [fm.HUB_NPZ] and not src.needs_manual_step()
    orig = src.routed({"source": "original"})
    assert orig.fetch_route() == "urllib from s3.amazonaws.com"
    assert [f.filename for f in orig.files] == [fm.BY_CLASS, fm.BY_WRITE]
    assert src.route == "hub" and [f.filename for f in src.files] == [fm.HUB_NPZ]  # unchanged
    with pytest.raises(ValueError, match="source must be one of"):
        src.routed({"source": "nist"})

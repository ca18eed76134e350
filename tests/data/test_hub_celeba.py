"""LEAF CelebA `source: hub` (fedbench/data/hub.py, leaf_aaggff.py) offline: one set of aligned
JPEGs written in both formats, CelebA's three files and a parquet copy in flwrlabs/celeba's
layout (config img_align+identity+attr, splits train / valid / test, columns image, celeb_id and
attribute bools), give the same clients and samples; offline the hub route stops at once naming
the dataset and what to place; the fetch rule's call falls back to CelebA's files placed by
hand."""

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
from fedbench.data import leaf_aaggff as la  # noqa: E402

CONFIG = "img_align+identity+attr"
# image number -> (celebrity, smiling); celebrity 7 has fewer than 5 images (LEAF drops it)
IMAGES = {
    1: (12, 1), 2: (3, 0), 3: (12, 0), 4: (3, 1), 5: (7, 1), 6: (3, 1), 7: (12, 1),
    8: (3, 0), 9: (12, 0), 10: (3, 1), 11: (12, 1), 12: (7, 0), 13: (12, 1),
}  # fmt: skip
SPLITS = {"train": range(1, 10), "valid": range(10, 12), "test": range(12, 14)}


def _jpeg(seed: int) -> bytes:
    """A small aligned-face stand-in: random colour blocks, 20 x 24, as a JPEG."""
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, (6, 5, 3), dtype=np.uint8).repeat(4, 0).repeat(4, 1)
    buf = io.BytesIO()
    Image.fromarray(blocks).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def write_both(orig: Path, copy: Path, *, names: bool = True, shuffle: bool = True) -> None:
    """CelebA's identity, attribute and image files under `orig`; the same JPEG bytes in a
    parquet copy of the hub repo under `copy` (rows shuffled within each split unless
    `shuffle` is False; file names kept in the image column unless `names` is False)."""
    orig.mkdir(parents=True, exist_ok=True)
    files = {n: f"{n:06d}.jpg" for n in IMAGES}
    (orig / la.IDENTITY).write_text("".join(f"{files[n]} {c}\n" for n, (c, _) in IMAGES.items()))
    (orig / la.ATTRS).write_text(
        f"{len(IMAGES)}\n5_o_Clock_Shadow Smiling Young \n"
        + "".join(f"{files[n]} -1 {1 if s else -1} 1\n" for n, (_, s) in IMAGES.items())
    )
    with zipfile.ZipFile(orig / la.IMAGES, "w") as z:
        for n, f in files.items():
            z.writestr(f"img_align_celeba/{f}", _jpeg(n))
    features = datasets.Features(
        {
            "image": datasets.Image(),
            "celeb_id": datasets.Value("int64"),
            "5_o_Clock_Shadow": datasets.Value("bool"),
            "Smiling": datasets.Value("bool"),
            "Young": datasets.Value("bool"),
        }
    )
    rng = np.random.default_rng(3)
    for split, numbers in SPLITS.items():
        numbers = list(numbers)
        if shuffle:
            numbers = [numbers[i] for i in rng.permutation(len(numbers))]
        rows = {
            "image": [{"bytes": _jpeg(n), "path": files[n] if names else None} for n in numbers],
            "celeb_id": [IMAGES[n][0] for n in numbers],
            "5_o_Clock_Shadow": [False] * len(numbers),
            "Smiling": [bool(IMAGES[n][1]) for n in numbers],
            "Young": [True] * len(numbers),
        }
        path = copy / CONFIG / f"{split}-00000-of-00001.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        datasets.Dataset.from_dict(rows, features=features).to_parquet(str(path))
    (copy / "README.md").write_text(
        f"---\nconfigs:\n- config_name: {CONFIG}\n  data_files:\n"
        + "".join(f"  - split: {s}\n    path: {CONFIG}/{s}-*\n" for s in SPLITS)
        + "---\n# CelebA\n"
    )


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    """`datasets`' cache in a temporary folder; the hub offline; any name lookup or socket
    connect recorded (and refused)."""
    monkeypatch.setattr(hub, "CACHE_DIR", str(tmp_path / "hf-cache"))
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    calls = []

    def refuse(self, *args):
        calls.append(args)
        raise OSError("no network in tests")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: refuse(None, *a))
    return calls


PARAMS = [{}, {"max_clients": 1, "seed": 4}]


@pytest.mark.parametrize("names, shuffle", [(True, True), (False, False)])
def test_hub_copy_and_celeba_files_give_the_same_clients_and_samples(
    tmp_path, hf_cache, names, shuffle
):
    orig, raw = tmp_path / "orig", tmp_path / "raw"
    write_both(orig, raw / hub.LOCAL_COPY, names=names, shuffle=shuffle)
    src = SOURCES["leaf_celeba"]
    manifest = src.fetch(raw)  # the default route: hub, read from the placed copy
    assert list(manifest) == [la.CELEBA_HUB_NPZ]
    assert manifest[la.CELEBA_HUB_NPZ]["origin"].count("placed by hand") == 3  # three splits
    for params in PARAMS:
        a = src.load(raw, **params)
        b = src.load(orig, source="original", **params)
        assert a.groups.tolist() == b.groups.tolist(), params
        np.testing.assert_array_equal(a.y_train, b.y_train)
        np.testing.assert_array_equal(a.x_train, b.x_train)
        assert "source hub" in a.provenance and "source original" in b.provenance
        assert ("by file name" if names else "by row order") in a.provenance
    # celebrity 3 (5 images) then 12 (6 images); 7 (2 images) dropped
    assert np.bincount(src.load(raw).groups).tolist() == [5, 6]
    assert not hf_cache


def test_shuffled_rows_without_file_names_change_the_order(tmp_path, hf_cache):
    orig, raw = tmp_path / "orig", tmp_path / "raw"
    write_both(orig, raw / hub.LOCAL_COPY, names=False, shuffle=True)
    SOURCES["leaf_celeba"].fetch(raw)
    a = SOURCES["leaf_celeba"].load(raw)
    b = SOURCES["leaf_celeba"].load(orig, source="original")
    assert a.groups.tolist() == b.groups.tolist()  # the same clients, sizes and labels' counts
    assert sorted(a.y_train.tolist()) == sorted(b.y_train.tolist())
    assert not np.array_equal(a.x_train, b.x_train)  # but not in the same order


def test_hub_route_holds_84_pixel_images_only(tmp_path, hf_cache):
    write_both(tmp_path / "orig", tmp_path / "raw" / hub.LOCAL_COPY)
    SOURCES["leaf_celeba"].fetch(tmp_path / "raw")
    with pytest.raises(ValueError, match="side=32.*source: original"):
        SOURCES["leaf_celeba"].load(tmp_path / "raw", side=32)
    assert (
        SOURCES["leaf_celeba"].load(tmp_path / "orig", source="original", side=32).x_train.shape[-1]
        == 32
    )


def test_prepare_reads_the_route_its_params_name(tmp_path, hf_cache):
    raw = tmp_path / "raw"
    write_both(raw, raw / hub.LOCAL_COPY)  # CelebA's files and the copy side by side
    rng = np.random.default_rng(0)
    hub_ds = prepare_dataset("leaf_celeba", {}, raw, "real", rng)
    orig_ds = prepare_dataset("leaf_celeba", {"source": "original"}, raw, "real", rng)
    np.testing.assert_array_equal(hub_ds.x_train, orig_ds.x_train)
    manifest = json.loads((raw / "MANIFEST.json").read_text())
    assert set(manifest) == {la.CELEBA_HUB_NPZ, la.IDENTITY, la.ATTRS, la.IMAGES}
    assert manifest[la.IDENTITY]["verified_by"] == "format"


def test_a_copy_without_the_smiling_column_is_refused(tmp_path, hf_cache):
    copy = tmp_path / hub.LOCAL_COPY
    feats = datasets.Features({"image": datasets.Image(), "celeb_id": datasets.Value("int64")})
    for split in SPLITS:
        path = copy / CONFIG / f"{split}-00000-of-00001.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        rows = {"image": [{"bytes": _jpeg(1), "path": "000001.jpg"}], "celeb_id": [1]}
        datasets.Dataset.from_dict(rows, features=feats).to_parquet(str(path))
    (copy / "README.md").write_text(
        f"---\nconfigs:\n- config_name: {CONFIG}\n  data_files:\n"
        + "".join(f"  - split: {s}\n    path: {CONFIG}/{s}-*\n" for s in SPLITS)
        + "---\n"
    )
    with pytest.raises(ValueError, match=r"lacks the column\(s\) \['Smiling'\]"):
        SOURCES["leaf_celeba"].fetch(tmp_path, source="hub")


def test_offline_without_a_copy_names_the_dataset_and_what_to_place(tmp_path, hf_cache):
    with pytest.raises(FetchError) as err:
        SOURCES["leaf_celeba"].fetch(tmp_path)
    msg = str(err.value)
    assert msg.startswith("leaf_celeba: datasets.load_dataset('flwrlabs/celeba'")
    assert la.CELEBA_HUB.download_command(tmp_path / hub.LOCAL_COPY) in msg
    assert "source: original" in msg and "Google Drive" in msg and "Traceback" not in msg
    assert not hf_cache and not (tmp_path / "MANIFEST.json").exists()


def test_fetch_rule_falls_back_to_celeba_files_placed_by_hand(tmp_path, hf_cache):
    orig = tmp_path / "orig"
    write_both(orig, tmp_path / "unused")
    manifest = SOURCES["leaf_celeba"].fetch(orig)  # hub fails offline; the placed files are used
    assert set(manifest) == {la.IDENTITY, la.ATTRS, la.IMAGES}
    assert {e["verified_by"] for e in manifest.values()} == {"format"}
    with pytest.raises(FetchError, match="flwrlabs/celeba"):
        SOURCES["leaf_celeba"].fetch(orig, source="hub")  # asked for by name: no fallback
    assert not hf_cache


def test_routes_in_status_words():
    src = SOURCES["leaf_celeba"]
    assert src.route == "hub" and src.params["source"] == "hub"
    assert src.fetch_route().startswith("datasets.load_dataset('flwrlabs/celeba'")
    assert [f.filename for f in src.files] == [la.CELEBA_HUB_NPZ] and not src.needs_manual_step()
    orig = src.routed({"source": "original"})
    assert orig.fetch_route() == "urllib from cseweb.ucsd.edu, drive.google.com"
    assert [f.filename for f in orig.files] == [la.IDENTITY, la.ATTRS, la.IMAGES]

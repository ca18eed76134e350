"""TinyImageNet `source: hub` (fedbench/data/hub.py, tinyimagenet.py) offline: one set of JPEGs
written in both formats, CS231n's zip and a parquet copy in zh-plus/tiny-imagenet's layout
(data/train-...parquet, data/valid-...parquet, an `image` and a wnid-named `label` column, a
README and the legacy dataset_infos.json), rows and label ids in other orders than the zip's,
give the same arrays after the canonical order; offline the hub route stops at once naming the
dataset and what to place; the fetch rule's call (no `source`) falls back to a placed zip."""

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

from fedbench.data import SOURCES, FetchError, hub, prepare_dataset  # noqa: E402
from fedbench.data import tinyimagenet as ti  # noqa: E402
from fedbench.data.base import RemoteFile  # noqa: E402

WNIDS = ["n02124075", "n01443537", "n04067472"]  # wnids.txt's order (not sorted)
TRAIN = {w: 4 for w in WNIDS}
VAL = [("val_0.JPEG", "n04067472"), ("val_1.JPEG", "n01443537"), ("val_2.JPEG", "n02124075")]
TRAIN_FILE = "data/train-00000-of-00001-1359597a978bc4fa.parquet"
VALID_FILE = "data/valid-00000-of-00001-70d52db3c749a935.parquet"


def _jpeg(seed: int) -> bytes:
    """A 64x64 JPEG of random blocks (every third one greyscale)."""
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8).repeat(8, 0).repeat(8, 1)
    img = Image.fromarray(blocks).convert("L") if seed % 3 == 0 else Image.fromarray(blocks)
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def write_both(orig: Path, copy: Path) -> None:
    """CS231n's zip under `orig`; the same JPEG bytes in a parquet copy of the hub repo under
    `copy`, rows shuffled and the ClassLabel's names in wnids.txt's order."""
    r, seed = ti.TINY_ROOT, 0
    train, val = [], []
    orig.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(orig / ti.TINY_ZIP, "w") as z:
        z.writestr(f"{r}/wnids.txt", "\n".join(WNIDS) + "\n")
        for w, n in TRAIN.items():
            for i in range(n):
                data = _jpeg(seed := seed + 1)
                z.writestr(f"{r}/train/{w}/images/{w}_{i}.JPEG", data)
                train.append((data, WNIDS.index(w)))
        z.writestr(
            f"{r}/val/val_annotations.txt", "".join(f"{f}\t{w}\t0\t0\t9\t9\n" for f, w in VAL)
        )
        for f, w in VAL:
            data = _jpeg(seed := seed + 1)
            z.writestr(f"{r}/val/images/{f}", data)
            val.append((data, WNIDS.index(w)))
    features = datasets.Features(
        {"image": datasets.Image(), "label": datasets.ClassLabel(names=WNIDS)}
    )
    rng = np.random.default_rng(5)
    for rows, name in ((train, TRAIN_FILE), (val, VALID_FILE)):
        rows = [rows[i] for i in rng.permutation(len(rows))]
        path = copy / name
        path.parent.mkdir(parents=True, exist_ok=True)
        table = {
            "image": [{"bytes": b, "path": None} for b, _ in rows],
            "label": [k for _, k in rows],
        }
        datasets.Dataset.from_dict(table, features=features).to_parquet(str(path))
    names = "".join(f"          '{k}': {w}\n" for k, w in enumerate(WNIDS))
    (copy / "README.md").write_text(
        "---\ndataset_info:\n  features:\n  - name: image\n    dtype: image\n  - name: label\n"
        f"    dtype:\n      class_label:\n        names:\n{names}  splits:\n"
        f"  - name: train\n    num_bytes: 1\n    num_examples: {len(train)}\n"
        f"  - name: valid\n    num_bytes: 1\n    num_examples: {len(val)}\n---\n# tiny-imagenet\n"
    )
    legacy = {"features": {"label": {"names": WNIDS, "_type": "ClassLabel"}}}
    (copy / "dataset_infos.json").write_text(json.dumps({"Maysee--tiny-imagenet": legacy}))


def fixture_md5(monkeypatch, path: Path) -> None:
    """The zip's MD5 that of the fixture at `path`, in place of CS231n's (else fetch would
    reject the placed zip and try the URL)."""
    md5 = hashlib.md5(path.read_bytes()).hexdigest()
    urls = ti.TinyImageNet.original_files[0].urls
    monkeypatch.setattr(
        SOURCES["tinyimagenet"], "original_files", [RemoteFile(ti.TINY_ZIP, urls, md5)]
    )


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    """`datasets`' cache in a temporary folder; the hub offline; any name lookup or socket connect
    recorded (and refused)."""
    monkeypatch.setattr(hub, "CACHE_DIR", str(tmp_path / "hf-cache"))
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    calls = []

    def refuse(self, *args):
        calls.append(args)
        raise OSError("no network in tests")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: refuse(None, *a))
    return calls


def test_hub_copy_and_zip_give_the_same_arrays(tmp_path, hf_cache):
    orig, raw = tmp_path / "orig", tmp_path / "raw"
    write_both(orig, raw / hub.LOCAL_COPY)
    src = SOURCES["tinyimagenet"]
    manifest = src.fetch(raw)  # the default route: hub, read from the placed copy
    assert list(manifest) == [ti.HUB_NPZ] and "placed by hand" in manifest[ti.HUB_NPZ]["origin"]
    with np.load(raw / ti.HUB_NPZ) as z:
        assert z["wnids"].tolist() == sorted(WNIDS) and z["x_train"].dtype == np.uint8
        stored = z["y_train"].tolist()
    a = src.load(raw)
    b = src.load(orig, source="original")
    assert stored != a.y_train.tolist()  # the copy's rows came in another order
    assert a.y_train.tolist() == [0] * 4 + [1] * 4 + [2] * 4  # sorted wnids: n01, n02, n04
    assert a.y_test.tolist() == [0, 1, 2]
    for key in ("x_train", "y_train", "x_test", "y_test"):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key))
    assert a.x_train.dtype == np.float32 and a.num_classes == b.num_classes == 200
    assert "source hub" in a.provenance and "source original" in b.provenance
    assert not hf_cache


def test_canonical_order_ignores_the_order_rows_come_in():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (9, 3, 4, 4), dtype=np.uint8)
    y = np.array([2, 0, 1, 0, 2, 1, 0, 1, 2])
    order = ti.canonical_order(x, y)
    perm = rng.permutation(9)
    again = ti.canonical_order(x[perm], y[perm])
    np.testing.assert_array_equal(x[order], x[perm][again])
    assert y[order].tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]


def test_prepare_reads_the_route_its_params_name(tmp_path, hf_cache, monkeypatch):
    orig, raw = tmp_path / "orig", tmp_path / "raw"
    write_both(orig, raw / hub.LOCAL_COPY)
    (raw / ti.TINY_ZIP).write_bytes((orig / ti.TINY_ZIP).read_bytes())
    fixture_md5(monkeypatch, orig / ti.TINY_ZIP)
    rng = np.random.default_rng(0)
    hub_ds = prepare_dataset("tinyimagenet", {}, raw, "real", rng)
    orig_ds = prepare_dataset("tinyimagenet", {"source": "original"}, raw, "real", rng)
    np.testing.assert_array_equal(hub_ds.x_train, orig_ds.x_train)
    manifest = json.loads((raw / "MANIFEST.json").read_text())
    assert set(manifest) == {ti.HUB_NPZ, ti.TINY_ZIP}  # both routes' files listed
    assert manifest[ti.TINY_ZIP]["verified_by"] == "archive"


def test_a_copy_without_wnid_labels_is_refused(tmp_path, hf_cache):
    copy = tmp_path / hub.LOCAL_COPY
    feats = datasets.Features({"image": datasets.Image(), "label": datasets.Value("int64")})
    for name in (TRAIN_FILE, VALID_FILE):
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        rows = {"image": [{"bytes": _jpeg(1), "path": None}], "label": [0]}
        datasets.Dataset.from_dict(rows, features=feats).to_parquet(str(copy / name))
    with pytest.raises(ValueError, match="ClassLabel named by wnids"):
        SOURCES["tinyimagenet"].fetch(tmp_path, source="hub")


def test_offline_without_a_copy_names_the_dataset_and_what_to_place(tmp_path, hf_cache):
    src = SOURCES["tinyimagenet"]
    with pytest.raises(FetchError) as err:
        src.fetch(tmp_path)
    msg = str(err.value)
    assert msg.startswith("tinyimagenet: datasets.load_dataset('zh-plus/tiny-imagenet'")
    assert ti.TINY_HUB.download_command(tmp_path / hub.LOCAL_COPY) in msg
    assert "source: original" in msg and "CS231n's zip" in msg and "Traceback" not in msg
    assert not hf_cache and not (tmp_path / "MANIFEST.json").exists()


def test_fetch_rule_falls_back_to_a_zip_placed_by_hand(tmp_path, hf_cache, monkeypatch):
    orig = tmp_path / "orig"
    write_both(orig, tmp_path / "unused")
    fixture_md5(monkeypatch, orig / ti.TINY_ZIP)
    manifest = SOURCES["tinyimagenet"].fetch(orig)  # hub fails offline; the placed zip is used
    assert set(manifest) == {ti.TINY_ZIP}
    with pytest.raises(FetchError, match="zh-plus/tiny-imagenet"):
        SOURCES["tinyimagenet"].fetch(orig, source="hub")  # asked for by name: no fallback
    assert not hf_cache


def test_routes_in_status_words():
    src = SOURCES["tinyimagenet"]
    assert src.route == "hub" and src.params == {"source": "hub", "resize": None}
    assert src.fetch_route().startswith("datasets.load_dataset('zh-plus/tiny-imagenet'")
    assert [f.filename for f in src.files] == [ti.HUB_NPZ] and not src.needs_manual_step()
    orig = src.routed({"source": "original"})
    assert orig.fetch_route() == "urllib from cs231n.stanford.edu"
    assert [f.filename for f in orig.files] == [ti.TINY_ZIP]

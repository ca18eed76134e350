"""EMNIST through torchvision.datasets.EMNIST, on a tiny zip the test writes in the layout of
NIST's gzip.zip (gzip/emnist-{split}-{train|test}-{images-idx3|labels-idx1}-ubyte.gz for the
six splits), which torchvision checks, unpacks into {root}/EMNIST/raw/ and reads.

No test touches the network: every URL urllib is asked for is recorded and refused, sockets
refuse to connect, and torchvision's MD5 of the zip is pointed at the test's zip.
"""

from __future__ import annotations

import gzip
import hashlib
import socket
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torchvision.datasets as tvd

import fedbench.data.emnist as em
from fedbench.data import SOURCES, prepare_dataset
from fedbench.data.base import manifest_verifies
from fedbench.data.fetch import FetchError

SRC = SOURCES["emnist"]
N_TEST = {"byclass": 62, "letters": 27}  # test images per split (the rest: 20)


@pytest.fixture
def offline(monkeypatch):
    """Record and refuse every URL urllib is asked for; sockets refuse to connect."""
    tried = []

    def urlopen(req, *args, **kwargs):
        tried.append(getattr(req, "full_url", req))
        raise urllib.error.URLError("network is unreachable (test)")

    def refuse(*args, **kwargs):
        raise AssertionError("the EMNIST source tried to open a connection")

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    return tried


def upright(split: str, part: str) -> tuple[np.ndarray, np.ndarray]:
    """The images (as a reader should return them: upright) and labels of one fixture file
    pair: split byclass's train labels run 0..61 twice, its test labels 0..61 once."""
    rng = np.random.default_rng(len(split) * 10 + len(part))
    classes = len(em.CLASSES[split])
    n = 2 * classes if part == "train" else N_TEST.get(split, 20)
    labels = np.arange(n) % classes
    if split == "letters":  # torchvision's letters labels run 1..26 (0 is "N/A", never used)
        labels = 1 + np.arange(n) % 26
    return rng.integers(0, 256, (n, 28, 28), dtype=np.uint8), labels.astype(np.uint8)


def write_zip(path: Path, encode_idx) -> bytes:
    """NIST's gzip.zip in miniature, the images stored transposed as EMNIST stores them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        for split in em.SPLITS:
            for part in ("train", "test"):
                images, labels = upright(split, part)
                prefix = f"gzip/emnist-{split}-{part}"
                stored = np.ascontiguousarray(images.transpose(0, 2, 1))
                z.writestr(
                    f"{prefix}-images-idx3-ubyte.gz", gzip.compress(encode_idx(stored), 9, mtime=0)
                )
                z.writestr(
                    f"{prefix}-labels-idx1-ubyte.gz", gzip.compress(encode_idx(labels), 9, mtime=0)
                )
            z.writestr(f"gzip/emnist-{split}-mapping.txt", "0 48\n")
    return path.read_bytes()


@pytest.fixture
def placed(tmp_path, monkeypatch, encode_idx):
    """raw_dir with the zip where the by-hand step puts it, torchvision's MD5 pointed at it."""
    raw = tmp_path / "raw"
    data = write_zip(raw / "EMNIST" / "raw" / "gzip.zip", encode_idx)
    monkeypatch.setattr(tvd.EMNIST, "md5", hashlib.md5(data, usedforsecurity=False).hexdigest())
    return raw


def test_fetch_unpacks_the_zip_through_torchvision_and_keeps_a_to_j(placed, offline):
    assert SRC.manual_files(placed) == [(placed / "EMNIST" / "raw" / "gzip.zip", em.URL)]
    manifest = SRC.fetch(placed, timeout=1)
    assert offline == []  # the zip's MD5 matched: nothing was downloaded
    assert len(manifest) == 24 and manifest_verifies(placed, SRC.files) and SRC.present(placed)
    assert all("torchvision" in e["verified_by"] for e in manifest.values())
    assert not (placed / "EMNIST" / "raw" / "gzip").exists()  # torchvision's unpacking folder
    ds = prepare_dataset("emnist", {"characters": "abcdefghij"}, placed, "real", None)
    images, labels = upright("byclass", "train")
    keep = (labels >= 36) & (labels <= 45)  # ByClass: 0-9, A-Z = 10-35, a-z = 36-61
    assert ds.num_classes == 10 and not ds.standin and keep.sum() == 20
    assert ds.y_train.tolist() == (labels[keep] - 36).tolist() and ds.y_train.dtype == np.int64
    assert np.array_equal(ds.x_train, images[keep][:, None] / np.float32(255.0))
    assert ds.x_train.shape == (20, 1, 28, 28) and ds.x_train.dtype == np.float32
    assert ds.y_test.tolist() == list(range(10)) and ds.x_test.shape == (10, 1, 28, 28)
    assert "split byclass" in ds.provenance and "'abcdefghij'" in ds.provenance
    # every class of the split, and the characters in another order
    whole = SRC.load(placed)
    assert whole.num_classes == 62 and whole.y_train.tolist() == labels.tolist()
    assert SRC.load(placed, characters="ja").y_test.tolist() == [1, 0]
    assert SRC.load(placed, characters="ab", resize=14).x_train.shape == (4, 1, 14, 14)


def test_letters_merge_the_cases_and_other_splits_lack_lower_case_c(placed, offline):
    SRC.fetch(placed, timeout=1)
    letters = SRC.load(placed, split="letters", characters="ab")
    _, labels = upright("letters", "train")
    assert letters.y_train.tolist() == (labels[labels <= 2] - 1).tolist()  # 'a' is label 1
    assert letters.y_test.tolist() == [0, 1, 0] and letters.num_classes == 2  # 27 = 1..26, 1
    for split in ("bymerge", "balanced", "letters"):
        with pytest.raises(ValueError, match=f"characters must be .* split '{split}'"):
            SRC.check_params({"split": split, "characters": "aC" if split == "letters" else "c"})
    with pytest.raises(ValueError, match="split must be one of"):
        SRC.check_params({"split": "lowercase"})
    with pytest.raises(ValueError, match="distinct"):
        SRC.check_params({"characters": "aa"})


def test_a_missing_file_is_restored_from_the_zip(placed, offline):
    SRC.fetch(placed, timeout=1)
    lost = placed / "EMNIST" / "raw" / "emnist-letters-test-labels-idx1-ubyte"
    lost.unlink()  # byclass is complete: torchvision must be asked for letters' test split
    SRC.fetch(placed, timeout=1)
    assert lost.is_file() and manifest_verifies(placed, SRC.files) and offline == []


def test_unpacked_files_placed_by_hand_are_read_without_fetching(placed, offline, tmp_path):
    SRC.fetch(placed, timeout=1)
    by_hand = tmp_path / "by_hand" / "EMNIST" / "raw"
    by_hand.mkdir(parents=True)
    for path in em.raw_files("byclass"):
        (by_hand / Path(path).name).write_bytes((placed / path).read_bytes())
    ds = SRC.load(tmp_path / "by_hand", characters="j")
    assert ds.y_train.tolist() == [0, 0] and offline == []


def test_wrong_zip_is_downloaded_again_and_named(placed, offline, monkeypatch):
    monkeypatch.setattr(tvd.EMNIST, "md5", "0" * 32)
    with pytest.raises(FetchError) as err:
        SRC.fetch(placed, timeout=1)
    assert offline and offline[0] == em.URL
    assert f"{placed / 'EMNIST' / 'raw' / 'gzip.zip'}  <-  {em.URL}" in str(err.value)
    assert not (placed / "MANIFEST.json").exists()


def test_offline_with_no_files_names_dataset_folder_and_zip(tmp_path, offline):
    raw = tmp_path / "raw"
    with pytest.raises(FetchError) as err:
        SRC.fetch(raw, timeout=1)
    msg = str(err.value)
    assert msg.startswith(f"emnist: torchvision.datasets.EMNIST could not download in {raw}")
    assert f"{raw / 'EMNIST' / 'raw' / 'gzip.zip'}  <-  {em.URL}" in msg
    assert f"SOURCES['emnist'].fetch('{raw}')" in msg
    with pytest.raises(FileNotFoundError, match="EMNIST found no data in"):
        SRC.load(tmp_path / "empty", characters="abcdefghij")


def test_standin_has_the_kept_class_count_and_says_so():
    ds = prepare_dataset(
        "emnist", {"characters": "abcdefghij"}, None, "standin", np.random.default_rng(0)
    )
    assert ds.standin and ds.num_classes == 10 and set(ds.y_train.tolist()) == set(range(10))
    assert ds.x_train.shape[1:] == (1, 28, 28) and ds.provenance.startswith("generated stand-in")
    assert SRC.standin(np.random.default_rng(0), n_train=62, n_test=0).num_classes == 62


def test_names_urls_and_classes_are_torchvisions(placed):
    assert em.URL == tvd.EMNIST.url and em.SPLITS == tvd.EMNIST.splits
    assert em.CLASSES == tvd.EMNIST.classes_split_dict
    assert em.CLASSES["byclass"][36:46] == list("abcdefghij")
    SRC.fetch(placed, timeout=1)
    for split in em.SPLITS:
        for train, (images, labels, *_) in (
            (True, em.raw_files(split)),
            (False, em.raw_files(split)[2:]),
        ):
            ds = tvd.EMNIST(str(placed), split=split, train=train)
            assert (
                Path(ds.images_file) == placed / images and Path(ds.labels_file) == placed / labels
            )
    assert SRC.fetch_route() == "torchvision.datasets.EMNIST(download=True)"
    assert not SRC.needs_manual_step()

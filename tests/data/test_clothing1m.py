"""Clothing1M: the released layout read from a tiny fixture, a subset, a missing file named, the
stand-in labelled and noisy, and `data status` showing the manual step."""

import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from fedbench.data import SOURCES, prepare_dataset
from fedbench.data.base import FetchError
from fedbench.data.clothing1m import IMAGE_DIRS, KEY_FILES, URL, read_images
from fedbench.data.status import MANUAL, state

TRAIN = [("images/0/00/a.jpg", 3), ("images/1/05/b.jpg", 13), ("images/0/00/c.jpg", 0),
         ("images/9/99/d.jpg", 7)]  # fmt: skip
TEST = [("images/2/10/e.jpg", 5), ("images/3/11/f.jpg", 1)]


def _write(root, colour_of):
    for sub in IMAGE_DIRS:
        (root / sub).mkdir(parents=True, exist_ok=True)
    for key, label in TRAIN + TEST:
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (40, 30), colour_of(label)).save(root / key, quality=100)
    kv = lambda rows: "".join(f"{k} {v}\n" for k, v in rows)  # noqa: E731
    keys = lambda rows: "".join(f"{k}\n" for k, _ in rows)  # noqa: E731
    # the noisy kv file also lists keys of no split (the release's holds ~1M); clean the same
    (root / "noisy_label_kv.txt").write_text(kv(TRAIN) + "images/4/00/z.jpg 2\n")
    (root / "clean_label_kv.txt").write_text(kv(TEST) + "images/0/00/a.jpg 4\n")
    (root / "noisy_train_key_list.txt").write_text(keys(TRAIN))
    (root / "clean_test_key_list.txt").write_text(keys(TEST))
    for f in ("clean_train_key_list.txt", "clean_val_key_list.txt"):
        (root / f).write_text("")
    for f in ("category_names_chn.txt", "category_names_eng.txt"):
        (root / f).write_text("\n".join(f"class{i}" for i in range(14)) + "\n")


def _colour(label):
    return (10 * label, 255 - 10 * label, 100)


def test_reads_the_released_layout(tmp_path):
    _write(tmp_path, _colour)
    ds = prepare_dataset("clothing1m", {"side": 8}, tmp_path, "real", np.random.default_rng(0))
    assert not ds.standin and ds.num_classes == 14
    assert ds.x_train.shape == (4, 3, 8, 8) and ds.x_test.shape == (2, 3, 8, 8)
    assert ds.y_train.tolist() == [3, 13, 0, 7] and ds.y_test.tolist() == [5, 1]
    # each image is its label's flat colour (JPEG rounding aside), in key-list order
    for x, label in zip(ds.x_train, ds.y_train, strict=True):
        want = np.array(_colour(int(label)), dtype=np.float32)[:, None, None] / 255
        assert np.abs(x - want).max() < 0.03
    manifest = (tmp_path / "MANIFEST.json").read_text()
    assert all(f in manifest for f in KEY_FILES)


def test_a_seeded_share_of_the_training_keys(tmp_path):
    _write(tmp_path, _colour)
    src = SOURCES["clothing1m"]
    a = src.load(tmp_path, side=8, train_fraction=0.5, subset_seed=1)
    b = src.load(tmp_path, side=8, train_fraction=0.5, subset_seed=1)
    assert len(a.y_train) == 2 and a.y_train.tolist() == b.y_train.tolist()
    assert set(a.y_train.tolist()) <= {3, 13, 0, 7}
    with pytest.raises(ValueError, match="train_fraction"):
        src.load(tmp_path, train_fraction=0.0)


def test_missing_files_are_named_with_where_to_get_them(tmp_path):
    _write(tmp_path, _colour)
    (tmp_path / "noisy_label_kv.txt").unlink()
    with pytest.raises(FetchError) as err:
        SOURCES["clothing1m"].fetch(tmp_path)
    assert str(tmp_path / "noisy_label_kv.txt") in str(err.value) and URL in str(err.value)


def test_a_key_without_a_label_is_an_error(tmp_path):
    _write(tmp_path, _colour)
    (tmp_path / "noisy_train_key_list.txt").write_text("images/0/00/a.jpg\nimages/5/55/none.jpg\n")
    with pytest.raises(ValueError, match="no label"):
        SOURCES["clothing1m"].load(tmp_path, side=8)


def test_the_reader_holds_one_image_at_a_time(tmp_path):
    keys = []
    for i in range(30):  # 30 images of 400 x 400: 14 MB decoded as float32 all at once
        key = f"images/0/00/{i}.png"
        (tmp_path / key).parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (400, 400), (i, i, i)).save(tmp_path / key)
        keys.append(key)
    tracemalloc.start()
    x = read_images(tmp_path, keys, 16)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert x.shape == (30, 3, 16, 16)
    assert peak < 6 * 400 * 400 * 4  # the output (92 kB) and about one decoded image


def test_standin_is_labelled_shape_faithful_and_noisy():
    ds = SOURCES["clothing1m"].standin(np.random.default_rng(0), n_train=2000, n_test=100, side=16)
    assert ds.standin and "NOT Clothing1M" in ds.provenance
    assert ds.x_train.shape == (2000, 3, 16, 16) and ds.num_classes == 14
    clean = SOURCES["clothing1m"].standin(np.random.default_rng(0), n_train=2000, n_test=100,
                                          side=16)  # fmt: skip
    assert np.array_equal(ds.y_train, clean.y_train)  # seeded
    # labels flipped at about Clothing1M's noise rate: fewer agree with the class prototype
    # (the nearest class mean of the clean test images) than the clean test labels do
    means = np.stack([ds.x_test[ds.y_test == c].mean(0) for c in np.unique(ds.y_test)])
    classes = np.unique(ds.y_test)
    nearest = classes[((ds.x_train[:, None] - means[None]) ** 2).sum((2, 3, 4)).argmin(1)]
    agree = (nearest == ds.y_train).mean()
    assert 0.5 < agree < 0.7


def test_status_says_manual_step_with_the_exact_files(tmp_path):
    src = SOURCES["clothing1m"]
    st, how = state(src, tmp_path / "clothing1m", "real")
    assert st == MANUAL
    folder, _, names = how.partition("/{")
    assert folder == str(tmp_path / "clothing1m")  # every file under it, the place said once
    listed = names.split("}")[0].split(", ")
    for f in (*KEY_FILES, "images/9/"):
        assert str(Path(f)) in listed
    assert how.count(URL) == 1

"""Clothing1M (Xiao et al., CVPR 2015): about 1M clothing images from shopping sites with noisy
labels, 14 classes, and smaller sets with clean labels; FedCorr's and DQN-Fed's Table 12 data.

The authors release it on request only (github.com/Cysu/noisy_label: ask them by email); no copy
on the Hugging Face hub or in torchvision could be verified, so the files are placed by hand in
resources/raw/clothing1m/, in the released layout (the one FedCorr's README shows):

    category_names_chn.txt  category_names_eng.txt  clean_label_kv.txt  clean_test_key_list.txt
    clean_train_key_list.txt  clean_val_key_list.txt  noisy_label_kv.txt  noisy_train_key_list.txt
    images/0/ ... images/9/   (the image folders the keys name, e.g. images/0/00/xxx.jpg)

`*_kv.txt` hold "<key> <label>" lines, `*_key_list.txt` one key a line; a key is the image's
path under the root. As FedCorr's loader: the training pool is `noisy_train_key_list.txt` with
the noisy labels of `noisy_label_kv.txt`, the test set `clean_test_key_list.txt` with the clean
labels of `clean_label_kv.txt`.

The reader is memory-bounded: key files are streamed line by line (only the labels of the keys
asked for are kept), images are decoded one at a time, resized to `side` x `side` (the release's
evaluation transform, Resize((224, 224)), at `side`) and written into one preallocated float32
array; `train_fraction` keeps a seeded share of the training keys (FedCorr's `minitrain` mode
keeps 10 %). The engine holds a run's pool in memory: 1M images at 224 px would be 600 GB of
float32, so the catalog's entries say which side and share they read. `fetch` checks that the
files are there and records the key files' SHA-256 (the images are not hashed: 1M files).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.data.base import (
    MANIFEST,
    ArrayDataset,
    FetchError,
    RemoteFile,
    Source,
    standin_images,
)
from fedbench.data.fetch import DEFAULT_TIMEOUT, by_hand, digests
from fedbench.io import write_text

URL = "https://github.com/Cysu/noisy_label (on request: email the authors, as its README says)"
KEY_FILES = (
    "category_names_chn.txt",
    "category_names_eng.txt",
    "clean_label_kv.txt",
    "clean_test_key_list.txt",
    "clean_train_key_list.txt",
    "clean_val_key_list.txt",
    "noisy_label_kv.txt",
    "noisy_train_key_list.txt",
)
IMAGE_DIRS = tuple(f"images/{i}" for i in range(10))
NUM_CLASSES = 14
# Xiao et al. estimate 61.54 % of the noisy labels correct: the stand-in flips the rest.
NOISE_RATE = 0.3846


def read_keys(path: Path) -> Iterator[str]:
    """The keys of a *_key_list.txt, one a line (blank lines skipped), streamed."""
    with open(path) as f:
        for line in f:
            key = line.strip()
            if key:
                yield key


def read_labels(path: Path, keys: set[str]) -> dict[str, int]:
    """The labels of `keys` in a *_kv.txt ("<key> <label>" lines), streamed: only those kept.
    A key missing from the file, or a label outside 0-13, is an error naming both."""
    out: dict[str, int] = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            parts = line.split()
            if not parts or parts[0] not in keys:
                continue
            if len(parts) != 2 or not parts[1].isdigit() or int(parts[1]) >= NUM_CLASSES:
                raise ValueError(f"{path}:{n}: expected '<key> <label 0-13>', got {line!r}")
            out[parts[0]] = int(parts[1])
    missing = keys - out.keys()
    if missing:
        raise ValueError(f"{path}: no label for {len(missing)} key(s), e.g. {sorted(missing)[0]}")
    return out


def read_images(root: Path, keys: list[str], side: int) -> np.ndarray:
    """The images of `keys` as float32 (N, 3, side, side) in [0, 1], decoded one at a time into
    one preallocated array (bilinear resize to side x side, RGB)."""
    from PIL import Image

    out = np.empty((len(keys), 3, side, side), dtype=np.float32)
    for i, key in enumerate(keys):
        path = root / key
        try:
            with Image.open(path) as img:
                rgb = img.convert("RGB").resize((side, side), Image.BILINEAR)
        except OSError as err:
            raise ValueError(f"clothing1m: cannot read {path} ({err})") from None
        np.divide(np.asarray(rgb, dtype=np.float32).transpose(2, 0, 1), 255.0, out=out[i])
    return out


def split(
    root: Path, key_list: str, kv: str, side: int, fraction: float = 1.0, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(x, y, keys) of one split: the keys of `key_list` (a seeded `fraction` of them, in file
    order), their labels from `kv`, their images at `side` px."""
    keys = list(read_keys(root / key_list))
    if fraction < 1.0:
        keep = np.random.default_rng(seed).choice(len(keys), int(len(keys) * fraction), False)
        keys = [keys[i] for i in np.sort(keep)]
    labels = read_labels(root / kv, set(keys))
    y = np.array([labels[k] for k in keys], dtype=np.int64)
    return read_images(root, keys, side), y, keys


class Clothing1M(Source):
    """Clothing1M: the noisy training images (noisy labels) and the clean test images, 14
    classes, read from the authors' layout (placed by hand: see the module docstring)."""

    name = "clothing1m"
    input_shape = (3, 224, 224)
    num_classes = NUM_CLASSES
    params = {"side": 224, "train_fraction": 1.0, "subset_seed": 0}
    files = [RemoteFile(f, ()) for f in KEY_FILES]

    def check_params(self, params: dict[str, Any]) -> dict[str, Any]:
        out = super().check_params(params)
        if not isinstance(out["side"], int) or out["side"] < 8:
            raise ValueError(f"clothing1m: side must be an integer >= 8, got {out['side']!r}")
        if not 0 < out["train_fraction"] <= 1:
            raise ValueError(
                f"clothing1m: train_fraction must be in (0, 1], got {out['train_fraction']!r}"
            )
        return out

    def fetch_route(self) -> str:
        return "none: the authors' release is placed by hand"

    def manual_files(self, raw_dir: str | os.PathLike) -> list[tuple[Path, str]]:
        """Each key file and image folder at its exact path, with where to ask for it."""
        raw_dir = Path(raw_dir)
        return [(raw_dir / f, URL) for f in (*KEY_FILES, *(d + "/" for d in IMAGE_DIRS))]

    def needs_manual_step(self) -> bool:
        return True

    def fetch(
        self, raw_dir: str | os.PathLike, *, timeout: float = DEFAULT_TIMEOUT, **params: Any
    ) -> dict[str, dict[str, Any]]:
        """Nothing to download: check the hand-placed files and folders are there and record
        the key files' SHA-256 in MANIFEST.json; FetchError naming each missing path."""
        self.check_params(params)
        raw_dir = Path(raw_dir)
        missing = [(p, u) for p, u in self.manual_files(raw_dir) if not p.exists()]
        if missing:
            raise FetchError(
                by_hand(
                    self.name,
                    f"the authors' release is not in {raw_dir} (no public download)",
                    missing,
                    "then run the pipeline again.",
                )
            )
        manifest = {
            f: {**digests(raw_dir / f), "origin": f"placed by hand in {raw_dir}",
                "verified_by": "unchecked"}
            for f in KEY_FILES
        }  # fmt: skip
        write_text(raw_dir / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        return manifest

    def load(self, raw_dir: str | os.PathLike, **params: Any) -> ArrayDataset:
        """The noisy training split (a seeded `train_fraction` of it) and the clean test split,
        at `side` px."""
        params = self.check_params(params)
        root = Path(raw_dir)
        for f in KEY_FILES[2:]:
            self._path(root, f)
        side, frac = params["side"], params["train_fraction"]
        x_tr, y_tr, _ = split(
            root, "noisy_train_key_list.txt", "noisy_label_kv.txt", side, frac,
            params["subset_seed"],
        )  # fmt: skip
        x_te, y_te, _ = split(root, "clean_test_key_list.txt", "clean_label_kv.txt", side)
        return ArrayDataset(
            name=self.name,
            x_train=x_tr,
            y_train=y_tr,
            x_test=x_te,
            y_test=y_te,
            num_classes=NUM_CLASSES,
            standin=False,
            provenance=(
                f"clothing1m: {root}, noisy_train_key_list.txt with noisy_label_kv.txt "
                f"({len(y_tr)} images, train_fraction {frac}, seed {params['subset_seed']}) and "
                f"clean_test_key_list.txt with clean_label_kv.txt ({len(y_te)}), RGB resized "
                f"to {side} x {side} (bilinear), pixels / 255"
            ),
        )

    def standin(
        self, rng: np.random.Generator, *, n_train: int = 2000, n_test: int = 500, **params: Any
    ) -> ArrayDataset:
        """Generated (3, side, side) images of 14 classes whose training labels are flipped to
        another class at Clothing1M's estimated noise rate (38.46 %); test labels clean."""
        params = self.check_params(params)
        shape = (3, params["side"], params["side"])
        x, y = standin_images(rng, n_train + n_test, shape, NUM_CLASSES)
        y_train = y[:n_train].copy()
        flip = rng.random(n_train) < NOISE_RATE
        y_train[flip] = (y_train[flip] + rng.integers(1, NUM_CLASSES, flip.sum())) % NUM_CLASSES
        return ArrayDataset(
            name=self.name,
            x_train=x[:n_train],
            y_train=y_train,
            x_test=x[n_train:],
            y_test=y[n_train:],
            num_classes=NUM_CLASSES,
            standin=True,
            provenance=(
                f"generated stand-in for clothing1m (NOT Clothing1M): smooth class prototypes "
                f"plus noise, shape {shape}, 14 classes, {int(flip.sum())} of {n_train} training "
                f"labels flipped to another class (rate {NOISE_RATE}), test labels clean, "
                f"n_test={n_test}, params={params}"
            ),
        )

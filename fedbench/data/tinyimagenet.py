"""TinyImageNet-200 (Stanford CS231n): 64x64 RGB JPEGs, 200 classes.

Two routes (`source`, fedbench/data/hub.py): the hub copy `zh-plus/tiny-imagenet` through
`datasets` (`hub`, the default) or CS231n's zip read straight from disk (`original`). Both give
the same arrays: classes are the sorted wnids, and each split's rows are put in one canonical
order (label, then a hash of the pixels), so a Dirichlet split of either route gives every client
the same images.
"""

from __future__ import annotations

import hashlib
import io
import os
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from fedbench.data.base import ArrayDataset, RemoteFile, image_standin
from fedbench.data.hub import HubRepo, HubRouted, load_split
from fedbench.data.transform import check_resize, resize_images

TINY_ZIP = "tiny-imagenet-200.zip"
TINY_ROOT = "tiny-imagenet-200"
SIDE = 64
# zh-plus's copy of TinyImageNet-200 (made with datasets' imagefolder from CS231n's files):
# data/train-00000-of-00001-1359597a978bc4fa.parquet (100,000 rows) and
# data/valid-00000-of-00001-70d52db3c749a935.parquet (10,000 rows), columns `image` (64x64 JPEG)
# and `label` (a ClassLabel whose names are the wnids, n01443537 first), per the repo's file
# tree at this revision, its dataset viewer and its dataset_infos.json. No test split (CS231n's
# is unlabelled).
TINY_HUB = HubRepo("zh-plus/tiny-imagenet", "b427d143d5e9bf39d5132c552063f3c5ba3facd6")
HUB_NPZ = "tinyimagenet-hub.npz"
HUB_SPLITS = ("train", "valid")


def decode_rgb8(jpeg: bytes, what: str) -> np.ndarray:
    """One image as uint8 (3, 64, 64); greyscale images are repeated over RGB."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(jpeg)) as img:
            arr = np.asarray(img.convert("RGB"), dtype=np.uint8)
    except OSError as err:
        raise ValueError(f"{what}: cannot decode ({err})") from None
    return _chw(arr, what)


def _chw(arr: np.ndarray, what: str) -> np.ndarray:
    if arr.shape != (SIDE, SIDE, 3):
        raise ValueError(f"{what}: image is {arr.shape[:2]}, expected {SIDE}x{SIDE}")
    return arr.transpose(2, 0, 1)


def _stack(z: zipfile.ZipFile, members: list[str]) -> np.ndarray:
    out = np.empty((len(members), 3, SIDE, SIDE), dtype=np.uint8)
    for i, m in enumerate(members):
        out[i] = decode_rgb8(z.read(m), m)
    return out


def canonical_order(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Row order by label, then by a hash of the pixels: the same for any order of the same
    images (identical images are interchangeable)."""
    digests = np.array([hashlib.blake2b(row.tobytes(), digest_size=16).digest() for row in x])
    return np.lexsort((digests, y)) if len(y) else np.zeros(0, dtype=np.int64)


def read_tinyimagenet(
    path: Path,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """(x_train, y_train, x_val, y_val, wnids) from the zip, uint8 (N, 3, 64, 64) in the zip's
    member order; classes = sorted wnids.

    Layout: `wnids.txt`; `train/<wnid>/images/*.JPEG`; `val/images/*.JPEG` labelled by
    `val/val_annotations.txt` (file, wnid, box, tab-separated). The unlabelled test split is
    not read. Class k is the k-th wnid in sorted order, as torchvision's ImageFolder numbers them.
    """
    try:
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
            wnids = sorted(z.read(f"{TINY_ROOT}/wnids.txt").decode().split())
            index = {w: k for k, w in enumerate(wnids)}
            train, train_labels = [], []
            for name in sorted(names):
                parts = PurePosixPath(name).parts
                if (
                    len(parts) == 5
                    and parts[1] == "train"
                    and parts[3] == "images"
                    and name.lower().endswith(".jpeg")
                ):
                    if parts[2] not in index:
                        raise ValueError(f"{path}: {name} has a class missing from wnids.txt")
                    train.append(name)
                    train_labels.append(index[parts[2]])
            val, val_labels = [], []
            notes = z.read(f"{TINY_ROOT}/val/val_annotations.txt").decode()
            for row in sorted(line.split("\t") for line in notes.splitlines() if line.strip()):
                member = f"{TINY_ROOT}/val/images/{row[0]}"
                if member not in names or len(row) < 2 or row[1] not in index:
                    raise ValueError(f"{path}: bad val_annotations.txt row {row!r}")
                val.append(member)
                val_labels.append(index[row[1]])
            x_train, x_val = _stack(z, train), _stack(z, val)
    except (zipfile.BadZipFile, OSError, KeyError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not a readable TinyImageNet zip ({err})") from None
    return (
        x_train,
        np.asarray(train_labels, dtype=np.int64),
        x_val,
        np.asarray(val_labels, dtype=np.int64),
        wnids,
    )


def hub_split(ds: Any, split: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """One split of the hub copy -> uint8 (N, 3, 64, 64), labels as sorted-wnid classes (the
    original route's), and the sorted wnids. The copy's label ids are mapped by their names, so
    the ClassLabel's own order does not matter; images are read as stored (`decode=False`) and
    decoded by `decode_rgb8`, as the zip's (`datasets` would also apply EXIF orientation)."""
    import datasets  # Hugging Face's library: imported only to fetch

    feature = ds.features.get("label")
    names = list(getattr(feature, "names", None) or [])
    if not names or any(
        not (isinstance(n, str) and n[:1] == "n" and n[1:].isdigit()) for n in names
    ):
        raise ValueError(
            f"tinyimagenet: the hub copy's {split!r} label column must be a ClassLabel named by "
            f"wnids (n01443537, ...), got {feature!r}"
        )
    wnids = sorted(names)
    to_sorted = np.array([wnids.index(n) for n in names], dtype=np.int64)
    xs, ys = [], []
    for batch in ds.cast_column("image", datasets.Image(decode=False)).iter(batch_size=4096):
        xs += [
            decode_rgb8(im["bytes"], f"hub {split} row {len(xs) + i}")
            for i, im in enumerate(batch["image"])
        ]
        ys += batch["label"]
    x = np.stack(xs) if xs else np.zeros((0, 3, SIDE, SIDE), dtype=np.uint8)
    return x, to_sorted[np.asarray(ys, dtype=np.int64)], wnids


def _pixels(x: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """x[rows] / 255 as float32, a chunk at a time (no second full copy of x)."""
    out = np.empty((len(rows), *x.shape[1:]), dtype=np.float32)
    for at in range(0, len(rows), 4096):
        out[at : at + 4096] = np.divide(
            x[rows[at : at + 4096]], np.float32(255.0), dtype=np.float32
        )
    return out


class TinyImageNet(HubRouted):
    """TinyImageNet-200: 100,000 training and 10,000 validation images (the test set here).

    Hub (`source: hub`, the default): `zh-plus/tiny-imagenet` (TINY_HUB) through `datasets`,
    converted once to tinyimagenet-hub.npz (uint8, 1.4 GB). The default because it is the one a
    new machine most likely gets: the hub's CDN, resumable, through the user's HF cache and any
    HF_ENDPOINT mirror, and 160 MB instead of 248 MB; the zip comes over plain http from a
    course server. Original (`source: original`): CS231n's zip; the MD5 is the one
    torchvision-style loaders in many projects (e.g. Avalanche) cite for it (248,100,043 bytes).

    The routes list their images in different orders (the copy's rows carry no file names), and
    a Dirichlet partition deals each class's rows in row order; so both routes put each split in
    `canonical_order` (label, then pixel hash) and then give the same arrays, provided the copy
    holds the zip's images (imagefolder keeps each JPEG's bytes; a test shows the routes agree
    on a fixture written in both formats; the real copy was not compared to the real zip here).
    Pixels are /255 only: SuPerFed's augmentation and ImageNet normalisation (spec 4.6) are
    training-time transforms, not part of the data. The full set takes about 5.4 GB as float32.
    """

    name = "tinyimagenet"
    input_shape = (3, SIDE, SIDE)
    num_classes = 200
    params = {"source": "hub", "resize": None}
    hub = TINY_HUB
    hub_file = HUB_NPZ
    original_files = [
        RemoteFile(
            TINY_ZIP,
            ("http://cs231n.stanford.edu/" + TINY_ZIP,),
            md5="90528d7ca1a48142e341f4ef8d21d0de",
        )
    ]

    def convert_hub(self, raw_dir: Path) -> tuple[dict[str, np.ndarray], str]:
        """The hub copy's train and valid splits as uint8 arrays with sorted-wnid labels."""
        out: dict[str, np.ndarray] = {}
        origins, wnids = [], None
        for split, key in zip(HUB_SPLITS, ("train", "test"), strict=True):
            ds, origin = load_split(self.name, self.hub, split, raw_dir, "CS231n's zip")
            x, y, names = hub_split(ds, split)
            if wnids is not None and names != wnids:
                raise ValueError("tinyimagenet: the hub copy's splits name different wnids")
            wnids = names
            out[f"x_{key}"], out[f"y_{key}"] = x, y
            origins.append(origin)
        out["wnids"] = np.asarray(wnids, dtype=str)
        return out, "; ".join(origins)

    def load(self, raw_dir: str | os.PathLike, **params: Any) -> ArrayDataset:
        """Train images and the labelled val images (as the test set) of the route (`source`),
        each split in canonical order."""
        params = self.check_params(params)
        side = self._side(params)
        if params["source"] == "hub":
            path = self._path(raw_dir, HUB_NPZ)
            with np.load(path) as z:
                x_train, y_train = z["x_train"], z["y_train"]
                x_test, y_test, wnids = z["x_test"], z["y_test"], z["wnids"].tolist()
            what = f"source hub, {self.hub.repo_id}@{self.hub.revision} through datasets, {path}"
        else:
            path = self._path(raw_dir, TINY_ZIP)
            x_train, y_train, x_test, y_test, wnids = read_tinyimagenet(path)
            what = f"source original, {path}"
        train, test = canonical_order(x_train, y_train), canonical_order(x_test, y_test)
        x_tr, x_te = _pixels(x_train, train), _pixels(x_test, test)
        if side != SIDE:
            x_tr, x_te = resize_images(x_tr, side), resize_images(x_te, side)
            what += f"; resized to {side} x {side}"
        return ArrayDataset(
            name=self.name,
            x_train=x_tr,
            y_train=y_train[train],
            x_test=x_te,
            y_test=y_test[test],
            num_classes=self.num_classes,
            standin=False,
            provenance=(
                f"tinyimagenet: {what}; {len(wnids)} wnids (sorted), {len(y_train)} train, "
                f"{len(y_test)} val images as the test set, each split by label then pixel "
                f"hash; pixels / 255"
            ),
        )

    def standin(
        self, rng: np.random.Generator, *, n_train: int = 2000, n_test: int = 500, **params: Any
    ) -> ArrayDataset:
        """Generated 3x64x64 images (3 x resize x resize with `resize`) with 200 classes."""
        params = self.check_params(params)
        shape = (3, self._side(params), self._side(params))
        return image_standin(self, rng, shape, self.num_classes, n_train, n_test, params)

    def _side(self, params: dict[str, Any]) -> int:
        """The image side the parameters ask for (`resize`, else the native 64)."""
        check_resize(self.name, params["resize"], (SIDE, SIDE))
        return params["resize"] or SIDE

"""TinyImageNet-200 (Stanford CS231n): 64x64 RGB JPEGs, 200 classes, read straight from the zip."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from fedbench.data.base import ArrayDataset, RemoteFile, Source, image_standin

TINY_ZIP = "tiny-imagenet-200.zip"
TINY_ROOT = "tiny-imagenet-200"
SIDE = 64


def decode_rgb(jpeg: bytes, what: str) -> np.ndarray:
    """One image as float32 (3, 64, 64) in [0, 1]; greyscale images are repeated over RGB."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(jpeg)) as img:
            arr = np.asarray(img.convert("RGB"), dtype=np.uint8)
    except OSError as err:
        raise ValueError(f"{what}: cannot decode ({err})") from None
    if arr.shape != (SIDE, SIDE, 3):
        raise ValueError(f"{what}: image is {arr.shape[:2]}, expected {SIDE}x{SIDE}")
    return np.divide(arr.transpose(2, 0, 1), np.float32(255.0), dtype=np.float32)


def _stack(z: zipfile.ZipFile, members: list[str]) -> np.ndarray:
    out = np.empty((len(members), 3, SIDE, SIDE), dtype=np.float32)
    for i, m in enumerate(members):
        out[i] = decode_rgb(z.read(m), m)
    return out


def read_tinyimagenet(
    path: Path,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """(x_train, y_train, x_val, y_val, wnids) from the zip; classes = sorted wnids.

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


class TinyImageNet(Source):
    """TinyImageNet-200: 100,000 training and 10,000 validation images (the test set here).

    The MD5 is the one torchvision-style loaders in many projects (e.g. Avalanche) cite for
    the CS231n zip (248,100,043 bytes). Pixels are /255 only: SuPerFed's augmentation and
    ImageNet normalisation (spec 4.6) are training-time transforms, not part of the data.
    The full set takes about 5.4 GB as float32.
    """

    name = "tinyimagenet"
    input_shape = (3, SIDE, SIDE)
    num_classes = 200
    files = [
        RemoteFile(
            TINY_ZIP,
            ("http://cs231n.stanford.edu/" + TINY_ZIP,),
            md5="90528d7ca1a48142e341f4ef8d21d0de",
        )
    ]

    def load(self, raw_dir: str | os.PathLike, **params: Any) -> ArrayDataset:
        """Train images and the labelled val images (as the test set) from the zip in raw_dir."""
        self.check_params(params)
        path = self._path(raw_dir, TINY_ZIP)
        x_train, y_train, x_test, y_test, wnids = read_tinyimagenet(path)
        return ArrayDataset(
            name=self.name,
            x_train=x_train,
            y_train=y_train,
            x_test=x_test,
            y_test=y_test,
            num_classes=self.num_classes,
            standin=False,
            provenance=(
                f"tinyimagenet: {path}; {len(wnids)} wnids (sorted), {len(y_train)} train, "
                f"{len(y_test)} val images as the test set; pixels / 255"
            ),
        )

    def standin(
        self, rng: np.random.Generator, *, n_train: int = 2000, n_test: int = 500, **params: Any
    ) -> ArrayDataset:
        """Generated 3x64x64 images with 200 classes."""
        params = self.check_params(params)
        return image_standin(self, rng, self.input_shape, self.num_classes, n_train, n_test, params)

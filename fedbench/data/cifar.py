"""CIFAR-10 and CIFAR-100: the python-version tarballs, read without torchvision."""

from __future__ import annotations

import os
import pickle
import tarfile
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.data.base import ArrayDataset, RemoteFile, Source, image_standin
from fedbench.data.transform import check_resize, resize_images

CIFAR_URL = "https://www.cs.toronto.edu/~kriz/"


def read_batches(tar_path: Path, members: dict[str, str]) -> dict[str, dict[bytes, Any]]:
    """Unpickle the named batches (by base name) out of a CIFAR tarball."""
    found: dict[str, dict[bytes, Any]] = {}
    try:
        with tarfile.open(tar_path, "r:*") as tar:
            for m in tar.getmembers():
                base = m.name.rsplit("/", 1)[-1]
                if m.isfile() and base in members:
                    f = tar.extractfile(m)
                    # The tarball was checksum-verified on fetch; its batches are pickles by design.
                    found[base] = pickle.load(f, encoding="bytes")
    except (tarfile.TarError, OSError, EOFError, pickle.UnpicklingError) as err:
        raise ValueError(f"{tar_path}: cannot read CIFAR batches ({err})") from None
    missing = sorted(set(members) - set(found))
    if missing:
        raise ValueError(f"{tar_path}: batches {missing} not found in the tarball")
    return found


class CifarSource(Source):
    """32x32 RGB images from one of the CIFAR python tarballs."""

    input_shape = (3, 32, 32)
    params = {"resize": None}
    tarball: str
    train_batches: tuple[str, ...]
    test_batches: tuple[str, ...]

    def label_key(self, params: dict[str, Any]) -> bytes:
        """Key of the label list inside a batch."""
        return b"labels"

    def classes(self, params: dict[str, Any]) -> int:
        """Number of classes under these parameters."""
        return self.num_classes

    def _shape(self, params: dict[str, Any]) -> tuple[int, int, int]:
        r = params["resize"]
        check_resize(self.name, r, (32, 32))
        return (3, r, r) if r else (3, 32, 32)

    def load(self, raw_dir: str | os.PathLike, **params: Any) -> ArrayDataset:
        """Train and test arrays from the tarball, pixels in [0, 1], optionally resized."""
        params = self.check_params(params)
        shape = self._shape(params)
        path = self._path(raw_dir, self.tarball)
        batches = read_batches(path, dict.fromkeys(self.train_batches + self.test_batches, ""))
        key = self.label_key(params)

        def stack(names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
            x = np.concatenate([np.asarray(batches[n][b"data"], dtype=np.uint8) for n in names])
            y = np.concatenate([np.asarray(batches[n][key], dtype=np.int64) for n in names])
            x = np.divide(x.reshape(-1, 3, 32, 32), np.float32(255.0), dtype=np.float32)
            if shape[1:] != (32, 32):
                x = resize_images(x, shape[1])
            return x, y

        x_train, y_train = stack(self.train_batches)
        x_test, y_test = stack(self.test_batches)
        return ArrayDataset(
            name=self.name,
            x_train=x_train,
            y_train=y_train,
            x_test=x_test,
            y_test=y_test,
            num_classes=self.classes(params),
            standin=False,
            provenance=f"{self.name}: {path}, params={params}",
        )

    def standin(
        self, rng: np.random.Generator, *, n_train: int = 2000, n_test: int = 500, **params: Any
    ) -> ArrayDataset:
        """Generated RGB images of the (resized) CIFAR shape and class count."""
        params = self.check_params(params)
        shape = self._shape(params)
        return image_standin(self, rng, shape, self.classes(params), n_train, n_test, params)


class Cifar10(CifarSource):
    """CIFAR-10 (Krizhevsky, 2009): 50,000 + 10,000 images, 10 classes."""

    name = "cifar10"
    num_classes = 10
    tarball = "cifar-10-python.tar.gz"
    files = [RemoteFile(tarball, (CIFAR_URL + tarball,), md5="c58f30108f718f92721af3b95e74349a")]
    train_batches = tuple(f"data_batch_{i}" for i in range(1, 6))
    test_batches = ("test_batch",)


class Cifar100(CifarSource):
    """CIFAR-100 (Krizhevsky, 2009): 50,000 + 10,000 images, 100 fine or 20 coarse classes."""

    name = "cifar100"
    num_classes = 100
    params = {"resize": None, "label": "fine"}
    tarball = "cifar-100-python.tar.gz"
    files = [RemoteFile(tarball, (CIFAR_URL + tarball,), md5="eb9058c3a382ffc7106e4002c42a8d85")]
    train_batches = ("train",)
    test_batches = ("test",)

    def label_key(self, params: dict[str, Any]) -> bytes:
        """b"fine_labels" or b"coarse_labels"."""
        if params["label"] not in ("fine", "coarse"):
            raise ValueError(f"cifar100: label must be 'fine' or 'coarse', got {params['label']!r}")
        return b"fine_labels" if params["label"] == "fine" else b"coarse_labels"

    def classes(self, params: dict[str, Any]) -> int:
        """100 fine or 20 coarse classes."""
        self.label_key(params)
        return 100 if params["label"] == "fine" else 20

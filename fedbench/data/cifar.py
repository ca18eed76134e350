"""CIFAR-10 and CIFAR-100 through torchvision.datasets (its download, its per-batch MD5s, its
reader); fedbench keeps the conversion to float arrays, `resize` and CIFAR-100's `label`."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.data.base import ArrayDataset, RemoteFile, TorchvisionSource, image_standin
from fedbench.data.transform import check_resize, resize_images


class CifarSource(TorchvisionSource):
    """32x32 RGB images: torchvision's CIFAR dataset objects (raw_dir/{folder}/, unpacked from
    the python-version tarball it downloads to raw_dir/{tarball})."""

    input_shape = (3, 32, 32)
    params = {"resize": None}
    verified_by = "torchvision: the tarball's MD5 on download, each batch's MD5 on every read"
    folder: str
    batches: tuple[str, ...]  # torchvision's train_list, test_list and meta file, in its folder

    def __init__(self) -> None:
        self.files = [RemoteFile(f"{self.folder}/{name}", ()) for name in self.batches]

    def label_key(self, params: dict[str, Any]) -> str:
        """Key of the label list inside a batch."""
        return "labels"

    def classes(self, params: dict[str, Any]) -> int:
        """Number of classes under these parameters."""
        return self.num_classes

    def _shape(self, params: dict[str, Any]) -> tuple[int, int, int]:
        r = params["resize"]
        check_resize(self.name, r, (32, 32))
        return (3, r, r) if r else (3, 32, 32)

    def labels(self, raw_dir: str | os.PathLike, ds: Any, params: dict[str, Any]) -> list[int]:
        """The split's labels as torchvision reads them."""
        return ds.targets

    def load(self, raw_dir: str | os.PathLike, **params: Any) -> ArrayDataset:
        """Train and test arrays from torchvision's dataset objects, pixels in [0, 1] (HWC back
        to CHW), optionally resized."""
        params = self.check_params(params)
        shape = self._shape(params)
        self.label_key(params)

        def split(train: bool) -> tuple[np.ndarray, np.ndarray]:
            ds = self.open(raw_dir, train=train)
            x = np.divide(ds.data.transpose(0, 3, 1, 2), np.float32(255.0), dtype=np.float32)
            y = np.asarray(self.labels(raw_dir, ds, params), dtype=np.int64)
            if shape[1:] != (32, 32):
                x = resize_images(x, shape[1])
            return x, y

        (x_train, y_train), (x_test, y_test) = split(True), split(False)
        return ArrayDataset(
            name=self.name,
            x_train=x_train,
            y_train=y_train,
            x_test=x_test,
            y_test=y_test,
            num_classes=self.classes(params),
            standin=False,
            provenance=(
                f"{self.name}: torchvision.datasets.{self.tv_class} in {Path(raw_dir)}, "
                f"params={params}"
            ),
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
    tv_class = "CIFAR10"
    folder = "cifar-10-batches-py"
    batches = (*(f"data_batch_{i}" for i in range(1, 6)), "test_batch", "batches.meta")
    archives = (
        ("cifar-10-python.tar.gz", "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"),
    )


class Cifar100(CifarSource):
    """CIFAR-100 (Krizhevsky, 2009): 50,000 + 10,000 images, 100 fine or 20 coarse classes.

    torchvision reads the fine labels only; `label: coarse` reads the `coarse_labels` list from
    the same pickled batches, after torchvision has checked their MD5 (`open`).
    """

    name = "cifar100"
    num_classes = 100
    params = {"resize": None, "label": "fine"}
    tv_class = "CIFAR100"
    folder = "cifar-100-python"
    batches = ("train", "test", "meta")
    archives = (
        ("cifar-100-python.tar.gz", "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz"),
    )

    def label_key(self, params: dict[str, Any]) -> str:
        """ "fine_labels" or "coarse_labels"."""
        if params["label"] not in ("fine", "coarse"):
            raise ValueError(f"cifar100: label must be 'fine' or 'coarse', got {params['label']!r}")
        return "fine_labels" if params["label"] == "fine" else "coarse_labels"

    def classes(self, params: dict[str, Any]) -> int:
        """100 fine or 20 coarse classes."""
        self.label_key(params)
        return 100 if params["label"] == "fine" else 20

    def labels(self, raw_dir: str | os.PathLike, ds: Any, params: dict[str, Any]) -> list[int]:
        """torchvision's (fine) labels, or the coarse ones from its verified batch file."""
        if params["label"] == "fine":
            return ds.targets
        path = Path(raw_dir) / self.folder / ("train" if ds.train else "test")
        with open(path, "rb") as f:
            # torchvision has just checked this batch's MD5; CIFAR's batches are pickles.
            return pickle.load(f, encoding="latin1")["coarse_labels"]

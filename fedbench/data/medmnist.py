"""MedMNIST+ (Yang et al., 2023; the `medmnist` package, v3): DermaMNIST and OrganCMNIST from the
package's .npz files, at 28, 64, 128 or 224 px (`size`; FedEvg reads the native 64 px files).

One source per subset (`dermamnist`, `organcmnist`) rather than one source with a `flag`: a
source's class count and channels are attributes that config validation reads before any data
exists (`Source.num_classes`, `input_shape`), and each subset gets its own raw folder and MANIFEST
(resources/raw/{source}/).

File names, Zenodo URLs, MD5s and split sizes are those of medmnist 3.0.2's `INFO`, pinned here as
the other sources pin theirs (tests/data/test_medmnist.py checks them against the installed
package). fedbench does not import the package: importing it loads torch, pandas and scikit-learn
and creates ~/.medmnist, and its loader is an np.load of the same keys. The package's own
checksummed download is one of the ways to place a file that the missing-file error names.
"""

from __future__ import annotations

import copy
import os
import zipfile
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from fedbench.data.base import ArrayDataset, RemoteFile, Source, image_standin
from fedbench.data.fetch import DEFAULT_TIMEOUT

SIZES = (28, 64, 128, 224)
DEFAULT_SIZE = 64  # FedEvg: commands/64/fedevg.sh passes --resize 64, the package's size=64
ZENODO = "https://zenodo.org/records/10519652/files/"
SPLITS = ("train", "test")  # the validation split is unused, as in the FedEvg release


def npz_name(flag: str, size: int) -> str:
    """The package's file name: `{flag}.npz` at 28 px, `{flag}_{size}.npz` otherwise."""
    return f"{flag}.npz" if size == 28 else f"{flag}_{size}.npz"


class MedMNIST(Source):
    """One 2D MedMNIST+ subset: uint8 images and (N, 1) labels per split in one .npz."""

    flag: ClassVar[str]
    python_class: ClassVar[str]  # the package's dataset class (its download, in the error)
    channels: ClassVar[int]
    md5: ClassVar[dict[int, str]]
    n_samples: ClassVar[dict[str, int]]  # the official split sizes (the package's INFO)
    mirrors: ClassVar[tuple[str, ...]] = (ZENODO,)
    params = {"size": DEFAULT_SIZE}

    def __init__(self) -> None:
        # The default size's file: what the workflow's fetch rule (which passes no params) gets.
        self.files = [self.remote_file(DEFAULT_SIZE)]

    def remote_file(self, size: int) -> RemoteFile:
        """The .npz of one size, with the package's URL and MD5."""
        name = npz_name(self.flag, size)
        return RemoteFile(
            name, tuple(f"{m}{name}?download=1" for m in self.mirrors), md5=self.md5[size]
        )

    def check_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """Defaults filled in; an unknown name or a bad `size` raises ValueError."""
        params = super().check_params(params)
        size = params["size"]
        if not isinstance(size, int) or isinstance(size, bool) or size not in SIZES:
            raise ValueError(
                f"{self.name}: size must be one of {list(SIZES)} (the MedMNIST+ files; FedEvg "
                f"uses 64), got {size!r}"
            )
        return params

    def shape(self, params: dict[str, Any]) -> tuple[int, int, int]:
        """Shape of one image under these (checked) parameters."""
        return (self.channels, params["size"], params["size"])

    def fetch(
        self, raw_dir: str | os.PathLike, *, timeout: float = DEFAULT_TIMEOUT, **params: Any
    ) -> dict[str, dict[str, Any]]:
        """Make raw_dir hold the verified .npz of the requested size (default 64) only."""
        size = self.check_params(params)["size"]
        sized = copy.copy(self)  # the base fetch walks `files`: give it this size's file alone
        sized.files = [self.remote_file(size)]
        return Source.fetch(sized, raw_dir, timeout=timeout, **params)

    def npz_path(self, raw_dir: str | os.PathLike, size: int) -> Path:
        """raw_dir's .npz of this size, or FileNotFoundError naming it and how to fetch it."""
        path = Path(raw_dir) / npz_name(self.flag, size)
        if path.is_file():
            return path
        rf, folder = self.remote_file(size), str(path.parent)
        raise FileNotFoundError(
            f"{self.name}: {path.name} (MedMNIST+ {self.flag} at {size} px) is missing from "
            f"{folder}; loading never downloads. Fetch it (from Zenodo, MD5-checked) with the "
            "fetch step:\n"
            f"  python -c \"from fedbench.data import SOURCES; SOURCES['{self.name}']"
            f'.fetch({folder!r}, size={size})"\n'
            "or with the medmnist package's own checksummed download:\n"
            f'  mkdir -p {folder!r} && python -c "import medmnist; medmnist.{self.python_class}'
            f"(split='train', size={size}, root={folder!r}, download=True)\"\n"
            f"or download {rf.urls[0]} by hand to {path} (md5 {rf.md5})."
        )

    def _images(self, x: np.ndarray, size: int, what: str) -> np.ndarray:
        """uint8 (N, H, W) or (N, H, W, 3) -> float32 (N, C, H, W) in [0, 1]."""
        per_image = (size, size) if self.channels == 1 else (size, size, self.channels)
        if x.dtype != np.uint8 or x.shape[1:] != per_image:
            raise ValueError(
                f"{what}: expected uint8 images of shape (N, {', '.join(map(str, per_image))}), "
                f"got {x.dtype} {x.shape}"
            )
        x = x[:, None] if self.channels == 1 else np.ascontiguousarray(x.transpose(0, 3, 1, 2))
        return np.divide(x, np.float32(255.0), dtype=np.float32)

    def _labels(self, y: np.ndarray, n: int, what: str) -> np.ndarray:
        """(N, 1) or (N,) integer labels -> int64 (N,), each in [0, L)."""
        if y.shape not in ((n, 1), (n,)) or not np.issubdtype(y.dtype, np.integer):
            raise ValueError(f"{what}: expected {n} integer labels, got {y.dtype} {y.shape}")
        y = y.reshape(-1).astype(np.int64)
        if n and (y.min() < 0 or y.max() >= self.num_classes):
            raise ValueError(f"{what}: labels outside [0, {self.num_classes})")
        return y

    def load(self, raw_dir: str | os.PathLike, **params: Any) -> ArrayDataset:
        """The train and test splits of the package's .npz, pixels / 255, labels flattened."""
        params = self.check_params(params)
        size = params["size"]
        path = self.npz_path(raw_dir, size)
        keys = [f"{split}_{kind}" for split in SPLITS for kind in ("images", "labels")]
        try:
            npz = np.load(path, allow_pickle=False)
            if not isinstance(npz, np.lib.npyio.NpzFile):
                raise ValueError("a single array, not an .npz archive")
            with npz:
                arrays = {k: npz[k] for k in keys if k in npz.files}
                found = sorted(npz.files)
        except (OSError, EOFError, ValueError, zipfile.BadZipFile) as err:
            raise ValueError(f"{path}: not a readable MedMNIST .npz ({err})") from None
        missing = [k for k in keys if k not in arrays]
        if missing:
            raise ValueError(f"{path}: keys {missing} missing (has {found})")
        out: dict[str, np.ndarray] = {}
        for split in SPLITS:
            x = self._images(arrays[f"{split}_images"], size, f"{path} {split}_images")
            out[f"x_{split}"] = x
            out[f"y_{split}"] = self._labels(arrays[f"{split}_labels"], len(x), f"{path} {split}")
        counts = f"{len(out['y_train'])} train / {len(out['y_test'])} test"
        official = f"{self.n_samples['train']} / {self.n_samples['test']}"
        return ArrayDataset(
            name=self.name,
            num_classes=self.num_classes,
            standin=False,
            provenance=(
                f"{self.name}: {path} (medmnist's {self.flag} at its native {size}x{size}, not "
                f"resized); {counts} images (official {official}; val unused); pixels / 255"
            ),
            **out,
        )

    def standin(
        self,
        rng: np.random.Generator,
        *,
        n_train: int | None = None,
        n_test: int | None = None,
        **params: Any,
    ) -> ArrayDataset:
        """Generated C x size x size images with L classes, by default the official split sizes."""
        params = self.check_params(params)
        n_train = self.n_samples["train"] if n_train is None else n_train
        n_test = self.n_samples["test"] if n_test is None else n_test
        return image_standin(
            self, rng, self.shape(params), self.num_classes, n_train, n_test, params
        )


class DermaMNIST(MedMNIST):
    """DermaMNIST: HAM10000 dermatoscopic images, RGB, 7 classes (7,007 / 1,003 / 2,005)."""

    name = "dermamnist"
    flag = "dermamnist"
    python_class = "DermaMNIST"
    channels = 3
    input_shape = (3, DEFAULT_SIZE, DEFAULT_SIZE)
    num_classes = 7
    n_samples = {"train": 7007, "val": 1003, "test": 2005}
    md5 = {
        28: "0744692d530f8e62ec473284d019b0c7",
        64: "b70a2f5635c6199aeaa28c31d7202e1f",
        128: "2defd784463fa5243564e855ed717de1",
        224: "8974907d8e169bef5f5b96bc506ae45d",
    }


class OrganCMNIST(MedMNIST):
    """OrganCMNIST: coronal abdominal CT crops (LiTS), grey, 11 organs (12,975 / 2,392 / 8,216)."""

    name = "organcmnist"
    flag = "organcmnist"
    python_class = "OrganCMNIST"
    channels = 1
    input_shape = (1, DEFAULT_SIZE, DEFAULT_SIZE)
    num_classes = 11
    n_samples = {"train": 12975, "val": 2392, "test": 8216}
    md5 = {
        28: "b9ceb9546e10131b32923c5bbeaea2b1",
        64: "3ce34a8724ea6f548e6db4744d03b6a9",
        128: "773c1f009daa3fe5d9a2a201b2a7ed94",
        224: "050f5e875dc056f6768abf94ec9995d1",
    }

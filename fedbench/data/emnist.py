"""EMNIST (Cohen et al., 2017, arXiv:1702.05373) through torchvision.datasets.EMNIST: its
download (one zip of every split, its MD5), its unpacking into {root}/EMNIST/raw/ and its IDX
reader; fedbench keeps the orientation fix, the choice of characters and `resize`.

Parameters:

- `split` (default `byclass`): one of torchvision's six. ByClass holds all of NIST SD19 with the
  62 classes apart (0-9, A-Z, a-z: labels 0-9, 10-35, 36-61). ByMerge and Balanced merge the 15
  letters whose capitals look like their lower case (c i j k l m o p s u v w x y z) into the
  capital's class, so lower-case c, i and j have no class of their own there; Letters merges
  every letter's two cases into one of 26 classes (torchvision labels them 1-26, 0 unused).
  So only ByClass gives the lower-case 'a'-'j' of DQN-Fed's FEMNIST-skewed setup (labels 36-45).
- `characters` (null = every class of the split, or a string of distinct class names of the
  split, e.g. "abcdefghij"): keep those classes, in train and test, relabelled 0, 1, ... in the
  string's order.
- `resize` (null = the native 28 x 28, or a positive int).

The EMNIST files store each image transposed (the NIST conversion writes columns first;
torchvision reads them as they are, pytorch/vision#8783): `load` transposes every image back,
so letters stand upright as in LEAF's FEMNIST.
"""

from __future__ import annotations

import os
import string
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.data.base import ArrayDataset, RemoteFile, TorchvisionSource, image_standin
from fedbench.data.mnist import keep_classes
from fedbench.data.transform import check_resize, resize_images

SPLITS = ("byclass", "bymerge", "balanced", "letters", "digits", "mnist")
# Lower-case letters that ByMerge / Balanced fold into their capital (the EMNIST paper's merge).
MERGED = set("cijklmopsuvwxyz")
# Each split's class names in label order, as torchvision lists them (a test checks they agree:
# read here so that checking a catalog entry does not import torchvision).
CLASSES = {
    "byclass": list(string.digits + string.ascii_uppercase + string.ascii_lowercase),
    "bymerge": sorted(set(string.digits + string.ascii_letters) - MERGED),
    "balanced": sorted(set(string.digits + string.ascii_letters) - MERGED),
    "letters": ["N/A", *string.ascii_lowercase],
    "digits": list(string.digits),
    "mnist": list(string.digits),
}
URL = "https://biometrics.nist.gov/cs_links/EMNIST/gzip.zip"  # torchvision's EMNIST.url
RAW = "EMNIST/raw/"


def raw_files(split: str) -> list[str]:
    """The four files torchvision reads for one split, relative to its root."""
    return [
        f"{RAW}emnist-{split}-{part}-{kind}"
        for part in ("train", "test")
        for kind in ("images-idx3-ubyte", "labels-idx1-ubyte")
    ]


class EMNIST(TorchvisionSource):
    """EMNIST: NIST SD19's handwritten digits and letters as 28 x 28 grey images (814,255 in
    ByClass), read by torchvision.datasets.EMNIST.

    `files` are the 24 unpacked files of all six splits (torchvision's download unpacks the whole
    zip); the by-hand step is that zip, placed where torchvision looks for it.
    """

    name = "emnist"
    tv_class = "EMNIST"
    input_shape = (1, 28, 28)
    num_classes = len(CLASSES["byclass"])  # under the default split, every class kept
    params = {"split": "byclass", "characters": None, "resize": None}
    verified_by = (
        "torchvision: the zip's MD5 when it downloads it (a zip placed by hand too); the unpacked "
        "files' SHA-256 is recorded here"
    )
    archives = ((RAW + "gzip.zip", URL),)

    def __init__(self) -> None:
        self.files = [RemoteFile(path, ()) for split in SPLITS for path in raw_files(split)]

    def check_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """Defaults filled in; an unknown name, split, character or resize raises ValueError
        naming the key and what it takes."""
        params = super().check_params(params)
        split, chars = params["split"], params["characters"]
        if split not in SPLITS:
            raise ValueError(f"{self.name}: split must be one of {list(SPLITS)}, got {split!r}")
        names = CLASSES[split]
        if chars is not None and not (
            isinstance(chars, str)
            and chars
            and len(set(chars)) == len(chars)
            and all(c in names for c in chars)
        ):
            raise ValueError(
                f"{self.name}: characters must be null (every class) or a string of distinct "
                f"class names of split {split!r} ({''.join(n for n in names if len(n) == 1)}), "
                f'e.g. "abcdefghij" (lower case apart only in split byclass); got {chars!r}'
            )
        check_resize(self.name, params["resize"], self.input_shape[1:])
        return params

    def labels(self, params: dict[str, Any]) -> list[int] | None:
        """The split's labels of the kept characters, in their order (None: every class)."""
        chars = params["characters"]
        return None if chars is None else [CLASSES[params["split"]].index(c) for c in chars]

    def classes(self, params: dict[str, Any]) -> int:
        """Number of classes under these (checked) parameters."""
        kept = self.labels(params)
        return len(CLASSES[params["split"]]) if kept is None else len(kept)

    def shape(self, params: dict[str, Any]) -> tuple[int, int, int]:
        """Shape of one image under these (checked) parameters."""
        side = params["resize"]
        return (1, side, side) if side else self.input_shape

    def open(
        self,
        raw_dir: str | os.PathLike,
        *,
        train: bool,
        download: bool = False,
        split: str = "byclass",
    ) -> Any:
        """torchvision's EMNIST object for one split. On download, it is asked for a file that is
        missing (torchvision downloads only when the file it is asked for is absent), so one
        fetch restores all 24 files from the zip."""
        if download:
            for path in (f.filename for f in self.files):
                if not (Path(raw_dir) / path).is_file():
                    split, part = path[len(RAW) :].split("-")[1:3]
                    train = part == "train"
                    break
        return super().open(raw_dir, train=train, download=download, split=split)

    def load(self, raw_dir: str | os.PathLike, **params: Any) -> ArrayDataset:
        """Train and test arrays of the split from torchvision's objects: the kept characters
        (relabelled), each image transposed upright, pixels scaled to [0, 1], then resized when
        `resize` is set."""
        params = self.check_params(params)
        kept = self.labels(params)
        arrays = []
        for train in (True, False):
            ds = self.open(raw_dir, train=train, split=params["split"])
            x, y = ds.data.numpy(), ds.targets.numpy().astype(np.int64)
            if kept is not None:  # on the uint8 images: ByClass's 697,932 are 2.2 GB as floats
                x, y = keep_classes(x, y, kept)
            x = np.divide(x.transpose(0, 2, 1), np.float32(255.0), dtype=np.float32)[:, None]
            side = self.shape(params)[1]
            arrays += [x if side == x.shape[2] else resize_images(x, side), y]
        chars = params["characters"]
        note = (
            "" if chars is None else f"; characters {chars!r} kept, relabelled 0..{len(chars) - 1}"
        )
        if params["resize"]:
            note += f"; resized to {params['resize']}x{params['resize']}"
        x_train, y_train, x_test, y_test = arrays
        return ArrayDataset(
            name=self.name,
            x_train=np.ascontiguousarray(x_train),
            y_train=y_train,
            x_test=np.ascontiguousarray(x_test),
            y_test=y_test,
            num_classes=self.classes(params),
            standin=False,
            provenance=(
                f"{self.name}: torchvision.datasets.EMNIST split {params['split']} in "
                f"{Path(raw_dir)}, images transposed upright" + note
            ),
        )

    def standin(
        self, rng: np.random.Generator, *, n_train: int = 2000, n_test: int = 500, **params: Any
    ) -> ArrayDataset:
        """Generated 1 x 28 x 28 images (resize x resize when set) with the kept characters'
        class count (62 for ByClass with every class)."""
        params = self.check_params(params)
        classes = self.classes(params)
        return image_standin(self, rng, self.shape(params), classes, n_train, n_test, params)

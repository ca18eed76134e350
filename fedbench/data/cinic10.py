"""CINIC-10 (Darlow et al. 2018): 270,000 32x32 RGB images of CIFAR-10's 10 classes (CIFAR-10
images plus downsampled ImageNet ones), three equal splits of 90,000: train, valid, test.

Fetched through Hugging Face `datasets` from Flower Labs' hub copy (the original tarball's
datashare link is often down): `flwrlabs/cinic10` at a pinned revision, parquet files
`data/{train,validation,test}-00000-of-00001.parquet` with an `image` (PNG) and a `label`
(0 airplane ... 9 truck, CIFAR-10's order) column. The revision (a git commit of the hub repo)
pins the content; the parquet files have no published checksum, so each converted split's
SHA-256 goes in MANIFEST.json. Without network, place the three parquet files under
raw_dir/parquet/ (the FetchError names them) and fetch again: `datasets` reads them from there.

`split: train+valid` (default) puts train and valid (180,000 images) in the training arrays and
test (90,000) in the test arrays, as DQN-Fed's B.5.2 item 7 recommends; `train` leaves valid out.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.data.base import ArrayDataset, RemoteFile, Source, image_standin, read_manifest
from fedbench.data.fetch import DEFAULT_TIMEOUT, FetchError, by_hand, digests
from fedbench.data.transform import check_resize, resize_images
from fedbench.io import atomic_path, write_text

HUB_ID = "flwrlabs/cinic10"
# The commit that uploaded data/*.parquet (the later one only edits README.md).
HUB_REVISION = "8e3c2c337e520de86f32a669bb7dcc9662930502"
HUB_SPLITS = ("train", "validation", "test")
CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
TRAIN_SPLITS = {"train+valid": ("train", "validation"), "train": ("train",)}
MANIFEST = "MANIFEST.json"


def parquet_name(split: str) -> str:
    """The hub repo's file of one split (and its name under raw_dir/parquet/)."""
    return f"{split}-00000-of-00001.parquet"


def parquet_url(split: str) -> str:
    """Where to download one split's parquet file by hand (the pinned revision)."""
    return f"https://huggingface.co/datasets/{HUB_ID}/resolve/{HUB_REVISION}/data/{parquet_name(split)}"


def split_arrays(ds: Any) -> tuple[np.ndarray, np.ndarray]:
    """A `datasets` split with `image` and `label` columns -> (N, 32, 32, 3) uint8, (N,) int64;
    grey images (some ImageNet ones) become RGB."""
    images = [np.asarray(im.convert("RGB"), dtype=np.uint8) for im in ds["image"]]
    x = np.stack(images) if images else np.zeros((0, 32, 32, 3), dtype=np.uint8)
    y = np.asarray(ds["label"], dtype=np.int64)
    if x.shape[1:] != (32, 32, 3):
        raise ValueError(f"cinic10: expected 32x32 RGB images, got shape {x.shape[1:]}")
    if len(y) != len(x) or (len(y) and (y.min() < 0 or y.max() >= len(CLASSES))):
        raise ValueError(f"cinic10: labels must be 0..{len(CLASSES) - 1}, one per image")
    return x, y


class Cinic10(Source):
    """CINIC-10 through `datasets` (hub copy at a pinned revision, or its parquet files placed by
    hand), converted once to raw_dir/cinic10-{split}.npz."""

    name = "cinic10"
    input_shape = (3, 32, 32)
    num_classes = 10
    params = {"resize": None, "split": "train+valid"}

    def __init__(self) -> None:
        self.files = [RemoteFile(f"cinic10-{s}.npz", ()) for s in HUB_SPLITS]

    def check_params(self, params: dict[str, Any]) -> dict[str, Any]:
        params = super().check_params(params)
        if params["split"] not in TRAIN_SPLITS:
            raise ValueError(
                f"cinic10: split must be one of {list(TRAIN_SPLITS)}, got {params['split']!r}"
            )
        check_resize(self.name, params["resize"], (32, 32))
        return params

    def fetch_route(self) -> str:
        return f"datasets.load_dataset({HUB_ID!r}, revision={HUB_REVISION[:12]}...)"

    def manual_files(self, raw_dir: str | os.PathLike) -> list[tuple[Path, str]]:
        """The hub's parquet files, at the paths `fetch` reads them from."""
        return [(Path(raw_dir) / "parquet" / parquet_name(s), parquet_url(s)) for s in HUB_SPLITS]

    def needs_manual_step(self) -> bool:
        """False: `datasets` downloads the files from the hub."""
        return False

    def _read_split(self, raw_dir: Path, split: str, timeout: float) -> tuple[Any, str]:
        """One split as a `datasets` Dataset: the placed parquet file if there, else the hub."""
        import datasets  # Hugging Face's library: imported only to fetch

        local = raw_dir / "parquet" / parquet_name(split)
        cache = str(raw_dir / ".hf-cache")
        if local.is_file():
            ds = datasets.load_dataset(
                "parquet", data_files={split: str(local)}, split=split, cache_dir=cache
            )
            return ds.cast_column("image", datasets.Image()), f"{local} (placed by hand)"
        try:
            ds = datasets.load_dataset(HUB_ID, revision=HUB_REVISION, split=split, cache_dir=cache)
        except Exception as err:  # offline, hub down, gated: the message says what to place
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise FetchError(
                by_hand(
                    self.name,
                    f"datasets.load_dataset({HUB_ID!r}, revision={HUB_REVISION!r}, "
                    f"split={split!r}) failed ({type(err).__name__}: {first})",
                    self.manual_files(raw_dir),
                    "then fetch again: `datasets` reads the parquet files from there.",
                )
            ) from None
        return ds, f"hf://datasets/{HUB_ID}@{HUB_REVISION}/data/{parquet_name(split)}"

    def fetch(
        self, raw_dir: str | os.PathLike, *, timeout: float = DEFAULT_TIMEOUT, **params: Any
    ) -> dict[str, dict[str, Any]]:
        """Each split converted to raw_dir/cinic10-{split}.npz (kept when already there), then
        MANIFEST.json with each file's SHA-256 and origin."""
        self.check_params(params)
        raw_dir = Path(raw_dir)
        raw_dir.mkdir(parents=True, exist_ok=True)
        old = read_manifest(raw_dir)
        manifest: dict[str, dict[str, Any]] = {}
        for split, rf in zip(HUB_SPLITS, self.files, strict=True):
            dest = raw_dir / rf.filename
            entry = old.get(rf.filename)
            if dest.is_file() and isinstance(entry, dict):
                if digests(dest).get("sha256") == entry.get("sha256"):
                    manifest[rf.filename] = entry
                    continue
            ds, origin = self._read_split(raw_dir, split, timeout)
            x, y = split_arrays(ds)
            with atomic_path(dest, suffix=".npz") as tmp:
                with open(tmp, "wb") as fh:
                    np.savez(fh, x=x, y=y)
            manifest[rf.filename] = {**digests(dest), "origin": origin, "verified_by": "revision"}
        write_text(raw_dir / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        return manifest

    def _split(self, raw_dir: str | os.PathLike, split: str) -> tuple[np.ndarray, np.ndarray]:
        with np.load(self._path(raw_dir, f"cinic10-{split}.npz")) as z:
            return z["x"], z["y"]

    def load(self, raw_dir: str | os.PathLike, **params: Any) -> ArrayDataset:
        """Training arrays from `split`'s hub splits, test arrays from test; pixels in [0, 1],
        CHW, optionally resized."""
        params = self.check_params(params)

        def arrays(splits: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
            parts = [self._split(raw_dir, s) for s in splits]
            x = np.concatenate([p[0] for p in parts]).transpose(0, 3, 1, 2)
            x = np.divide(x, np.float32(255.0), dtype=np.float32)
            if params["resize"]:
                x = resize_images(x, params["resize"])
            return x, np.concatenate([p[1] for p in parts])

        x_train, y_train = arrays(TRAIN_SPLITS[params["split"]])
        x_test, y_test = arrays(("test",))
        return ArrayDataset(
            name=self.name,
            x_train=x_train,
            y_train=y_train,
            x_test=x_test,
            y_test=y_test,
            num_classes=self.num_classes,
            standin=False,
            provenance=(
                f"cinic10: {HUB_ID}@{HUB_REVISION} through datasets, converted in "
                f"{Path(raw_dir)}, params={params}"
            ),
        )

    def standin(
        self, rng: np.random.Generator, *, n_train: int = 2000, n_test: int = 500, **params: Any
    ) -> ArrayDataset:
        """Generated RGB images of CINIC-10's (resized) shape, 10 classes."""
        params = self.check_params(params)
        r = params["resize"]
        shape = (3, r, r) if r else self.input_shape
        return image_standin(self, rng, shape, self.num_classes, n_train, n_test, params)

"""ISIC 2019 as FLamby's Fed-ISIC2019: dermoscopy images, 8 classes, 6 clients (sites/devices).

AAggFF's cross-silo image benchmark (aaggff.md §9.4). A client is where an image was taken:
BCN (Barcelona), the HAM10000 sub-collections vidir_molemax, vidir_modern, rosendahl and
vienna_dias (Vienna / Rosendahl, by device), and MSK (New York); client order as in the AAggFF
release: BCN, HAM_vidir_molemax, HAM_vidir_modern, HAM_rosendahl, MSK, HAM_vienna_dias.
"""

from __future__ import annotations

import csv
import io
import os
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from fedbench.data.base import ArrayDataset, RemoteFile
from fedbench.data.natural import (
    CheckedSource,
    check_zip_members,
    natural_dataset,
    natural_standin,
    prototype_images,
)

S3 = "https://isic-challenge-data.s3.amazonaws.com/2019/"
IMAGES = "ISIC_2019_Training_Input.zip"
TRUTH = "ISIC_2019_Training_GroundTruth.csv"
META = "ISIC_2019_Training_Metadata.csv"
HAM = "HAM10000_metadata.csv"
CLASSES = ("MEL", "NV", "BCC", "AK", "BKL", "DF", "VASC", "SCC")
CLIENTS = (
    "BCN",
    "HAM_vidir_molemax",
    "HAM_vidir_modern",
    "HAM_rosendahl",
    "MSK",
    "HAM_vienna_dias",
)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
STATS = (6, 3551.67, 3976.16)  # Table 3.5
EXCLUDED = ("ISIC_0029564",)  # left out by the release
LICENCE = (
    "ISIC 2019 images are CC BY-NC 4.0 (https://challenge.isic-archive.com/data/#2019; by "
    "downloading them you accept the ISIC terms of use)"
)


def read_csv_rows(path: Path, needed: tuple[str, ...]) -> list[dict[str, str]]:
    """Rows of a headed CSV as dicts; ValueError naming the file when a column is missing."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [c for c in needed if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path.name}: missing column(s) {missing}")
        return list(reader)


def site_of(lesion_id: str, image: str, ham_dataset: dict[str, str]) -> str | None:
    """The client of an image from the first 4 characters of its lesion id, as the release:
    'BCN_' -> BCN, 'MSK4' -> MSK (other MSK collections are no client), 'HAM_' + HAM10000's
    `dataset` of the image; None when there is no lesion id or no known client."""
    prefix = lesion_id[:4]
    if prefix == "BCN_":
        return "BCN"
    if prefix == "MSK4":
        return "MSK"
    if prefix == "HAM_":
        sub = ham_dataset.get(image.replace("_downsampled", ""))
        return f"HAM_{sub}" if sub else None
    return None


def isic_image(data: bytes, what: str, resize: int, side: int, normalise: str) -> np.ndarray:
    """Shorter side resized to `resize` (bilinear, sizes truncated as the release's int()),
    centre crop side x side, (3, s, s) float32."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as img:
            rgb = img.convert("RGB")
            w, h = rgb.size
            scale = resize / min(w, h)
            rgb = rgb.resize(
                (max(side, int(w * scale)), max(side, int(h * scale))), Image.Resampling.BILINEAR
            )
            w, h = rgb.size
            left, top = (w - side) // 2, (h - side) // 2
            arr = np.asarray(rgb.crop((left, top, left + side, top + side)), dtype=np.float32)
    except OSError as err:
        raise ValueError(f"{what}: cannot decode ({err})") from None
    x = arr.transpose(2, 0, 1) / np.float32(255.0)
    if normalise == "imagenet":
        mean = np.array(IMAGENET_MEAN, dtype=np.float32)[:, None, None]
        std = np.array(IMAGENET_STD, dtype=np.float32)[:, None, None]
        x = (x - mean) / std
    return x.astype(np.float32)


class ISIC2019(CheckedSource):
    """Fed-ISIC2019: 8-class dermoscopy, clients = the 6 FLamby centres.

    Files: the ISIC 2019 training images, ground truth and metadata from the ISIC challenge's S3
    bucket (9 GB zip; no checksums published: fetch checks the CSV columns and that the zip
    holds JPEGs), plus HAM10000_metadata.csv (Harvard Dataverse, doi:10.7910/DVN/DBW86T; place
    it by hand), whose `dataset` column splits the HAM images into four clients. Images without
    a lesion id or a known centre, and ISIC_0029564, are left out (as the release does). Each
    image: shorter side 224, centre crop `side` (200 = the release's test view; its training
    RandomCrop(200), flips, colour jitter and shear are training-time augmentation, not applied
    here), ImageNet normalisation.
    The release trains with class-weighted cross-entropy (spec §9.4), an engine option not
    present yet.
    """

    name = "isic2019"
    input_shape = (3, 200, 200)
    num_classes = len(CLASSES)
    params = {"resize": 224, "side": 200, "normalise": "imagenet", "max_per_client": None}
    files = [
        RemoteFile(IMAGES, (S3 + IMAGES,)),
        RemoteFile(TRUTH, (S3 + TRUTH,)),
        RemoteFile(META, (S3 + META,)),
        RemoteFile(HAM, ()),
    ]
    hand_hints = {
        IMAGES: f"{S3}{IMAGES} ({LICENCE})",
        TRUTH: f"{S3}{TRUTH}",
        META: f"{S3}{META}",
        HAM: "https://doi.org/10.7910/DVN/DBW86T (Harvard Dataverse, 'HAM10000_metadata', "
        "download as original CSV; CC BY-NC 4.0)",
    }

    def _params(self, params: dict[str, Any]) -> dict[str, Any]:
        params = self.check_params(params)
        if params["normalise"] not in ("imagenet", "none"):
            raise ValueError(
                f"isic2019: normalise must be imagenet|none, got {params['normalise']!r}"
            )
        if params["side"] > params["resize"]:
            raise ValueError("isic2019: side (crop) must not exceed resize (shorter side)")
        return params

    def check_file(self, filename: str, path: Path) -> None:
        """CSV columns; the zip must be a zip with JPEGs."""
        if filename == TRUTH:
            read_csv_rows(path, ("image", *CLASSES))
        elif filename == META:
            read_csv_rows(path, ("image", "lesion_id"))
        elif filename == HAM:
            read_csv_rows(path, ("image_id", "dataset"))
        else:
            check_zip_members(path, [])

    def load(self, raw_dir: str | os.PathLike, **params: Any) -> ArrayDataset:
        """Images with a known centre, labels = argmax of the ground-truth row, groups = centre."""
        params = self._params(params)
        raw = Path(raw_dir)
        truth = read_csv_rows(self._path(raw, TRUTH), ("image", *CLASSES))
        meta = {
            r["image"]: r["lesion_id"]
            for r in read_csv_rows(self._path(raw, META), ("image", "lesion_id"))
        }
        ham = {
            r["image_id"]: r["dataset"]
            for r in read_csv_rows(self._path(raw, HAM), ("image_id", "dataset"))
        }
        chosen: list[tuple[str, int, int]] = []
        per_client = dict.fromkeys(range(len(CLIENTS)), 0)
        for row in truth:
            site = site_of(meta.get(row["image"], "") or "", row["image"], ham)
            if site not in CLIENTS or row["image"].replace("_downsampled", "") in EXCLUDED:
                continue
            k = CLIENTS.index(site)
            if params["max_per_client"] is not None and per_client[k] >= params["max_per_client"]:
                continue
            label = int(np.argmax([float(row[c]) for c in CLASSES]))
            chosen.append((row["image"], label, k))
            per_client[k] += 1
        if not chosen:
            raise ValueError(f"{self.name}: no image of {TRUTH} has a known centre")
        zpath = self._path(raw, IMAGES)
        x = np.empty((len(chosen), 3, params["side"], params["side"]), dtype=np.float32)
        try:
            with zipfile.ZipFile(zpath) as z:
                member = {PurePosixPath(n).stem: n for n in z.namelist() if n.endswith(".jpg")}
                for i, (img, _, _) in enumerate(chosen):
                    if img not in member:
                        raise ValueError(f"{zpath}: {img}.jpg is missing")
                    x[i] = isic_image(
                        z.read(member[img]),
                        img,
                        params["resize"],
                        params["side"],
                        params["normalise"],
                    )
        except zipfile.BadZipFile as err:
            raise ValueError(f"{zpath}: not a zip ({err})") from None
        return natural_dataset(
            self.name,
            x,
            np.array([c[1] for c in chosen], dtype=np.int64),
            np.array([c[2] for c in chosen], dtype=np.int64),
            self.num_classes,
            f"isic2019: {raw}; images per client {dict(zip(CLIENTS, per_client.values()))}; "
            f"classes {CLASSES}; params={params}",
        )

    def standin(
        self, rng: np.random.Generator, *, n_train: int = 2000, n_test: int = 500, **params: Any
    ) -> ArrayDataset:
        """8-class images of the configured size, 6 centres with a colour cast each."""
        params = self._params(params)
        shape = (3, params["side"], params["side"])

        def draw(r: np.random.Generator, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            x, y = prototype_images(r, len(groups), shape, len(CLASSES))
            cast = r.uniform(0.7, 1.0, (int(groups.max()) + 1, 3, 1, 1))
            return (x * cast[groups]).astype(np.float32), y

        return natural_standin(
            self.name,
            rng,
            n_train,
            STATS,
            None,
            draw,
            self.num_classes,
            f"smooth class prototypes plus noise with a colour cast per centre, shape {shape}",
        )

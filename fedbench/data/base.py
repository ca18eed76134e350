"""Datasets as arrays, their .npz files, and the Source interface (fetch, load, stand-in)."""

from __future__ import annotations

import abc
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

import numpy as np

from fedbench.data.checksum import load_checked, save_checked
from fedbench.data.fetch import (
    DEFAULT_TIMEOUT,
    FetchError,
    by_hand,
    digests,
    download,
    hand_placement_hint,
    socket_timeout,
)
from fedbench.io import atomic_path, write_text

__all__ = [
    "ArrayDataset",
    "FetchError",
    "RemoteFile",
    "Source",
    "TorchvisionSource",
    "load_dataset",
    "manifest_verifies",
    "save_dataset",
    "standin_images",
]

MANIFEST = "MANIFEST.json"
EXTRA = "extra_"  # prefix of a dataset's extra arrays in its .npz
OFFICIAL_TEST = "official_test"  # a merged pool's marks of the official test rows, in its .npz
REQUIRED = object()  # marks a parameter without a default


@dataclass(frozen=True)
class ArrayDataset:
    """A training pool and a global test set as numpy arrays, with where they came from."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    standin: bool
    provenance: str
    groups: np.ndarray | None = None
    # Named arrays a model needs besides the samples (Sent140's frozen GloVe rows, `embedding`);
    # saved in the .npz as `extra_<name>` and handed to models that declare them (DATA_INPUTS).
    extras: dict[str, np.ndarray] = field(default_factory=dict)
    # Which training-pool rows came from the source's official test split (bool, one per row),
    # set by the `pool: merged` transform; a partition's `test_split: official` reads it.
    official_test: np.ndarray | None = None

    def __post_init__(self) -> None:
        for key in ("x_train", "x_test"):
            if getattr(self, key).dtype != np.float32:
                raise ValueError(
                    f"{self.name}: {key} must be float32, got {getattr(self, key).dtype}"
                )
        for key in ("y_train", "y_test"):
            if getattr(self, key).dtype != np.int64:
                raise ValueError(
                    f"{self.name}: {key} must be int64, got {getattr(self, key).dtype}"
                )
        if len(self.x_train) != len(self.y_train) or len(self.x_test) != len(self.y_test):
            raise ValueError(f"{self.name}: inputs and labels differ in length")
        if self.x_train.shape[1:] != self.x_test.shape[1:]:
            raise ValueError(
                f"{self.name}: train shape {self.x_train.shape[1:]} != test {self.x_test.shape[1:]}"
            )
        if self.groups is not None and (
            self.groups.dtype != np.int64 or self.groups.shape != self.y_train.shape
        ):
            raise ValueError(f"{self.name}: groups must be int64 with one entry per train sample")
        if self.official_test is not None and (
            self.official_test.dtype != np.bool_ or self.official_test.shape != self.y_train.shape
        ):
            raise ValueError(
                f"{self.name}: official_test must be bool with one entry per train sample"
            )
        for key, value in self.extras.items():
            if not key.isidentifier() or not isinstance(value, np.ndarray):
                raise ValueError(f"{self.name}: extra {key!r} must be a named numpy array")

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one input."""
        return tuple(self.x_train.shape[1:])


def save_dataset(ds: ArrayDataset, path: str | os.PathLike) -> None:
    """Write a dataset to one .npz file, atomically."""
    meta = {
        "name": ds.name,
        "num_classes": int(ds.num_classes),
        "standin": bool(ds.standin),
        "provenance": ds.provenance,
    }
    arrays = {k: getattr(ds, k) for k in ("x_train", "y_train", "x_test", "y_test")}
    if ds.groups is not None:
        arrays["groups"] = ds.groups
    if ds.official_test is not None:
        arrays[OFFICIAL_TEST] = ds.official_test
    arrays.update({EXTRA + k: v for k, v in ds.extras.items()})
    save_checked(path, {"meta": np.array(json.dumps(meta)), **arrays})


def _parse_dataset(arrays: dict[str, np.ndarray]) -> ArrayDataset:
    arrays.pop("sha256", None)
    meta = json.loads(str(arrays.pop("meta")))
    return ArrayDataset(
        name=meta["name"],
        num_classes=int(meta["num_classes"]),
        standin=bool(meta["standin"]),
        provenance=meta["provenance"],
        groups=arrays.get("groups"),
        official_test=arrays.get(OFFICIAL_TEST),
        extras={k[len(EXTRA) :]: v for k, v in arrays.items() if k.startswith(EXTRA)},
        **{k: arrays[k] for k in ("x_train", "y_train", "x_test", "y_test")},
    )


def load_dataset(path: str | os.PathLike) -> ArrayDataset:
    """Read a dataset written by `save_dataset`; a missing or damaged file is named in the error
    with the snakemake command that writes it again (`fedbench.io.rewrite_advice`)."""
    return load_checked(path, "dataset", "prepare", _parse_dataset)


@dataclass(frozen=True)
class RemoteFile:
    """One file of a source: its name, mirrors and checksums."""

    filename: str
    urls: tuple[str, ...]
    md5: str | None = None
    sha256: str | None = None

    def check(self, path: Path) -> str | None:
        """Which checksum the file at `path` satisfies ("archive", or "unchecked" when none is
        known), or None."""
        if not path.is_file():
            return None
        if self.md5 is None and self.sha256 is None:
            return "unchecked"
        d = digests(path)
        if (self.md5 is None or d["md5"] == self.md5) and (
            self.sha256 is None or d["sha256"] == self.sha256
        ):
            return "archive"
        return None


def check_params(source: str, given: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """Merge `given` over the defaults in `spec`; unknown or missing names raise ValueError."""
    unknown = sorted(set(given) - set(spec))
    if unknown:
        raise ValueError(
            f"{source}: unknown parameter(s) {unknown}; valid: {sorted(spec) or 'none'}"
        )
    out = {**spec, **given}
    missing = sorted(k for k, v in out.items() if v is REQUIRED)
    if missing:
        raise ValueError(f"{source}: missing required parameter(s) {missing}")
    return out


def read_manifest(raw_dir: str | os.PathLike) -> dict[str, Any]:
    """raw_dir/MANIFEST.json as a dict; {} when it is missing, unreadable or not a mapping."""
    try:
        data = json.loads((Path(raw_dir) / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def manifest_verifies(raw_dir: str | os.PathLike, files: list[RemoteFile]) -> bool:
    """True when raw_dir/MANIFEST.json lists every file and each file still has its SHA-256."""
    raw_dir = Path(raw_dir)
    manifest = read_manifest(raw_dir)
    for rf in files:
        entry = manifest.get(rf.filename)
        path = raw_dir / rf.filename
        if not isinstance(entry, dict) or not path.is_file():
            return False
        if path.stat().st_size != entry.get("bytes") or digests(path)["sha256"] != entry.get(
            "sha256"
        ):
            return False
    return True


class Source(abc.ABC):
    """A dataset family member: where its files live, how to read them, and a stand-in."""

    name: ClassVar[str]
    input_shape: ClassVar[tuple[int, ...]]
    num_classes: ClassVar[int]
    files: list[RemoteFile] = []
    params: ClassVar[dict[str, Any]] = {}

    def check_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """The source's parameters with defaults filled in (unknown ones raise ValueError)."""
        return check_params(self.name, params, self.params)

    def routed(self, params: dict[str, Any]) -> Source:
        """This source as `params` fetch it: itself, or (a source with `source: hub | original`,
        fedbench/data/hub.py) a copy whose `files` and fetch route are the route's."""
        return self

    def offline_dir(self) -> Path | None:
        """A folder on this machine that already holds the real files, if any."""
        return None

    def available_offline(self) -> bool:
        """True when every file is present in `offline_dir()` (checksums are checked on fetch)."""
        folder = self.offline_dir()
        return folder is not None and all((folder / f.filename).is_file() for f in self.files)

    def fetch_route(self) -> str:
        """How `fetch` gets the files (a library's download, or urllib from these hosts), in the
        words `python -m fedbench.data status` prints."""
        if not self.files:
            return "generated or bundled: nothing to fetch"
        hosts = sorted({urlsplit(f.urls[0]).netloc for f in self.files if f.urls})
        return "urllib from " + ", ".join(hosts) if hosts else "none: every file is placed by hand"

    def manual_files(self, raw_dir: str | os.PathLike) -> list[tuple[Path, str]]:
        """(exact path, where to get it) of each file a user places by hand instead of `fetch`."""
        return [
            (
                Path(raw_dir) / f.filename,
                f.urls[0] if f.urls else "no public URL: see the docstring",
            )
            for f in self.files
        ]

    def needs_manual_step(self) -> bool:
        """True when `fetch` alone cannot get the data (a file without a URL: a registration,
        terms to accept, a request to the authors)."""
        return any(not f.urls for f in self.files)

    def present(self, raw_dir: str | os.PathLike) -> bool:
        """Cheap check (no hashing): raw_dir/MANIFEST.json lists every file, each at its recorded
        size; `prepare` re-hashes them before it reads (`manifest_verifies`)."""
        raw_dir = Path(raw_dir)
        manifest = read_manifest(raw_dir)
        for rf in self.files:
            entry, path = manifest.get(rf.filename), raw_dir / rf.filename
            if not isinstance(entry, dict) or not path.is_file():
                return False
            if path.stat().st_size != entry.get("bytes"):
                return False
        return bool(self.files)

    def fetch(
        self, raw_dir: str | os.PathLike, *, timeout: float = DEFAULT_TIMEOUT, **params: Any
    ) -> dict[str, dict[str, Any]]:
        """Make raw_dir hold every verified file (kept, copied from offline_dir, or downloaded)."""
        self.check_params(params)
        raw_dir = Path(raw_dir)
        raw_dir.mkdir(parents=True, exist_ok=True)
        folder = self.offline_dir()
        manifest: dict[str, dict[str, Any]] = {}
        for rf in self.files:
            dest = raw_dir / rf.filename
            verified_by = rf.check(dest)
            origin = f"already present in {raw_dir}"
            if verified_by is None and folder is not None and (folder / rf.filename).is_file():
                with atomic_path(dest) as tmp:
                    shutil.copyfile(folder / rf.filename, tmp)
                    verified_by = rf.check(tmp)
                    if verified_by is None:
                        raise FetchError(
                            f"{folder / rf.filename} does not match the checksum of "
                            f"{rf.filename} (md5={rf.md5}, sha256={rf.sha256}); "
                            + hand_placement_hint(dest, rf.md5, rf.sha256)
                        )
                origin = str(folder / rf.filename)
            if verified_by is None:
                origin = download(rf.urls, dest, md5=rf.md5, sha256=rf.sha256, timeout=timeout)
                verified_by = "archive" if rf.md5 or rf.sha256 else "unchecked"
            manifest[rf.filename] = {**digests(dest), "origin": origin, "verified_by": verified_by}
        write_text(raw_dir / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        return manifest

    @abc.abstractmethod
    def load(self, raw_dir: str | os.PathLike, **params: Any) -> ArrayDataset:
        """Parse the fetched files in raw_dir into arrays."""

    @abc.abstractmethod
    def standin(
        self, rng: np.random.Generator, *, n_train: int = 2000, n_test: int = 500, **params: Any
    ) -> ArrayDataset:
        """A generated, shape-faithful stand-in (standin=True); never real data."""

    def _path(self, raw_dir: str | os.PathLike, filename: str) -> Path:
        """raw_dir/filename, or FileNotFoundError saying how to get it."""
        path = Path(raw_dir) / filename
        if not path.is_file():
            raise FileNotFoundError(
                f"{self.name}: {path} is missing; run the fetch step "
                f"(fedbench.data.SOURCES[{self.name!r}].fetch) or place the file there by hand"
            )
        return path


class TorchvisionSource(Source):
    """A source that torchvision.datasets serves: `fetch` is torchvision's download (its mirrors,
    its MD5s) into raw_dir in torchvision's own layout, `load` reads torchvision's dataset object;
    fedbench keeps only the conversion to arrays and the papers' preprocessing.

    `files` are the files torchvision reads (their SHA-256 goes in MANIFEST.json, as for every
    source); `archives` are what a user without network places by hand (torchvision checks their
    MD5 and unpacks them on the next fetch).
    """

    tv_class: ClassVar[str]  # the class in torchvision.datasets
    archives: tuple[tuple[str, str], ...]  # (path under raw_dir, URL), torchvision's
    verified_by: ClassVar[str]  # what torchvision checks, in the manifest's words

    def fetch_route(self) -> str:
        """torchvision's download."""
        return f"torchvision.datasets.{self.tv_class}(download=True)"

    def manual_files(self, raw_dir: str | os.PathLike) -> list[tuple[Path, str]]:
        """The archives torchvision downloads, at the paths where it looks for them."""
        return [(Path(raw_dir) / path, url) for path, url in self.archives]

    def needs_manual_step(self) -> bool:
        """False: torchvision downloads every file."""
        return False

    def has_files(self, raw_dir: str | os.PathLike) -> bool:
        """True when every file torchvision reads is in raw_dir (not checked here)."""
        return all((Path(raw_dir) / f.filename).is_file() for f in self.files)

    def place_local(self, raw_dir: Path) -> str | None:
        """Put a local copy into torchvision's layout when its files are missing; returns the
        manifest's `origin` for it, or None (nothing placed). None here; sources override."""
        return None

    def fetch(
        self, raw_dir: str | os.PathLike, *, timeout: float = DEFAULT_TIMEOUT, **params: Any
    ) -> dict[str, dict[str, Any]]:
        """torchvision's download into raw_dir (nothing when its files are there), then
        MANIFEST.json with each file's SHA-256; without network, FetchError names the files to
        place by hand."""
        self.check_params(params)
        raw_dir = Path(raw_dir)
        raw_dir.mkdir(parents=True, exist_ok=True)
        origin = self.place_local(raw_dir)
        if origin is None:
            origin = (
                f"already present in {raw_dir}"
                if self.has_files(raw_dir)
                else f"downloaded by torchvision.datasets.{self.tv_class}"
            )
        with socket_timeout(timeout):
            self.open(raw_dir, train=False, download=True)
        manifest = {
            f.filename: {
                **digests(raw_dir / f.filename),
                "origin": origin,
                "verified_by": self.verified_by,
            }
            for f in self.files
        }
        write_text(raw_dir / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        return manifest

    def open(
        self, raw_dir: str | os.PathLike, *, train: bool, download: bool = False, **options: Any
    ) -> Any:
        """torchvision's dataset object for one split (`options`: the class's other arguments,
        EMNIST's `split`). No data: FetchError (download) or FileNotFoundError (load) naming the
        dataset, raw_dir and the exact files to place."""
        import torchvision.datasets as tvd  # torch's image library: imported only to read

        try:
            return getattr(tvd, self.tv_class)(
                root=str(raw_dir), train=train, download=download, **options
            )
        except (RuntimeError, OSError) as err:
            lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
            lines = lines or [type(err).__name__]  # first and last: the file, the last error
            why = lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"
            what = "could not download" if download else "found no data"
            msg = by_hand(
                self.name,
                f"torchvision.datasets.{self.tv_class} {what} in {raw_dir} ({why})",
                self.manual_files(raw_dir),
                "then fetch again: torchvision checks their MD5 and unpacks them there "
                f'(python -c "from fedbench.data import SOURCES; '
                f"SOURCES['{self.name}'].fetch('{raw_dir}')\").",
            )
            raise (FetchError if download else FileNotFoundError)(msg) from None


def standin_images(
    rng: np.random.Generator, n: int, shape: tuple[int, ...], num_classes: int
) -> tuple[np.ndarray, np.ndarray]:
    """Images in [0, 1] drawn around one smooth random prototype per class, balanced labels."""
    channels, height, width = shape
    yy = np.linspace(0.0, 1.0, height)[:, None]
    xx = np.linspace(0.0, 1.0, width)[None, :]
    freq = rng.uniform(0.5, 3.0, size=(num_classes, channels, 2, 1, 1))
    phase = rng.uniform(0.0, 2 * np.pi, size=(num_classes, channels, 2, 1, 1))
    protos = 0.5 + 0.45 * (
        np.sin(2 * np.pi * freq[:, :, 0] * yy + phase[:, :, 0])
        * np.cos(2 * np.pi * freq[:, :, 1] * xx + phase[:, :, 1])
    )
    labels = rng.permutation(np.arange(n) % num_classes).astype(np.int64)
    noise = rng.normal(0.0, 0.2, size=(n, channels, height, width))
    x = np.clip(protos[labels] + noise, 0.0, 1.0).astype(np.float32)
    return x, labels


def image_standin(
    source: Source,
    rng: np.random.Generator,
    shape: tuple[int, ...],
    num_classes: int,
    n_train: int,
    n_test: int,
    params: dict[str, Any],
) -> ArrayDataset:
    """Train and test stand-ins that share one set of class prototypes."""
    if n_train < 1 or n_test < 0:
        raise ValueError(f"{source.name}: stand-in sizes must be n_train >= 1, n_test >= 0")
    x, y = standin_images(rng, n_train + n_test, shape, num_classes)
    return ArrayDataset(
        name=source.name,
        x_train=x[:n_train],
        y_train=y[:n_train],
        x_test=x[n_train:],
        y_test=y[n_train:],
        num_classes=num_classes,
        standin=True,
        provenance=(
            f"generated stand-in for {source.name}: one smooth random prototype per class plus "
            f"Gaussian noise (sd 0.2), shape {shape}, {num_classes} classes, "
            f"n_train={n_train}, n_test={n_test}, params={params}"
        ),
    )

"""`source: hub | original`: a dataset read through Hugging Face `datasets` from a hub copy at a
pinned revision (cached in the user's HF cache), beside the files its authors publish.

A `HubRouted` source has both routes. `source: hub` (the default where the hub copy holds what the
papers used) reads `HubRepo` with `datasets.load_dataset(repo_id, revision=...)` and converts it
once to raw_dir/<hub_file>.npz; `source: original` fetches and parses the authors' files as
before. The data's `source` parameter picks the route, so `run.yaml`'s provenance names it (and
the repo and revision). Without network (or with HF_HUB_OFFLINE=1) the hub route stops at once
with a FetchError naming the dataset, the folder to place a copy of the hub repo in (`hf
download ... --local-dir`) and the other route; a copy placed there is read by `datasets` from
disk. Both routes' files can sit in one raw_dir: each fetch keeps the other route's manifest
entries.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from fedbench.data.base import MANIFEST, RemoteFile, Source, read_manifest
from fedbench.data.fetch import DEFAULT_TIMEOUT, FetchError, by_hand, digests
from fedbench.io import atomic_path, write_text

ROUTES = ("hub", "original")
LOCAL_COPY = "hub-copy"  # raw_dir/hub-copy/: a copy of the hub repo placed by hand
# Where `datasets` keeps its Arrow cache: None is the user's HF cache (HF_DATASETS_CACHE); tests
# point it at a temporary folder.
CACHE_DIR: str | None = None


@dataclass(frozen=True)
class HubRepo:
    """A dataset repo on the Hugging Face hub at one commit, and how to read it."""

    repo_id: str
    revision: str  # a 40-hex commit of the repo: it pins the content
    config: str | None = None  # the `name` argument of load_dataset (a subset), if any
    data_dir: str | None = None  # the folder of the files within the repo, if not its root

    def __post_init__(self) -> None:
        if len(self.revision) != 40 or any(c not in "0123456789abcdef" for c in self.revision):
            raise ValueError(f"{self.repo_id}: revision must be a 40-hex commit: {self.revision}")

    @property
    def url(self) -> str:
        """The repo's files at the pinned revision, in a browser."""
        return f"https://huggingface.co/datasets/{self.repo_id}/tree/{self.revision}"

    def route(self) -> str:
        """The fetch route in `fedbench data status`'s words."""
        return f"datasets.load_dataset({self.repo_id!r}, revision={self.revision[:12]}...)"

    def download_command(self, dest: Path) -> str:
        """The command that copies the repo at the pinned revision to `dest` (huggingface_hub)."""
        return (
            f"hf download {self.repo_id} --repo-type dataset --revision {self.revision} "
            f"--local-dir {dest}"
        )


def load_split(
    name: str,
    repo: HubRepo,
    split: str,
    raw_dir: Path,
    other_route: str,
    string_columns: tuple[str, ...] = (),
) -> tuple:
    """(one split as a `datasets` Dataset, its origin): from raw_dir/hub-copy when a copy of the
    repo is placed there, else from the hub (or the HF cache). Any failure is a FetchError that
    names the dataset, the folder, the download command and `other_route` (what else works).
    `string_columns`: a CSV copy's columns, read as strings whatever they look like."""
    import datasets  # Hugging Face's library: imported only to fetch

    local = raw_dir / LOCAL_COPY
    kwargs: dict[str, Any] = {"split": split, "cache_dir": CACHE_DIR}
    if string_columns:
        kwargs["features"] = datasets.Features(
            {c: datasets.Value("string") for c in string_columns}
        )
    if repo.config is not None:
        kwargs["name"] = repo.config
    try:
        if local.is_dir() and any(local.iterdir()):
            path = local / repo.data_dir if repo.data_dir else local
            return datasets.load_dataset(str(path), **kwargs), f"{local} (placed by hand)"
        if repo.data_dir:
            kwargs["data_dir"] = repo.data_dir
        ds = datasets.load_dataset(repo.repo_id, revision=repo.revision, **kwargs)
    except Exception as err:  # offline, hub down, a damaged copy: the message says what to do
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise FetchError(
            by_hand(
                name,
                f"datasets.load_dataset({repo.repo_id!r}, revision={repo.revision!r}, "
                f"split={split!r}) failed ({type(err).__name__}: {first[:300]})",
                [(local, repo.url)],
                f"e.g. `{repo.download_command(local)}` on a machine with network, copy the "
                f"folder here, then fetch again; or set the dataset's params `source: original` "
                f"({other_route}).",
            )
        ) from None
    return ds, f"hf://datasets/{repo.repo_id}@{repo.revision} (split {split})"


def save_arrays(dest: Path, **arrays: np.ndarray) -> None:
    """Write arrays to one .npz, atomically."""
    with atomic_path(dest, suffix=".npz") as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)


def check_route(source: str, route: Any) -> str:
    """`route` if it names a route, else ValueError naming the valid ones."""
    if route not in ROUTES:
        raise ValueError(f"{source}: source must be one of {list(ROUTES)}, got {route!r}")
    return route


def fetch_routes(source: Source, entries: Iterable[Any]) -> list[str | None]:
    """The routes the fetch job of `source` fetches, in order: each route that a catalog dataset
    of this source names in its params (`source: hub | original`), sorted; then None, the
    default route (which falls back to the other route's files placed by hand), when a dataset
    names none or none uses the source, unless the default route is named already. A source
    without routes: [None]."""
    if not isinstance(source, HubRouted):
        return [None]
    named: set[str] = set()
    unnamed = False
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("source") != source.name:
            continue
        route = (entry.get("params") or {}).get("source")
        if route is None:
            unnamed = True
        else:
            named.add(check_route(source.name, route))
    routes: list[str | None] = sorted(named)
    if (unnamed or not named) and source.default_route not in named:
        routes.append(None)
    return routes


class HubRouted(Source):
    """A source with two routes (`source: hub | original`); `files` are the default route's.

    Subclasses set `hub` (the repo), `hub_file` (the .npz the hub route converts to),
    `original_files`, and implement `convert_hub` (the hub copy -> arrays) and the loaders.
    """

    hub: ClassVar[HubRepo]
    hub_file: ClassVar[str]
    original_files: ClassVar[list[RemoteFile]]
    default_route: ClassVar[str] = "hub"
    route: str

    def __init__(self) -> None:
        self.route = self.default_route
        self.files = self.route_files(self.route)

    def route_files(self, route: str) -> list[RemoteFile]:
        """The files of one route in raw_dir (their SHA-256 goes in MANIFEST.json)."""
        return [RemoteFile(self.hub_file, ())] if route == "hub" else list(self.original_files)

    def routed(self, params: dict[str, Any]) -> HubRouted:
        """This source on the route `params` names (its default when they name none)."""
        route = check_route(self.name, params.get("source", self.default_route))
        view = copy.copy(self)
        view.route, view.files = route, self.route_files(route)
        return view

    def check_params(self, params: dict[str, Any]) -> dict[str, Any]:
        out = super().check_params(params)
        check_route(self.name, out["source"])
        return out

    def fetch_route(self) -> str:
        return self.hub.route() if self.route == "hub" else super().fetch_route()

    def manual_files(self, raw_dir: str | os.PathLike) -> list[tuple[Path, str]]:
        if self.route == "hub":
            return [(Path(raw_dir) / LOCAL_COPY, self.hub.url)]
        return super().manual_files(raw_dir)

    def needs_manual_step(self) -> bool:
        return False if self.route == "hub" else super().needs_manual_step()

    def convert_hub(self, raw_dir: Path) -> tuple[dict[str, np.ndarray], str]:
        """The hub copy as named arrays for raw_dir/<hub_file>, and their origin."""
        raise NotImplementedError

    def _placed(self, route: str, raw_dir: Path) -> bool:
        if route == "hub":
            return (raw_dir / self.hub_file).is_file() or (raw_dir / LOCAL_COPY).is_dir()
        return all((raw_dir / f.filename).is_file() for f in self.original_files)

    def fetch(
        self, raw_dir: str | os.PathLike, *, timeout: float = DEFAULT_TIMEOUT, **params: Any
    ) -> dict[str, dict[str, Any]]:
        """The route's files into raw_dir, then MANIFEST.json (the other route's entries kept).

        With no `source` given (the fetch rule), the default route; when it fails and the other
        route's files were placed by hand, those are recorded instead, so a `source: original`
        dataset prepares without network.
        """
        given = "source" in params
        params = self.check_params(params)
        raw_dir = Path(raw_dir)
        raw_dir.mkdir(parents=True, exist_ok=True)
        old = read_manifest(raw_dir)
        view = self.routed(params)
        try:
            manifest = view._fetch_route(raw_dir, timeout, params)
        except FetchError:
            other = "original" if view.route == "hub" else "hub"
            if given or not self._placed(other, raw_dir):
                raise
            view = self.routed({**params, "source": other})
            manifest = view._fetch_route(raw_dir, timeout, {**params, "source": other})
        return keep_other_entries(raw_dir, old, manifest)

    def _fetch_route(
        self, raw_dir: Path, timeout: float, params: dict[str, Any]
    ) -> dict[str, dict[str, Any]]:
        if self.route == "original":
            return super().fetch(raw_dir, timeout=timeout, **params)
        dest = raw_dir / self.hub_file
        old = read_manifest(raw_dir).get(self.hub_file)
        if dest.is_file() and isinstance(old, dict):
            if digests(dest)["sha256"] == old.get("sha256"):
                return {self.hub_file: old}
        arrays, origin = self.convert_hub(raw_dir)
        save_arrays(dest, **arrays)
        entry = {**digests(dest), "origin": origin, "verified_by": "revision"}
        return {self.hub_file: entry}


def keep_other_entries(
    raw_dir: Path, old: dict[str, Any], manifest: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """`manifest` plus the entries of the `old` MANIFEST.json whose files are still in raw_dir
    at their recorded size (the other route's), written atomically; returns the merged manifest."""
    merged = {
        name: entry
        for name, entry in old.items()
        if name not in manifest
        and isinstance(entry, dict)
        and (raw_dir / name).is_file()
        and (raw_dir / name).stat().st_size == entry.get("bytes")
    }
    merged.update(manifest)
    write_text(raw_dir / MANIFEST, json.dumps(merged, indent=2, sort_keys=True) + "\n")
    return merged

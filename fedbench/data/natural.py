"""Helpers for sources with natural clients (AAggFF's benchmarks): format checks on fetch, hand
placement messages, and stand-in client sizes shaped like the real ones (Table 3.5)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from fedbench.data.base import MANIFEST, ArrayDataset, FetchError
from fedbench.data.fetch import DEFAULT_TIMEOUT
from fedbench.data.known_sums import CitedChecksums
from fedbench.io import write_text

# filename -> (where a person gets it by hand, e.g. a licence page)
HandHints = dict[str, str]


class CheckedSource(CitedChecksums):
    """A source whose files lack a published SHA-256: fetch checks each file's size and format.

    `check_file(filename, path)` raises ValueError when a file is not what it should be (an HTML
    error page, a truncated zip, the wrong columns); the file is then deleted and FetchError says
    where to get it by hand (`hand_hints`). The manifest records the SHA-256 of what passed.
    """

    hand_hints: ClassVar[HandHints] = {}

    def check_file(self, filename: str, path: Path) -> None:
        """Raise ValueError unless the file at `path` has the expected format."""

    def fetch(
        self, raw_dir: str | os.PathLike, *, timeout: float = DEFAULT_TIMEOUT, **params: Any
    ) -> dict[str, dict[str, Any]]:
        """Fetch (unchecked downloads), then verify each file's format; reject bad ones."""
        raw_dir = Path(raw_dir)
        try:
            manifest = super().fetch(raw_dir, timeout=timeout, **params)
        except FetchError as err:
            raise FetchError(f"{self.name}: {err}\n{self.hand_placement(raw_dir)}") from None
        for rf in self.files:
            path = raw_dir / rf.filename
            try:
                self.check_file(rf.filename, path)
            except (ValueError, OSError) as err:
                path.unlink(missing_ok=True)
                (raw_dir / MANIFEST).unlink(missing_ok=True)
                raise FetchError(
                    f"{self.name}: {rf.filename} from {manifest[rf.filename]['origin']} is not "
                    f"a valid {rf.filename} ({err}); it was deleted.\n"
                    + self.hand_placement(raw_dir)
                ) from None
            manifest[rf.filename]["verified_by"] = "format"
        write_text(raw_dir / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        return manifest

    def hand_placement(self, raw_dir: Path) -> str:
        """Which files to place where, and where each comes from."""
        lines = [f"Place these files in {raw_dir} by hand:"]
        for rf in self.files:
            where = self.hand_hints.get(rf.filename) or (rf.urls[0] if rf.urls else "?")
            lines.append(f"  {rf.filename}: {where}")
        return "\n".join(lines)


def check_zip_members(path: Path, needed: list[str]) -> None:
    """ValueError unless `path` is a readable zip holding every basename in `needed`."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            names = {Path(n).name for n in z.namelist()}
    except zipfile.BadZipFile as err:
        raise ValueError(f"not a zip file ({err})") from None
    missing = sorted(set(needed) - names)
    if missing:
        raise ValueError(f"zip lacks {missing}")


def client_sizes(
    rng: np.random.Generator, total: int, num_clients: int, mean: float, std: float, minimum: int
) -> np.ndarray:
    """`num_clients` sizes summing to `total`, each >= minimum, with the coefficient of variation
    std / mean of the real clients (log-normal draws, rescaled)."""
    if num_clients < 1 or total < num_clients * minimum:
        raise ValueError(
            f"stand-in needs n_train >= {num_clients * minimum} for {num_clients} clients "
            f"of at least {minimum} samples, got {total}"
        )
    cv = std / mean
    sigma = np.sqrt(np.log1p(cv**2))
    w = rng.lognormal(0.0, sigma, num_clients)
    spare = total - num_clients * minimum
    extra = np.floor(w / w.sum() * spare).astype(np.int64)
    extra[np.argsort(-w)[: spare - int(extra.sum())]] += 1
    return extra + minimum


def standin_clients(
    rng: np.random.Generator,
    paper_clients: int,
    n_train: int,
    max_clients: int | None,
    minimum: int,
) -> int:
    """How many stand-in clients: the paper's K, unless max_clients or n_train / minimum is less."""
    k = paper_clients if max_clients is None else min(paper_clients, max_clients)
    return max(1, min(k, n_train // minimum))


def natural_standin(
    name: str,
    rng: np.random.Generator,
    n_train: int,
    stats: tuple[int, float, float],
    max_clients: int | None,
    draw: Callable[[np.random.Generator, np.ndarray], tuple[np.ndarray, np.ndarray]],
    num_classes: int,
    what: str,
    minimum: int = 5,
) -> ArrayDataset:
    """A stand-in whose train pool is split into natural clients (groups) like the real one.

    `stats` = (clients, mean, std) of the real per-client sample counts (Table 3.5); `draw(rng,
    groups)` returns (x float32, y int64) for samples of the given client ids, so client-specific
    features can be drawn. The global test set is empty: AAggFF tests on each client's 20 %.
    """
    k = standin_clients(rng, stats[0], n_train, max_clients, minimum)
    sizes = client_sizes(rng, n_train, k, stats[1], stats[2], minimum)
    groups = np.repeat(np.arange(k, dtype=np.int64), sizes)
    x, y = draw(rng, groups)
    return ArrayDataset(
        name=name,
        x_train=x,
        y_train=y,
        x_test=np.zeros((0, *x.shape[1:]), dtype=np.float32),
        y_test=np.zeros((0, *y.shape[1:]), dtype=np.int64),
        num_classes=num_classes,
        standin=True,
        groups=groups,
        provenance=(
            f"generated stand-in for {name} (NOT real data): {what}; {k} natural clients "
            f"(paper: {stats[0]}), sizes log-normal with the real CV {stats[2] / stats[1]:.2f}, "
            f"n_train={n_train}"
        ),
    )


def natural_dataset(
    name: str,
    x: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    num_classes: int,
    provenance: str,
) -> ArrayDataset:
    """Real data: everything in the training pool with groups = natural client (the partition's
    test_fraction makes each client's test split, as AAggFF's per-client 80/20)."""
    return ArrayDataset(
        name=name,
        x_train=np.ascontiguousarray(x, dtype=np.float32),
        y_train=np.asarray(y, dtype=np.int64),
        x_test=np.zeros((0, *x.shape[1:]), dtype=np.float32),
        y_test=np.zeros((0, *np.shape(y)[1:]), dtype=np.int64),
        num_classes=num_classes,
        standin=False,
        provenance=provenance,
        groups=np.asarray(groups, dtype=np.int64),
    )


def tabular_draw(
    num_features: int, num_classes: int, shift: float = 0.5
) -> Callable[[np.random.Generator, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Standardised features: a class signal along one random direction, a per-client offset."""

    def draw(rng: np.random.Generator, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n, k = len(groups), int(groups.max()) + 1
        prior = rng.uniform(0.15, 0.5, k)  # per-client positive rate: label skew across clients
        y = (rng.random(n) < prior[groups]).astype(np.int64) % num_classes
        direction = rng.normal(size=num_features)
        direction /= np.linalg.norm(direction)
        offset = rng.normal(0.0, shift, (k, num_features))
        x = rng.normal(size=(n, num_features)) + offset[groups] + np.outer(2 * y - 1, direction)
        return x.astype(np.float32), y

    return draw


def prototype_images(
    rng: np.random.Generator, n: int, shape: tuple[int, ...], num_classes: int
) -> tuple[np.ndarray, np.ndarray]:
    """Like `standin_images` (a smooth random prototype per class plus noise, in [0, 1]) but
    drawn in float32, for large images (ISIC's 200 x 200)."""
    channels, height, width = shape
    yy = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None]
    xx = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :]
    freq = rng.uniform(0.5, 3.0, (num_classes, channels, 2, 1, 1)).astype(np.float32)
    phase = rng.uniform(0.0, 2 * np.pi, (num_classes, channels, 2, 1, 1)).astype(np.float32)
    protos = 0.5 + 0.45 * (
        np.sin(2 * np.pi * freq[:, :, 0] * yy + phase[:, :, 0])
        * np.cos(2 * np.pi * freq[:, :, 1] * xx + phase[:, :, 1])
    )
    labels = rng.permutation(np.arange(n) % num_classes).astype(np.int64)
    x = rng.standard_normal((n, *shape), dtype=np.float32)
    x *= np.float32(0.2)
    x += protos[labels]
    np.clip(x, 0.0, 1.0, out=x)
    return x, labels

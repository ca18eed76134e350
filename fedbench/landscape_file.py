"""The loss-landscape file (.npz) and its settings: what the engine computes and writes
(`fedbench/engine/landscape.py`) and the figure reads and draws
(`fedbench/outputs/landscape.py`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.io import atomic_path

NPZ_ARRAYS = ("alphas", "betas", "loss")


class LandscapeError(ValueError):
    """Bad landscape settings or a landscape file that does not fit its figure."""


@dataclass(frozen=True)
class LandscapeSettings:
    """How one landscape is computed (span, points, batch_size) and drawn (clip, levels)."""

    span: float = 1.0  # the grid covers [-span, span]² in units of the directions
    points: int = 41  # per axis; odd, so the unperturbed model is the centre point
    batch_size: int | None = None  # None: the run's eval_batch_size (BN-free models ignore it)
    test_samples: int | None = None  # None: the whole test set; else a seeded random subset
    clip: float | None = None  # draw losses above this at this value (None: no clipping)
    levels: int = 20  # contour levels, shared by every panel

    def __post_init__(self) -> None:
        """Reject a non-positive span, an even or tiny grid, a bad batch size, clip or levels."""
        if not (isinstance(self.span, (int, float)) and math.isfinite(self.span) and self.span > 0):
            raise LandscapeError(f"landscape.span must be a positive number, got {self.span!r}")
        if not isinstance(self.points, int) or self.points < 3 or self.points % 2 == 0:
            raise LandscapeError(
                f"landscape.points must be an odd integer >= 3 (the centre is the unperturbed "
                f"model), got {self.points!r}"
            )
        if self.batch_size is not None and (
            not isinstance(self.batch_size, int) or self.batch_size < 1
        ):
            raise LandscapeError(
                f"landscape.batch_size must be a positive integer, got {self.batch_size!r}"
            )
        if self.test_samples is not None and (
            not isinstance(self.test_samples, int) or self.test_samples < 1
        ):
            raise LandscapeError(
                f"landscape.test_samples must be a positive integer, got {self.test_samples!r}"
            )
        if self.clip is not None and not (isinstance(self.clip, (int, float)) and self.clip > 0):
            raise LandscapeError(f"landscape.clip must be a positive number, got {self.clip!r}")
        if not isinstance(self.levels, int) or self.levels < 2:
            raise LandscapeError(f"landscape.levels must be an integer >= 2, got {self.levels!r}")

    @classmethod
    def for_scale(cls, raw: dict[str, Any] | None, scale: str) -> LandscapeSettings:
        """A figure's `landscape:` block, with its `scales: {scale: {...}}` override applied."""
        raw = dict(raw or {})
        per_scale = raw.pop("scales", {}) or {}
        valid = [f.name for f in fields(cls)]
        for where, block in (
            ("landscape", raw),
            *((f"scales.{s}", b) for s, b in per_scale.items()),
        ):
            if not isinstance(block, dict):
                raise LandscapeError(f"landscape.{where}: expected a mapping, got {block!r}")
            unknown = sorted(set(block) - set(valid))
            if unknown:
                raise LandscapeError(f"{where}: unknown key(s) {unknown}; valid: {valid}")
        return cls(**{**raw, **(per_scale.get(scale) or {})})

    def coords(self) -> np.ndarray:
        """The grid's coordinates along each axis; the centre one is exactly 0."""
        half = (self.points - 1) // 2
        return self.span * np.arange(-half, half + 1, dtype=np.float64) / half

    def compute_fields(self) -> dict[str, Any]:
        """The fields that change the computed grid (what the landscape rule's params hold)."""
        keys = ("span", "points", "batch_size", "test_samples")
        return {k: getattr(self, k) for k in keys}


def save_landscape(path: str | Path, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
    """Write a landscape .npz atomically: the arrays plus scalar metadata under `meta_*`."""
    payload = {k: np.asarray(arrays[k]) for k in NPZ_ARRAYS}
    payload.update({f"meta_{k}": np.asarray(v) for k, v in meta.items()})
    with atomic_path(path, suffix=".npz") as tmp, open(tmp, "wb") as f:
        np.savez(f, **payload)


def load_landscape(path: str | Path) -> dict[str, Any]:
    """The arrays and metadata of a landscape .npz, naming the file when it is not one."""
    with np.load(path, allow_pickle=False) as z:
        missing = [k for k in NPZ_ARRAYS if k not in z.files]
        if missing:
            raise LandscapeError(f"{path}: not a landscape file (missing {missing})")
        out: dict[str, Any] = {k: z[k] for k in NPZ_ARRAYS}
        for k in z.files:
            if k.startswith("meta_"):
                out[k[5:]] = z[k].item()
    return out

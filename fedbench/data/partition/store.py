"""The Partition record and its .npz file: save, load, verify."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.data.checksum import load_checked, save_checked
from fedbench.io import DamagedFile


@dataclass
class Partition:
    """Per-client train and test index arrays into the training pool, and how they were made."""

    train: list[np.ndarray]
    test: list[np.ndarray]
    meta: dict[str, Any] = field(default_factory=dict)
    # Training-pool labels after label noise (None = the dataset's own labels).
    labels: np.ndarray | None = None
    # Per-client validation indices held out of `train` (empty list = no validation split).
    val: list[np.ndarray] = field(default_factory=list)


def _pack(parts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(p) for p in parts])
    flat = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)
    return flat, offsets


def _unpack(flat: np.ndarray, offsets: np.ndarray) -> list[np.ndarray]:
    if (
        offsets.ndim != 1
        or offsets[0] != 0
        or offsets[-1] != len(flat)
        or np.any(np.diff(offsets) < 0)
    ):
        raise ValueError("offsets do not match the index array")
    return [flat[a:b].astype(np.int64) for a, b in zip(offsets[:-1], offsets[1:], strict=True)]


def save_partition(path: str | os.PathLike, p: Partition) -> None:
    """Write a partition to .npz atomically: concatenated indices + offsets, meta as JSON."""
    if len(p.train) != len(p.test) or len(p.val) not in (0, len(p.train)):
        raise ValueError(
            f"partition has {len(p.train)} train, {len(p.test)} test, {len(p.val)} val clients"
        )
    train, train_off = _pack(p.train)
    test, test_off = _pack(p.test)
    # Written only when there is one, so partitions without validation keep their bytes.
    val = dict(zip(("val", "val_offsets"), _pack(p.val))) if p.val else {}
    save_checked(
        path,
        dict(
            train=train,
            train_offsets=train_off,
            test=test,
            test_offsets=test_off,
            meta=np.array(json.dumps(p.meta, sort_keys=True)),
            **({} if p.labels is None else {"labels": np.asarray(p.labels, dtype=np.int64)}),
            **val,
        ),
    )


def _parse_partition(a: dict[str, np.ndarray]) -> Partition:
    train = _unpack(a["train"], a["train_offsets"])
    test = _unpack(a["test"], a["test_offsets"])
    meta = json.loads(str(a["meta"]))
    labels = a.get("labels")
    val = _unpack(a["val"], a["val_offsets"]) if "val" in a else []
    return Partition(train, test, meta, labels, val)


def load_partition(path: str | os.PathLike) -> Partition:
    """Read a partition written by `save_partition`; a missing or damaged file is named in the
    error with the snakemake command that writes it again (`fedbench.io.rewrite_advice`)."""
    path = Path(path)
    p = load_checked(path, "partition", "partition", _parse_partition)
    if len(p.train) != len(p.test) or len(p.val) not in (0, len(p.train)):
        problem = f"partition file {path}: train, test and val client counts differ"
        raise DamagedFile(path, problem, "partition")
    return p

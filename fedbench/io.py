"""Atomic file writes: nothing half-written is ever left at the destination."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml


@contextlib.contextmanager
def atomic_path(dest: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside `dest`; rename it onto `dest` only if the block succeeds."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=suffix + ".tmp", dir=dest.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, dest)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_text(dest: str | os.PathLike, text: str) -> None:
    """Write text atomically."""
    with atomic_path(dest) as tmp:
        tmp.write_text(text)


def write_bytes(dest: str | os.PathLike, data: bytes) -> None:
    """Write bytes atomically."""
    with atomic_path(dest) as tmp:
        tmp.write_bytes(data)


def write_yaml(dest: str | os.PathLike, obj: Any) -> None:
    """Write YAML atomically (keys in insertion order)."""
    write_text(dest, yaml.safe_dump(obj, sort_keys=False, default_flow_style=False))


def write_jsonl(dest: str | os.PathLike, rows: list[dict]) -> None:
    """Write one JSON object per line atomically, with stable formatting."""
    write_text(dest, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """Read a JSON-lines file."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]

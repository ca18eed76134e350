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


@contextlib.contextmanager
def atomic_paths(*dests: str | os.PathLike) -> Iterator[list[Path]]:
    """Several files, all or none: yield temporary paths, renamed onto `dests` only once every
    one has been written (a failure part-way, e.g. a full disk, leaves no destination touched)."""
    with contextlib.ExitStack() as stack:
        tmps = [stack.enter_context(_staged(d)) for d in dests]
        yield tmps
        for tmp, dest in zip(tmps, dests):
            os.replace(tmp, dest)


@contextlib.contextmanager
def _staged(dest: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside `dest`, removed on exit unless it was renamed."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    try:
        yield Path(tmp)
    finally:
        Path(tmp).unlink(missing_ok=True)


def dump_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write bytes in place (into a temporary path of `atomic_path`/`atomic_paths`)."""
    with open(path, "wb") as f:
        f.write(data)


def yaml_text(obj: Any) -> str:
    """YAML with keys in insertion order."""
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False)


def jsonl_text(rows: list[dict]) -> str:
    """One JSON object per line, with stable formatting."""
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)


def write_text(dest: str | os.PathLike, text: str) -> None:
    """Write text atomically."""
    write_bytes(dest, text.encode())


def write_bytes(dest: str | os.PathLike, data: bytes) -> None:
    """Write bytes atomically."""
    with atomic_path(dest) as tmp:
        dump_bytes(tmp, data)


def write_yaml(dest: str | os.PathLike, obj: Any) -> None:
    """Write YAML atomically (keys in insertion order)."""
    write_text(dest, yaml_text(obj))


def write_jsonl(dest: str | os.PathLike, rows: list[dict]) -> None:
    """Write one JSON object per line atomically, with stable formatting."""
    write_text(dest, jsonl_text(rows))


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """Read a JSON-lines file."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]

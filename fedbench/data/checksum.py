"""Content checksums of the .npz files the workflow writes (prepared datasets, partitions).

The writer stores a SHA-256 of the arrays' content as one more array (`sha256`) in the same file,
so the file and its checksum are renamed into place together; the loader recomputes it and a file
that was damaged after it was written (a flipped bit, a truncated copy) is named with the command
that writes it again (`fedbench.io.rewrite_advice`). Files written before checksums existed have no
`sha256` and are read unchecked.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np

from fedbench.io import DamagedFile, MissingFile, atomic_path

T = TypeVar("T")

KEY = "sha256"


class ChecksumError(DamagedFile):
    """A file whose content no longer matches the checksum written with it."""


def content_sha256(arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 over every array (name, dtype, shape, bytes), in name order; `sha256` excluded."""
    h = hashlib.sha256()
    for name in sorted(k for k in arrays if k != KEY):
        a = np.ascontiguousarray(arrays[name])
        header = f"{name}\0{a.dtype.str}\0{a.shape}\0".encode()
        h.update(len(header).to_bytes(8, "little") + header)
        if a.dtype.kind in "OV":
            raise TypeError(f"array {name!r}: dtype {a.dtype} cannot be checksummed")
        h.update(a.reshape(-1).view(np.uint8))  # no copy of a contiguous array
    return h.hexdigest()


def with_checksum(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The arrays plus their `sha256` entry, ready for np.savez."""
    return {**arrays, KEY: np.array(content_sha256(arrays))}


def verify(arrays: dict[str, np.ndarray], path: str | os.PathLike, rule: str) -> None:
    """Raise ChecksumError naming `path` if its stored checksum differs from its content; its
    message ends with the command that writes the file again with the workflow's `rule`."""
    if KEY not in arrays:
        return
    stored = str(arrays[KEY])
    actual = content_sha256(arrays)
    if stored != actual:
        raise ChecksumError(
            path,
            f"{path}: content does not match its stored sha256 (stored {stored[:12]}..., "
            f"content {actual[:12]}...): the file was damaged after it was written",
            rule,
        )


def save_checked(path: str | os.PathLike, arrays: dict[str, np.ndarray]) -> None:
    """Write the arrays and their checksum to one .npz file, atomically."""
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.savez(f, **with_checksum(arrays))


def load_checked(
    path: str | os.PathLike, what: str, rule: str, parse: Callable[[dict[str, np.ndarray]], T]
) -> T:
    """`parse` of the arrays of a .npz the workflow's `rule` wrote (a `what`: "dataset",
    "partition"), checksum verified; a missing, damaged or unparsable file is named in the error
    (MissingFile, DamagedFile) with the command that writes it again."""
    path = Path(path)
    if not path.is_file():
        raise MissingFile(path, what, rule)
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        verify(arrays, path, rule)
        return parse(arrays)
    except DamagedFile:
        raise
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as err:
        raise DamagedFile(
            path,
            f"{what} file {path} is corrupt or not a fedbench {what} ({type(err).__name__}: {err})",
            rule,
        ) from None

"""An IDX file (plain or gzip-compressed) as a numpy array, through torchvision's IDX reader.

The MNIST sources read through torchvision.datasets and no longer use this; it stays for the
callers outside the sources that still import it (tests/data/test_resize.py's reference arrays)
and can go with them.
"""

from __future__ import annotations

import gzip
import os
import tempfile
from pathlib import Path

import numpy as np


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read an IDX file; gzip is detected from its magic bytes, not its name."""
    from torchvision.datasets.mnist import read_sn3_pascalvincent_tensor

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"IDX file {path} does not exist")
    raw = path.read_bytes()
    if raw[:2] != b"\x1f\x8b":
        return read_sn3_pascalvincent_tensor(str(path)).numpy()
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / path.stem
        plain.write_bytes(gzip.decompress(raw))
        return read_sn3_pascalvincent_tensor(str(plain)).numpy()

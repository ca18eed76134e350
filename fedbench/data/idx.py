"""Reader for the IDX format of MNIST-like files (plain or gzip-compressed)."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np

# Type byte of the IDX header -> big-endian numpy dtype.
IDX_DTYPES = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def parse_idx(data: bytes, what: str = "IDX data") -> np.ndarray:
    """Decode the bytes of one IDX file into an array of its declared shape."""
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise ValueError(f"{what}: not an IDX file (bad magic number)")
    code, ndim = data[2], data[3]
    if code not in IDX_DTYPES:
        raise ValueError(f"{what}: unknown IDX type code 0x{code:02x}")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise ValueError(f"{what}: truncated IDX header")
    shape = tuple(int(d) for d in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    dtype = IDX_DTYPES[code]
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(data) - header != expected:
        raise ValueError(
            f"{what}: IDX payload has {len(data) - header} bytes, header {shape} needs {expected}"
        )
    arr = np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)
    return arr.astype(dtype.newbyteorder("="))


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read an IDX file; gzip is detected from its magic bytes, not its name."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"IDX file {path} does not exist")
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as err:
            raise ValueError(f"{path}: corrupt gzip stream ({err})") from None
    return parse_idx(raw, what=str(path))

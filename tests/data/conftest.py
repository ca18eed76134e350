"""Fixtures for the data tests: a local HTTP server and tiny handcrafted dataset files."""

from __future__ import annotations

import gzip
import http.server
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import numpy as np
import pytest


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt: str, *args: object) -> None:
        """Keep the test output clean."""


@pytest.fixture
def http_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    """(base URL, served folder) of a threaded HTTP server on 127.0.0.1, shut down afterwards."""
    root = tmp_path / "served"
    root.mkdir()
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), partial(_QuietHandler, directory=str(root))
    )
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", root
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def idx_bytes(arr: np.ndarray) -> bytes:
    """The IDX encoding of a uint8 array."""
    arr = np.ascontiguousarray(arr, dtype=np.uint8)
    header = bytes([0, 0, 0x08, arr.ndim]) + np.array(arr.shape, dtype=">u4").tobytes()
    return header + arr.tobytes()


def write_fake_idx_set(folder: Path, n_train: int = 12, n_test: int = 5) -> dict[str, bytes]:
    """The four MNIST-layout .gz files with tiny random content; returns name -> file bytes."""
    rng = np.random.default_rng(7)
    content = {
        "train-images-idx3-ubyte.gz": rng.integers(0, 256, (n_train, 28, 28)),
        "train-labels-idx1-ubyte.gz": np.arange(n_train) % 10,
        "t10k-images-idx3-ubyte.gz": rng.integers(0, 256, (n_test, 28, 28)),
        "t10k-labels-idx1-ubyte.gz": np.arange(n_test) % 10,
    }
    out = {}
    folder.mkdir(parents=True, exist_ok=True)
    for name, arr in content.items():
        data = gzip.compress(idx_bytes(arr), mtime=0)
        (folder / name).write_bytes(data)
        out[name] = data
    return out


@pytest.fixture
def fake_idx_set():
    """The `write_fake_idx_set` helper, as a fixture (test modules here are not a package)."""
    return write_fake_idx_set


@pytest.fixture
def encode_idx():
    """The `idx_bytes` helper, as a fixture."""
    return idx_bytes

"""Download and verify files: urllib only, checksum before rename, every mirror tried in turn;
and the shared pieces of the sources that a library fetches (torchvision, medmnist): a bounded
socket time-out around its download, and the error that says which files to place by hand."""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import os
import shutil
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

from fedbench.io import atomic_path

DEFAULT_TIMEOUT = 30.0
CHUNK = 1 << 20


class FetchError(RuntimeError):
    """A file could not be fetched or verified; the message says where to place it by hand."""


def digests(path: str | os.PathLike) -> dict[str, str | int]:
    """MD5, SHA-256 and size of a file, in one pass."""
    md5, sha = hashlib.md5(usedforsecurity=False), hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            md5.update(chunk)
            sha.update(chunk)
            size += len(chunk)
    return {"md5": md5.hexdigest(), "sha256": sha.hexdigest(), "bytes": size}


def verify(path: str | os.PathLike, md5: str | None = None, sha256: str | None = None) -> bool:
    """True when the file exists and matches every checksum given (none given: existence only)."""
    if not Path(path).is_file():
        return False
    if md5 is None and sha256 is None:
        return True
    d = digests(path)
    return (md5 is None or d["md5"] == md5.lower()) and (
        sha256 is None or d["sha256"] == sha256.lower()
    )


def _reason(err: BaseException) -> str:
    if isinstance(err, urllib.error.HTTPError):
        return f"HTTP {err.code} {err.reason}"
    if isinstance(err, urllib.error.URLError):
        return f"network error: {err.reason}"
    if isinstance(err, (socket.timeout, TimeoutError)):
        return "timed out"
    return f"{type(err).__name__}: {err}"


def hand_placement_hint(dest: Path, md5: str | None, sha256: str | None) -> str:
    """The sentence telling a user where to put a file they downloaded themselves."""
    sums = ", ".join(f"{k}={v}" for k, v in (("md5", md5), ("sha256", sha256)) if v)
    return f"Download it by hand and place it at {dest}" + (f" (expected {sums})." if sums else ".")


def download(
    url_list: str | Sequence[str],
    dest: str | os.PathLike,
    md5: str | None = None,
    sha256: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> str:
    """Fetch `dest` from the first URL that serves a verified copy; return that URL."""
    urls = (url_list,) if isinstance(url_list, str) else tuple(url_list)
    dest = Path(dest)
    if not urls:
        raise FetchError(f"no URL known for {dest.name}. " + hand_placement_hint(dest, md5, sha256))
    tried: list[str] = []
    for url in urls:
        try:
            with atomic_path(dest) as tmp:
                with urllib.request.urlopen(url, timeout=timeout) as resp, open(tmp, "wb") as f:
                    shutil.copyfileobj(resp, f, CHUNK)
                if not verify(tmp, md5, sha256):
                    got = digests(tmp)
                    raise ValueError(
                        f"checksum mismatch (got md5={got['md5']}, sha256={got['sha256']})"
                    )
            return url
        except (OSError, ValueError, http.client.HTTPException) as err:
            tried.append(f"  {url}: {_reason(err)}")
    raise FetchError(
        f"could not fetch {dest.name}; tried:\n"
        + "\n".join(tried)
        + "\n"
        + hand_placement_hint(dest, md5, sha256)
    )


@contextlib.contextmanager
def socket_timeout(seconds: float) -> Iterator[None]:
    """Every socket opened inside the block times out after `seconds` (a library's downloader
    that takes no time-out of its own then fails in seconds without network, never hangs)."""
    old = socket.getdefaulttimeout()
    socket.setdefaulttimeout(seconds)
    try:
        yield
    finally:
        socket.setdefaulttimeout(old)


def by_hand(name: str, reason: str, places: Sequence[tuple[Path, str]], then: str) -> str:
    """The message of a fetch or load that found no data: the dataset, why, and each exact file
    to place (path <- URL) for a machine without network."""
    lines = [f"{name}: {reason}", "To place the files by hand (e.g. on a machine without network):"]
    lines += [f"  {path}  <-  {url}" for path, url in places]
    return "\n".join([*lines, then])

"""Checksums that no publisher states but third-party code cites: recorded, never enforced."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, ClassVar

from fedbench.data.base import MANIFEST, Source
from fedbench.data.fetch import DEFAULT_TIMEOUT
from fedbench.io import write_text


class CitedChecksums(Source):
    """A source whose files have no published checksum; fetch notes whether cited MD5s match.

    The files are fetched unchecked (`verified_by: "unchecked"`) and their SHA-256 is recorded in
    MANIFEST.json, which later runs verify. Where other projects list an MD5 for a file,
    `cited_md5` names it and the manifest says whether the download agrees (`cited_md5_matches`),
    so a changed upstream file shows up without a wrong guess ever blocking a fetch.
    """

    cited_md5: ClassVar[dict[str, tuple[str, str]]] = {}  # filename -> (md5, who cites it)

    def fetch(
        self, raw_dir: str | os.PathLike, *, timeout: float = DEFAULT_TIMEOUT, **params: Any
    ) -> dict[str, dict[str, Any]]:
        """Fetch as usual, then record in the manifest how each file compares to its cited MD5."""
        manifest = super().fetch(raw_dir, timeout=timeout, **params)
        for name, entry in manifest.items():
            if name in self.cited_md5:
                md5, cited_by = self.cited_md5[name]
                entry["cited_md5"] = md5
                entry["cited_md5_source"] = cited_by
                entry["cited_md5_matches"] = entry["md5"] == md5
        write_text(Path(raw_dir) / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        return manifest

"""Fixtures of the paper-values tests, read from the test module: `PAPER_ID` (the paper values
file) and `SOURCE_TEXT` (the paper or thesis text file they were transcribed from)."""

from __future__ import annotations

import pytest

from fedbench.papers import load_paper_values


@pytest.fixture(scope="module")
def pv(request):
    """The module's paper values, loaded with the project loader."""
    return load_paper_values(request.module.PAPER_ID)


@pytest.fixture(scope="module")
def source_lines(request) -> list[str]:
    """The lines of the module's source text; skips where the file is absent."""
    path = request.module.SOURCE_TEXT
    if not path.exists():
        pytest.skip(
            f"source text not available at {path} (only in the shared workspace, not in CI)"
        )
    return path.read_text(encoding="utf-8").splitlines()

"""Every CSV a grid builds reads with `pandas.read_csv(path)` as it is (one header row, tidy
rows), and every table's and claims page's notes are in the .json sidecar beside it.

Run over built results: `make test` runs it after the smoke grids with FEDBENCH_BUILT=results/smoke
(it must find them there); in a plain `pytest` it reads results/smoke if present, else skips."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from fedbench.report.sidecar import read_sidecar

ROOT = Path(__file__).resolve().parents[1]
BUILT = os.environ.get("FEDBENCH_BUILT")


def _built() -> Path:
    root = Path(BUILT) if BUILT else ROOT / "results" / "smoke"
    if not BUILT and not (root / "papers").is_dir():
        pytest.skip("no built results/smoke (make test builds them, then runs this file)")
    assert (root / "papers").is_dir(), f"{root}: no papers/ folder built"
    return root


def test_every_built_csv_reads_with_pandas_and_keeps_its_notes():
    root = _built()
    csvs = sorted(p for p in root.rglob("*.csv") if "runs" not in p.relative_to(root).parts)
    assert csvs, f"{root}: no CSV built"
    for path in csvs:
        frame = pd.read_csv(path)  # raises on '#' header lines or ragged rows
        assert len(frame) and not any(str(c).startswith("#") for c in frame.columns), path
        where = path.relative_to(root).parts[0]
        if where == "papers" or (where == "claims" and path.stem != "index"):
            # a table's or a claims page's notes: in the sidecar, in order, none lost
            notes = read_sidecar(path.with_suffix(".json"))
            assert ("Table" if where == "papers" else "Work") in dict(notes), path


def test_the_built_landing_page_shows_every_table_caption():
    """`snakemake index` after the smoke grids: a headless Chromium renders results/smoke's
    landing page, and every built table's caption (from its sidecar) is in the page's text."""
    from test_landing import chromium, rendered_text

    root = _built()
    page = root / "index.html"
    assert page.is_file(), f"{page}: not built (snakemake index --config scale={root.name})"
    if chromium() is None:
        pytest.skip("no Chromium here (make test installs Debian's)")
    text = rendered_text(page, root / "index.screenshot.png")
    missing = []
    for sidecar in sorted((root / "papers").glob("*/*.json")):
        table = dict(read_sidecar(sidecar)).get("Table", "")
        if table and table not in text:
            missing.append(f"{sidecar}: {table}")
    assert not missing, "captions not on the landing page:\n" + "\n".join(missing[:10])


def test_the_landing_page_is_the_reports_first_entry(tmp_path):
    """`snakemake --report ... index`: the report's first category is the landing page's."""
    import json
    import re
    import subprocess
    import sys

    root = _built()
    report = tmp_path / "report.html"
    subprocess.run(
        [sys.executable, "-m", "snakemake", "--report", str(report), "index"]
        + ["--config", f"scale={root.name}"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=600,
    )
    line = re.search(r"var categories = (\{.*?\});\n", report.read_text()).group(1)
    categories = json.loads(line)
    first = next(iter(categories))
    assert first == "Overview", list(categories)[:3]
    assert categories[first] == {
        f"results ({root.name} scale)": [f"results/{root.name}/index.html"]
    }

"""The landing page of a scale (results/{scale}/index.html): every built table inline under its
caption, every figure embedded, each with links to its files; the report's first entry; and a
headless Chromium renders it with every caption in the page's text."""

from __future__ import annotations

import base64
import dataclasses
import html
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from fedbench.report.landing import landing_page, page_inputs

ROOT = Path(__file__).resolve().parents[1]
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def chromium() -> str | None:
    return next(
        (c for c in ("chromium", "chromium-browser", "google-chrome") if shutil.which(c)), None
    )


def rendered_text(page: Path, shot: Path | None = None) -> str:
    """The page's DOM after a headless Chromium rendered it (scripts run), and a screenshot."""
    exe = chromium()
    base = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    url = page.resolve().as_uri()
    if shot is not None:
        subprocess.run(
            [*base, f"--screenshot={shot}", "--window-size=1280,2400", url],
            check=True,
            capture_output=True,
            timeout=120,
        )
    dom = subprocess.run(
        [*base, "--dump-dom", url], check=True, capture_output=True, text=True, timeout=120
    ).stdout
    dom = re.sub(r"<(script|style)\b.*?</\1>", " ", dom, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", dom)).split())


def _built(tmp_path: Path) -> Path:
    """A scale folder with the quick grid's table1 (by the table writer, no run finished yet)
    and one figure."""
    from fedbench.config import load_catalog
    from fedbench.grid import load_grid, output_spec
    from fedbench.report.tables import build_table, write_table

    catalog = load_catalog(str(ROOT / "config" / "config.yaml"))
    grid = load_grid(ROOT / "config" / "papers" / "quick.yaml", catalog)
    s = output_spec(grid, "tables", "table1", catalog, "smoke")
    s = dataclasses.replace(s, cells={cell: [] for cell in s.cells})  # no run finished yet
    scale = tmp_path / "results" / "smoke"
    write_table(build_table(s, None), s, scale / "papers" / "quick" / "table1")
    (scale / "papers" / "quick" / "figure1.png").write_bytes(PNG)
    return scale


CAPTION = (  # quick.yaml's table1 (an apostrophe and parentheses: escaped in the page)
    "table1: Top-1 accuracy of the global model on the clients' local test splits "
    "(sample-weighted mean over clients), final round"
)


def test_the_page_holds_every_table_under_its_caption_and_every_figure(tmp_path):
    scale = _built(tmp_path)
    text = landing_page(scale)
    assert "<h1>fedbench results, smoke scale</h1>" in text
    assert html.escape(CAPTION, quote=True) in text  # escaped caption
    assert text.count('<table class="sortable">') == 1 and "SCAFFOLD" in text
    assert f'src="data:image/png;base64,{base64.b64encode(PNG).decode()}"' in text
    for f in ("table1.md", "table1.csv", "table1.json", "figure1.png"):
        assert f'href="papers/quick/{f}"' in text
    assert "Nothing built" in landing_page(tmp_path / "results" / "quick")
    inputs = page_inputs("smoke", tmp_path / "results")
    assert any(p.endswith("table1.json") for p in inputs) and not any(
        p.endswith(".md") for p in inputs
    )


def test_the_landing_rule_is_the_reports_first_category():
    rules = (ROOT / "workflow" / "rules" / "report.smk").read_text()
    block = rules.split("rule landing:")[1].split("\nrule ")[0]
    assert 'category="Overview"' in block and '"results/{scale}/index.html"' in block
    categories = set(
        re.findall(
            r'category="([^"]+)"', (ROOT / "workflow" / "rules").joinpath("report.smk").read_text()
        )
    )
    categories |= set(
        re.findall(r'category="([^"]+)"', (ROOT / "workflow" / "rules" / "claims.smk").read_text())
    )
    assert sorted(categories)[0] == "Overview"  # before every grid's ({paper}) and "claims"


@pytest.mark.skipif(chromium() is None, reason="no Chromium here (make test installs Debian's)")
def test_chromium_renders_the_page_with_every_caption(tmp_path):
    scale = _built(tmp_path)
    (scale / "index.html").write_text(landing_page(scale))
    shot = tmp_path / "index.png"
    text = rendered_text(scale / "index.html", shot)
    assert CAPTION in text
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:4] == b"\x89PNG"

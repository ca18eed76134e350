"""The README: short, its quick table the one `make quick` writes, its links and image present."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
QUICK_TABLE1 = ROOT / "results" / "quick" / "papers" / "quick" / "table1.md"
QUICK_FIGURE = ROOT / "docs" / "img" / "quick_figure1.png"
MARKER = "<!-- quick-table1:"
MAX_LINES = 250

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def _prose(text: str, code: str = "") -> list[str]:
    """The lines outside fenced code blocks, each inline code span replaced by `code`."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(re.sub(r"`([^`]*)`", code, line))
    return lines


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown file (duplicates get -1, -2, ...)."""
    seen: dict[str, int] = {}
    anchors = set()
    for line in _prose(path.read_text(encoding="utf-8"), code=r"\1"):
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def _docs() -> list[Path]:
    """README.md, the per-paper pages and the other pages that hold what the README used to."""
    moved = [ROOT / "docs" / name for name in ("running.md", "testing.md", "design.md")]
    return [README, *sorted((ROOT / "docs" / "papers").glob("*.md")), *moved]


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _links(page: Path) -> list[str]:
    """The relative link targets of a Markdown page (images included)."""
    targets = []
    for line in _prose(page.read_text(encoding="utf-8")):
        targets += [t for t in LINK.findall(line) if not SCHEME.match(t)]
    return targets


def _table(lines: list[str]) -> list[list[str]]:
    """The Markdown table at the top of `lines`: header and body rows as stripped cells."""
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not all(re.fullmatch(r":?-+:?", c) for c in cells):
            rows.append(cells)
    return rows


def _value(cell: str) -> str:
    """A table cell's number as the README prints it: `mean ± std`, without `(n=k)`."""
    return " ".join(re.sub(r"\(n=\d+\)", "", cell).split())


def test_readme_is_short():
    n = len(README.read_text(encoding="utf-8").splitlines())
    assert n <= MAX_LINES, f"README.md has {n} lines; keep it within {MAX_LINES} (move to docs/)"


def test_relative_links_resolve():
    broken = []
    for page in _docs():
        for target in _links(page):
            path_part, _, fragment = target.partition("#")
            path = (page.parent / path_part).resolve() if path_part else page
            rel = _rel(page)
            if not path.exists():
                broken.append(f"{rel}: {target} (no such file)")
            elif fragment and path.suffix == ".md" and fragment not in _anchors(path):
                broken.append(f"{rel}: {target} (no heading #{fragment} in {path.name})")
    assert not broken, "broken relative links:\n" + "\n".join(broken)


def test_quick_figure_is_shown():
    assert QUICK_FIGURE.is_file(), f"{_rel(QUICK_FIGURE)} is missing"
    assert "(docs/img/quick_figure1.png)" in README.read_text(encoding="utf-8")


def test_quick_table_is_make_quicks():
    if not QUICK_TABLE1.is_file():
        pytest.skip(f"{_rel(QUICK_TABLE1)} not built here (run `make quick`)")
    lines = README.read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(MARKER)]
    assert len(starts) == 1, f"README.md needs exactly one {MARKER} ... --> line above its table"
    ours = _table(lines[starts[0] + 1 :])

    built_lines = QUICK_TABLE1.read_text(encoding="utf-8").splitlines()
    first = next(i for i, line in enumerate(built_lines) if line.startswith("|"))
    built = _table(built_lines[first:])
    header, body = built[0], built[1:]
    if not all("fashion-mnist" in h.lower() or "fmnist" in h.lower() for h in header[1:3]):
        pytest.skip(f"{_rel(QUICK_TABLE1)} was built without Fashion-MNIST: {header}")
    # A table with paper values prints paper | ours | Δ per column; the README shows ours.
    cols = [j for j, h in enumerate(header) if h.endswith(" ours")] or range(1, len(header))

    assert len(ours) - 1 == len(body), "README's quick table and table1.md differ in rows"
    assert len(ours[0]) - 1 == len(cols), "README's quick table and table1.md differ in columns"
    for mine, row in zip(ours[1:], body):
        assert mine[0].split()[0] == row[0].split()[0], (mine[0], row[0])
        got, want = [_value(c) for c in mine[1:]], [_value(row[j]) for j in cols]
        assert got == want, (
            f"README's {mine[0]} row {got} != {_rel(QUICK_TABLE1)}'s {want}: copy the "
            "numbers of the current `make quick` into README.md (and its figure1.png to "
            "docs/img/quick_figure1.png)"
        )


def test_data_table_is_the_status_commands():
    """The README's data table is `fedbench data status --scale paper --raw /nonexistent
    --summary` (a fresh machine: nothing fetched), regenerated here from the config."""
    from fedbench.data import status

    text = README.read_text(encoding="utf-8")
    marker = "<!-- data-status:"
    assert marker in text, "the README's data table lost its marker"
    block = text.split(marker, 1)[1].split("\n", 1)[1]
    shown = block.split("\n\n", 1)[0].strip()
    want = status.summary(status.rows(ROOT / "config", "/nonexistent", "paper")).strip()
    assert shown == want, (
        "README data table is stale; regenerate it with `fedbench data status --scale paper "
        "--raw /nonexistent --summary`"
    )


def test_claims_summary_is_a_fresh_clones(tmp_path, monkeypatch):
    """The README's claims summary is the table of results/paper/claims/index.md as a fresh clone
    builds it (no runs here), regenerated from the claims files."""
    from fedbench.claims import WORKS, load_claims
    from fedbench.claims.page import evaluate_work, summary_row
    from fedbench.config import load_catalog

    config = ROOT / "config" / "config.yaml"
    catalog = load_catalog(config)
    monkeypatch.chdir(tmp_path)  # run folders are relative: none exists here
    want = [
        summary_row(evaluate_work(load_claims(w, catalog, config), catalog, "paper")) for w in WORKS
    ]
    lines = README.read_text(encoding="utf-8").splitlines()
    marker = "<!-- claims-summary:"
    starts = [i for i, line in enumerate(lines) if line.startswith(marker)]
    assert len(starts) == 1, f"README.md needs exactly one {marker} ... --> line above its table"
    shown = _table(lines[starts[0] + 1 :])[1:]
    assert shown == want, (
        "README's claims summary is stale: copy the table of results/paper/claims/index.md "
        f"built on a fresh clone (`snakemake claims`); want rows {want}"
    )

"""A work's claims page (results/{scale}/claims/{work}.md, .html, .csv) and the page across works
(results/{scale}/claims/index.md, .html, .csv): each claim's quote and line, the cells it reads
and its three verdicts with their numbers."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

from fedbench.claims.evaluate import Reading, read_grid, read_printed, read_runs
from fedbench.claims.load import Claim, ClaimsFile
from fedbench.claims.stats import (
    CONTRADICTED,
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NO_VALUES,
    NOT_RUN,
    SUPPORTED,
)
from fedbench.io import write_text
from fedbench.report.sidecar import read_sidecar, sidecar_json

UNTESTABLE = "untestable"
TEST_SENTENCE = (
    "Each comparison is tested over seeds, not over means: its difference is taken seed by seed "
    "where the cells share seeds (Welch's interval where they share none) and a two-sided 95 % "
    "t-interval of its mean decides: supported if the interval lies on the claimed side, "
    "contradicted if it lies on the other, inconclusive if it straddles; a single seed is never a "
    "verdict (not run). With n = 3 seeds the interval is wide (t = 4.30 · sd / √3); a claim over "
    "many cells is tested cell by cell, with no correction for their number."
)
PRINTED_SENTENCE = (
    "the same comparisons on the printed numbers (one per cell, no "
    "interval): a claim holds or fails on them."
)
CSV_COLUMNS = (
    "work",
    "id",
    "line",
    "section",
    "quote",
    "cells",
    "printed",
    "printed_detail",
    "ours",
    "ours_detail",
    "small",
    "small_detail",
    "untestable",
    "note",
)


@dataclass(frozen=True)
class ClaimVerdicts:
    """One claim and its three readings (None: the claim has no check for that reading)."""

    claim: Claim
    printed: Reading | None
    ours: Reading | None
    small: Reading | None


@dataclass(frozen=True)
class WorkPage:
    """A work's claims read at one scale."""

    work: str
    scale: str
    text: str
    source: str
    paper_grid: str
    paper_scale: str
    quick_grid: str
    quick_scale: str
    rows: tuple[ClaimVerdicts, ...]


def small_scale(scale: str) -> str:
    """The scale a page reads the quick grid at: quick beside paper-scale runs, else its own."""
    return "quick" if scale == "paper" else scale


def evaluate_work(cf: ClaimsFile, catalog: dict, scale: str) -> WorkPage:
    """Every claim of a work in its three readings: printed values, the paper grid at `scale`,
    the quick grid at `small_scale(scale)`."""
    quick_scale = small_scale(scale)
    paper_reads = (
        read_grid(cf.paper_grid, [t for c in cf.claims for t in c.ours_tests], catalog, scale)
        if cf.paper_grid is not None
        else {}
    )
    quick_reads = (
        read_grid(cf.quick_grid, [t for c in cf.claims for t in c.quick], catalog, quick_scale)
        if cf.quick_grid is not None
        else {}
    )
    rows = []
    for c in cf.claims:
        printed = read_printed(c.checks, cf.paper_grid, cf.printed) if c.checks else None
        ours = read_runs(c.ours_tests, paper_reads) if c.ours_tests else None
        small = read_runs(c.quick, quick_reads) if c.quick else None
        rows.append(ClaimVerdicts(c, printed, ours, small))
    return WorkPage(
        work=cf.work,
        scale=scale,
        text=cf.text,
        source=cf.source,
        paper_grid=cf.paper_grid.name if cf.paper_grid is not None else "",
        paper_scale=scale,
        quick_grid=cf.quick_grid.name if cf.quick_grid is not None else "",
        quick_scale=quick_scale,
        rows=tuple(rows),
    )


def _verdict(reading: Reading | None, claim: Claim) -> str:
    if reading is None:
        return UNTESTABLE if claim.untestable else "—"
    return reading.verdict


def _detail(reading: Reading | None) -> str:
    """'12 comparisons: 11 holds, 1 fails; fails: a better than b in x (Δ −3.98)' and the like."""
    if reading is None:
        return ""
    if not reading.results:
        return reading.why
    counts = ", ".join(f"{n} {v}" for v, n in sorted(reading.counts.items()))
    bad = [r for r in reading.results if r.verdict in (FAILS, CONTRADICTED)]
    open_ = [r for r in reading.results if r.verdict in (INCONCLUSIVE, NOT_RUN, NO_VALUES)]
    shown = bad or open_ or [min(reading.results, key=_margin)]  # else: the closest call
    parts = [f"{len(reading.results)} comparison(s): {counts}"]
    for r in shown[:3]:
        parts.append(f"{r.verdict}: {r.label} ({_numbers(r)})")
    if len(shown) > 3:
        parts.append(f"and {len(shown) - 3} more")
    if reading.why:
        parts.append(reading.why)
    return "; ".join(parts)


def _margin(r) -> float:
    """How far a comparison is from its boundary (its interval's low end, or the printed Δ)."""
    if r.interval is not None:
        return r.interval.lo
    return r.delta if r.delta is not None else math.inf


def _numbers(r) -> str:
    if r.interval is not None and r.interval.how.startswith("exact"):
        return f"Δ {r.interval.mean:+.3g}, exact"
    if r.interval is not None:
        iv = r.interval
        return f"Δ {iv.mean:+.3g}, 95 % CI [{iv.lo:+.3g}, {iv.hi:+.3g}], n = {iv.n}, {iv.how}"
    if r.delta is not None and math.isfinite(r.delta):
        return f"Δ {r.delta:+.3g} printed"
    return r.why


def _cells(claim: Claim) -> str:
    tests = claim.checks or claim.quick
    return "; ".join(t.text for t in tests)


def page_lines(page: WorkPage) -> list[tuple[str, str]]:
    """(key, text) header lines of a work's page."""
    lines = [
        ("Work", page.work),
        (
            "Text",
            f"{page.text} (lines cited as L<n>)" + (f"; {page.source}" if page.source else ""),
        ),
        ("Test", TEST_SENTENCE),
        ("Paper's own tables", PRINTED_SENTENCE),
    ]
    if page.paper_grid:
        lines.append(("Ours", f"grid {page.paper_grid} at scale {page.paper_scale}"))
    if page.quick_grid:
        lines.append(
            (
                "Small scale",
                f"grid {page.quick_grid} at scale {page.quick_scale}: the same comparison on "
                "smaller data (each claim names which quick table tests it)",
            )
        )
    if page.scale == "smoke" or page.quick_scale == "smoke":
        lines.append(
            (
                "WARNING",
                "smoke scale: generated stand-in data and 2 rounds; verdicts on our runs check "
                "the pipeline and mean nothing",
            )
        )
    return lines


HEAD = ("claim", "line", "section", "paper's own tables", "ours", "small scale")


def _table_rows(page: WorkPage) -> list[list[str]]:
    return [
        [
            r.claim.id,
            r.claim.lines,
            r.claim.section,
            _verdict(r.printed, r.claim),
            _verdict(r.ours, r.claim) + (" (part)" if r.claim.runs and r.ours else ""),
            _verdict(r.small, r.claim),
        ]
        for r in page.rows
    ]


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(page: WorkPage) -> str:
    out = [f"# Claims: {page.work} (scale {page.scale})", ""]
    for key, text in page_lines(page):
        out.append(f"- **WARNING: {text}**" if key == "WARNING" else f"- {key}: {text}")
    out += ["", "| " + " | ".join(HEAD) + " |", "|:--|:--|:--|:--|:--|:--|"]
    out += ["| " + " | ".join(_md(c) for c in line) + " |" for line in _table_rows(page)]
    for r in page.rows:
        c = r.claim
        out += ["", f"## {c.id} ({c.lines}, {c.section})", "", f"> {c.quote}", ""]
        if c.note:
            out.append(f"- Read as: {c.note}")
        if c.untestable:
            out.append(f"- No table tests it: {c.untestable}")
        if c.checks:
            out.append(f"- Cells: {'; '.join(t.text for t in c.checks)}")
        if c.runs:
            out.append(
                f"- Cells our runs read (a part of the claim): {'; '.join(t.text for t in c.runs)}"
            )
            out.append(f"- Left out of our reading: {c.runs_note}")
        for label, reading in (("Paper's own tables", r.printed), ("Ours", r.ours)):
            if reading is not None:
                out += _reading_lines(label, reading)
        if c.quick:
            out.append(f"- Small-scale cells: {'; '.join(t.text for t in c.quick)}")
            if c.quick_note:
                out.append(f"- Small-scale table: {c.quick_note}")
            out += _reading_lines("Small scale", r.small)
    return "\n".join(out) + "\n"


MAX_LISTED = 24  # comparisons listed under a reading on the page (the CSV keeps the count)


def _reading_lines(label: str, reading: Reading) -> list[str]:
    """'- Label: **verdict** (counts)' and one sub-line per comparison with its numbers."""
    counts = ", ".join(f"{n} {v}" for v, n in sorted(reading.counts.items()))
    head = f"- {label}: **{reading.verdict}**" + (f" ({counts})" if counts else "")
    if reading.why:
        head += f"; {reading.why}"
    lines = [head]
    if len({(r.verdict, r.why) for r in reading.results}) == 1 and reading.results[0].why:
        return [*lines, f"  - all {len(reading.results)}: {reading.results[0].why}"]
    for res in reading.results[:MAX_LISTED]:
        lines.append(f"  - {res.verdict}: {res.label} ({_numbers(res)})")
    if len(reading.results) > MAX_LISTED:
        lines.append(f"  - and {len(reading.results) - MAX_LISTED} more (see the CSV's counts)")
    return lines


def csv_rows(page: WorkPage) -> list[dict[str, str]]:
    return [
        {
            "work": page.work,
            "id": r.claim.id,
            "line": r.claim.lines,
            "section": r.claim.section,
            "quote": r.claim.quote,
            "cells": _cells(r.claim),
            "printed": _verdict(r.printed, r.claim),
            "printed_detail": _detail(r.printed),
            "ours": _verdict(r.ours, r.claim),
            "ours_detail": (f"part: {r.claim.runs_note}; " if r.claim.runs and r.ours else "")
            + _detail(r.ours),
            "small": _verdict(r.small, r.claim),
            "small_detail": _detail(r.small),
            "untestable": r.claim.untestable,
            "note": r.claim.note,
        }
        for r in page.rows
    ]


def to_csv(page: WorkPage) -> str:
    """One row per claim under one header row (the page's header lines: the .json sidecar)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(csv_rows(page))
    return buf.getvalue()


def to_json(page: WorkPage) -> str:
    return sidecar_json(page.work, page_lines(page))


def to_html(page: WorkPage) -> str:
    from fedbench.report.html_table import html_table

    rows = [
        [*line[:3], f"{r.claim.quote}", *line[3:]] for line, r in zip(_table_rows(page), page.rows)
    ]
    return html_table(
        f"Claims: {page.work} (scale {page.scale})",
        page_lines(page)[1:],
        None,
        ["claim", "line", "section", "quote", *HEAD[3:]],
        rows,
        foot=(
            f"Each claim's cells and numbers: {page.work}.md and {page.work}.csv (its notes in "
            f"{page.work}.json) in results/{page.scale}/claims/."
        ),
    )


def write_page(page: WorkPage, out_prefix: str | Path) -> list[Path]:
    """out_prefix.md, .html, .csv and .json (the CSV's notes)."""
    prefix = Path(out_prefix)
    paths = []
    renders = ((".md", to_markdown), (".html", to_html), (".csv", to_csv), (".json", to_json))
    for ext, render in renders:
        path = prefix.with_name(prefix.name + ext)
        write_text(path, render(page))
        paths.append(path)
    return paths


# --- the page across works, and the README's summary ------------------------------------------

SUMMARY_HEAD = (
    "paper",
    "claims",
    "holding on the paper's own tables",
    "supported / contradicted / inconclusive / not run on ours",
)


def summary_row(page: WorkPage) -> list[str]:
    """paper | claims (untestable) | holds / with a printed reading | verdict counts on ours
    (the paper grid's reading; the quick work's: its own grid's)."""
    return summary_from_rows(page.work, csv_rows(page), own="ours" if page.paper_grid else "small")


def summary_from_rows(work: str, rows: list[dict[str, str]], own: str = "ours") -> list[str]:
    """`summary_row` from a page's CSV rows (`own`: the column holding our reading)."""
    printed = [r["printed"] for r in rows if r["printed"] in (HOLDS, FAILS, NO_VALUES)]
    ours = [r[own] for r in rows]
    counts = [sum(1 for v in ours if v == x) for x in (SUPPORTED, CONTRADICTED, INCONCLUSIVE)]
    counts.append(sum(1 for v in ours if v == NOT_RUN))
    untestable = sum(1 for r in rows if r["untestable"])
    held = sum(1 for v in printed if v == HOLDS)
    with_values = sum(1 for v in printed if v != NO_VALUES)
    return [
        work,
        f"{len(rows)} ({untestable} untestable)",
        f"{held} / {with_values}" if with_values else "— (no printed values)",
        " / ".join(str(n) for n in counts),
    ]


def read_page_csv(path: str | Path) -> list[str]:
    """The summary row of a written page, from its CSV and the sidecar beside it (an 'Ours'
    line names the paper grid's reading)."""
    path = Path(path)
    notes = read_sidecar(path.with_suffix(".json"))
    own = "ours" if any(k == "Ours" for k, _ in notes) else "small"
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return summary_from_rows(path.stem, rows, own)


def index_markdown(summary: list[list[str]], scale: str) -> str:
    out = [f"# Claims across the works (scale {scale})", ""]
    out += [f"- Test: {TEST_SENTENCE}", f"- Paper's own tables: {PRINTED_SENTENCE}"]
    out += [
        "- Ours: each work's paper grid at this scale (the quick work: its own grid); each "
        "work's page gives the small-scale reading too",
        "",
        "| " + " | ".join(SUMMARY_HEAD) + " |",
        "|:--|--:|--:|--:|",
    ]
    out += ["| " + " | ".join(row) + " |" for row in summary]
    out += ["", "Pages: " + ", ".join(f"[{row[0]}]({row[0]}.md)" for row in summary)]
    return "\n".join(out) + "\n"


def write_index(summary: list[list[str]], scale: str, out_prefix: str | Path) -> list[Path]:
    """out_prefix.md, .html and .csv: the summary table across works (a `summary_row` each)."""
    from fedbench.report.html_table import html_table

    prefix = Path(out_prefix)
    md = prefix.with_name(prefix.name + ".md")
    write_text(md, index_markdown(summary, scale))
    html_path = prefix.with_name(prefix.name + ".html")
    notes = [("Test", TEST_SENTENCE), ("Paper's own tables", PRINTED_SENTENCE)]
    write_text(
        html_path,
        html_table(
            f"Claims across the works (scale {scale})",
            notes,
            None,
            list(SUMMARY_HEAD),
            summary,
            foot="Each work's claims: {work}.html beside this file.",
        ),
    )
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(SUMMARY_HEAD)
    writer.writerows(summary)
    csv_path = prefix.with_name(prefix.name + ".csv")
    write_text(csv_path, buf.getvalue())
    return [md, html_path, csv_path]


# --- what the workflow asks (workflow/rules/claims.smk) -----------------------------------------

CLAIMS_OUT = "results/{scale}/claims"


def page_inputs(work: str, catalog: dict, scale: str, config_dir="config") -> list[str]:
    """The work's claims file, the committed records, and the run and choice files its tables read
    that exist now: a page reads the runs finished so far and never asks for a run to be made."""
    from fedbench.claims.evaluate import RECORDS, existing_inputs, record_files
    from fedbench.claims.load import load_claims

    cf = load_claims(work, catalog, Path(config_dir) / "config.yaml")
    files = [str(cf.path), *(str(p) for p in record_files(RECORDS))]
    for grid, tests, at in (
        (cf.paper_grid, [t for c in cf.claims for t in c.ours_tests], scale),
        (cf.quick_grid, [t for c in cf.claims for t in c.quick], small_scale(scale)),
    ):
        if grid is not None:
            files += existing_inputs(grid, tests, catalog, at)
    return files


def page_targets(scale: str) -> list[str]:
    """Every claims page at one scale: each work's .md, .html, .csv, .json and the page across
    works (.md, .html, .csv)."""
    from fedbench.claims.load import WORKS

    base = CLAIMS_OUT.format(scale=scale)
    works = [f"{base}/{w}.{ext}" for w in WORKS for ext in ("md", "html", "csv", "json")]
    return works + [f"{base}/index.{ext}" for ext in ("md", "html", "csv")]

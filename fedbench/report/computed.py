"""Tables of values computed without training (a closed-form example of a paper), beside the
paper's numbers: .md, .tex, .csv, .json and .html like the run tables, without seeds or rounds."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

from fedbench.io import write_text
from fedbench.papers import PaperValues
from fedbench.report.html_table import html_table
from fedbench.report.sidecar import sidecar_json
from fedbench.report.tables import NO_PAPER_NOTE, _num, tex_escape

CSV_COLUMNS = ("row", "column", "paper", "ours", "delta", "row_label", "column_label")


@dataclass(frozen=True)
class ComputedTableSpec:
    """Rows x columns of computed values (`values[(row id, column id)]`)."""

    paper: str
    name: str
    caption: str
    scale: str
    rows: list[dict]
    columns: list[dict]
    values: dict[tuple[str, str], float]
    decimals: int
    method: str  # how "ours" was computed, printed in the header


def table_cells(spec: ComputedTableSpec, paper_values: PaperValues | None) -> list[dict]:
    """One dict per cell: the paper's value (NaN if none), ours and Δ = ours − paper."""
    out = []
    for row in spec.rows:
        for col in spec.columns:
            pv = paper_values.get(spec.name, row["id"], col["id"]) if paper_values else None
            paper = pv.value if pv is not None else math.nan
            ours = spec.values[(row["id"], col["id"])]
            # Δ at the printed precision: the paper rounds to `decimals`, so do we before comparing.
            out.append(
                {
                    "row": row["id"],
                    "column": col["id"],
                    "paper": paper,
                    "ours": ours,
                    "delta": round(ours, spec.decimals) - paper,
                    "row_label": row["label"],
                    "column_label": col["label"],
                }
            )
    return out


def _has_paper(cells: list[dict]) -> bool:
    """Whether any cell has a paper value: without one, no paper and Δ columns."""
    return any(math.isfinite(c["paper"]) for c in cells)


def _lines(spec: ComputedTableSpec, cells: list[dict]) -> list[list[str]]:
    """Row label, then paper | ours | Δ per column (ours alone without paper values)."""
    by_cell = {(c["row"], c["column"]): c for c in cells}
    paper = _has_paper(cells)
    grid = []
    for row in spec.rows:
        line = [str(row["label"])]
        for col in spec.columns:
            c = by_cell[(row["id"], col["id"])]
            d = spec.decimals
            if paper:
                line += [_num(c["paper"], d), _num(c["ours"], d), _num(c["delta"], d, sign=True)]
            else:
                line.append(_num(c["ours"], d))
        grid.append(line)
    return grid


def _header(spec: ComputedTableSpec, source: str, paper: bool) -> list[tuple[str, str]]:
    lines = [
        ("Paper", spec.paper),
        ("Table", f"{spec.name}: {spec.caption}"),
        ("Scale", f"{spec.scale} (computed, no training: the same at every scale)"),
        ("Ours", f"{spec.method}; Δ = ours − paper at {spec.decimals} decimals"),
    ]
    if not paper:
        note = NO_PAPER_NOTE.replace("paper, paper_std and delta", "paper and delta")
        return [*lines, ("Paper values", note)]
    return lines + ([("Paper values from", source)] if source else [])


def write_computed_table(
    spec: ComputedTableSpec, paper_values: PaperValues | None, out_prefix: str | Path
) -> list[Path]:
    """Write out_prefix.md, .tex, .csv (tidy), .json (its notes) and .html (the report's view)
    atomically; return their paths."""
    cells = table_cells(spec, paper_values)
    source = paper_values.source if paper_values is not None else ""
    paper = _has_paper(cells)
    header = _header(spec, source, paper)
    grid = _lines(spec, cells)
    parts = ("paper", "ours", "Δ") if paper else ("ours",)
    if paper:
        head = [""] + [f"{c['label']} {part}" for c in spec.columns for part in parts]
    else:
        head = ["", *(str(c["label"]) for c in spec.columns)]
    md = [f"# {spec.paper} {spec.name}: {spec.caption}", ""]
    md += [f"- {key}: {text}" for key, text in header]
    md += ["", "| " + " | ".join(head) + " |", "|:--|" + "--:|" * (len(head) - 1)]
    md += ["| " + " | ".join(line) + " |" for line in grid]
    tex = [f"% {key}: {text}" for key, text in header]
    tex += [
        r"\begin{tabular}{l" + "r" * (len(head) - 1) + "}",
        r"\toprule",
        " & ".join(tex_escape(h) for h in head) + r" \\",
        r"\midrule",
        *(" & ".join(tex_escape(c) for c in line) + r" \\" for line in grid),
        r"\bottomrule",
        r"\end{tabular}",
    ]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    writer.writerows([_csv(c[k]) for k in CSV_COLUMNS] for c in cells)
    out_prefix = Path(out_prefix)
    paths = []
    page = html_table(
        f"{spec.paper} {spec.name}: {spec.caption}",
        [(k, t) for k, t in header if k not in ("Paper", "Table")],
        [str(c["label"]) for c in spec.columns] if paper else None,
        ["", *(list(parts) * len(spec.columns))] if paper else head,
        grid,
        foot="Click a column's header to sort by it.",
    )
    texts = {
        "md": "\n".join(md) + "\n",
        "tex": "\n".join(tex) + "\n",
        "csv": buf.getvalue(),
        "html": page,
        "json": sidecar_json(spec.name, header),
    }
    for ext, text in texts.items():
        path = out_prefix.with_name(f"{out_prefix.name}.{ext}")
        write_text(path, text)
        paths.append(path)
    return paths


def _csv(v):
    """A CSV field: floats to 10 decimals, NaN empty."""
    if isinstance(v, float):
        return "" if not math.isfinite(v) else round(v, 10)
    return v

"""One page per scale, `results/{scale}/index.html`: every grid built there with its tables inline
(caption, the sortable table, its files) and its figures (embedded, so the page shows them in
Snakemake's report too), then the claims across works when built. The report's first entry: a
reader opens the results, not the workflow graph.

It reads the files that exist (a table's .html and .json sidecar, a figure's .png): a grid not
built yet is simply absent."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from fedbench.report.html_table import SCRIPT, STYLE
from fedbench.report.sidecar import read_sidecar

TABLE = re.compile(r"<table class=\"sortable\">.*?</table>", re.S)
NOTES = re.compile(r"<ul class=\"notes\">.*?</ul>", re.S)
WARNING = re.compile(r"<li class=\"warning\">.*?</li>", re.S)
PAGE_STYLE = """
section.grid { margin: 1.5em 0 2.5em 0; }
h2 { font-size: 1.1em; border-bottom: 1px solid #d0d7de; }
h3 { font-size: 1em; margin: 1.2em 0 0.3em 0; }
p.files { font-size: 0.8em; margin: 0.2em 0 0.6em 0; }
nav a { margin-right: 0.8em; }
img { max-width: 100%; border: 1px solid #eee; }
details { margin: 0.2em 0 0.6em 0; font-size: 0.85em; }
"""


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _caption(sidecar: Path, name: str) -> str:
    """A table's caption from its sidecar's 'Table' line ('name: caption')."""
    notes = dict(read_sidecar(sidecar)) if sidecar.is_file() else {}
    table = notes.get("Table", name)
    return table.split(": ", 1)[1] if table.startswith(f"{name}: ") else table


def _files(folder: Path, name: str, exts: tuple[str, ...], base: Path) -> str:
    links = [
        f'<a href="{_esc(str((folder / f"{name}.{e}").relative_to(base)))}">.{e}</a>'
        for e in exts
        if (folder / f"{name}.{e}").is_file()
    ]
    return f'<p class="files">files: {" ".join(links)}</p>' if links else ""


def grid_section(folder: Path, base: Path) -> list[str]:
    """One grid's tables and figures (results/{scale}/papers/{grid}/)."""
    out = [f'<section class="grid" id="{_esc(folder.name)}">', f"<h2>{_esc(folder.name)}</h2>"]
    for page in sorted(folder.glob("*.html")):
        name = page.stem
        text = page.read_text(encoding="utf-8")
        table = TABLE.search(text)
        notes = NOTES.search(text)
        out.append(f"<h3>{_esc(name)}: {_esc(_caption(folder / f'{name}.json', name))}</h3>")
        out.append(_files(folder, name, ("md", "csv", "json", "tex", "html"), base))
        if notes:
            warnings = WARNING.findall(notes.group(0))  # shown, not folded away
            if warnings:
                out.append('<ul class="notes">' + "".join(warnings) + "</ul>")
            out.append(f"<details><summary>notes</summary>{notes.group(0)}</details>")
        out.append(table.group(0) if table else "<p>(no table in this page)</p>")
    for png in sorted(folder.glob("*.png")):
        data = base64.b64encode(png.read_bytes()).decode()
        out.append(f"<h3>{_esc(png.stem)}</h3>")
        out.append(_files(folder, png.stem, ("png", "pdf"), base))
        out.append(
            f'<img alt="{_esc(folder.name)} {_esc(png.stem)}" src="data:image/png;base64,{data}">'
        )
    out.append("</section>")
    return out


def landing_page(scale_dir: str | Path) -> str:
    """The page for one scale's results folder (results/{scale})."""
    base = Path(scale_dir)
    scale = base.name
    grids = (
        sorted(p for p in (base / "papers").glob("*") if p.is_dir())
        if (base / "papers").is_dir()
        else []
    )
    body = [
        f"<h1>fedbench results, {_esc(scale)} scale</h1>",
        "<p>Every grid built at this scale: its tables (the paper's value beside ours; click a "
        "header to sort) and figures, each with its files. Built from what exists in "
        f"results/{_esc(scale)}/: a grid not built yet is absent.</p>",
        "<nav>"
        + "".join(f'<a href="#{_esc(g.name)}">{_esc(g.name)}</a>' for g in grids)
        + ('<a href="#claims">claims</a>' if (base / "claims" / "index.html").is_file() else "")
        + "</nav>",
    ]
    for grid in grids:
        body += grid_section(grid, base)
    claims = base / "claims" / "index.html"
    if claims.is_file():
        table = TABLE.search(claims.read_text(encoding="utf-8"))
        body += ['<section class="grid" id="claims">', "<h2>Do the papers' claims hold?</h2>"]
        body.append(_files(claims.parent, "index", ("md", "csv", "html"), base))
        body.append(table.group(0) if table else "")
        body.append("</section>")
    if not grids:
        body.append("<p>Nothing built at this scale yet.</p>")
    return (
        "\n".join(
            [
                "<!DOCTYPE html>",
                '<html lang="en">',
                '<head><meta charset="utf-8">',
                f"<title>fedbench results ({_esc(scale)})</title>",
                f"<style>{STYLE}{PAGE_STYLE}</style>",
                "</head>",
                "<body>",
                *body,
                f"<script>{SCRIPT}</script>",
                "</body>",
                "</html>",
            ]
        )
        + "\n"
    )


def page_inputs(scale: str, root: str | Path = "results") -> list[str]:
    """The built files the page reads that exist now (it never asks for a grid to be built)."""
    base = Path(root) / scale
    found = [
        *base.glob("papers/*/*.html"),
        *base.glob("papers/*/*.json"),
        *base.glob("papers/*/*.png"),
        *base.glob("claims/index.html"),
    ]
    return sorted(str(p) for p in found)

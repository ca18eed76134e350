"""A table as one self-contained HTML page (no external files, no network): what Snakemake's
report shows of a table, inline. A click on a column's header sorts the rows by it (numbers by
value, dashes and text last; a second click reverses)."""

from __future__ import annotations

import html
import re

NUMBER = re.compile(r"^[+-]?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.2em;
       color: #1f2328; }
h1 { font-size: 1.15em; margin: 0 0 0.6em 0; }
ul.notes { font-size: 0.85em; color: #444; margin: 0 0 1em 0; padding-left: 1.2em; }
ul.notes li.warning { color: #b3261e; font-weight: bold; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #d0d7de; padding: 0.3em 0.6em; }
th { background: #f3f5f7; }
thead tr:last-child th { cursor: pointer; user-select: none; }
thead tr:last-child th::after { content: " \\2195"; color: #8c959f; }
thead tr:last-child th[aria-sort="ascending"]::after { content: " \\25B2"; color: #1f2328; }
thead tr:last-child th[aria-sort="descending"]::after { content: " \\25BC"; color: #1f2328; }
td { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
td:first-child { text-align: left; }
tbody tr:nth-child(even) td { background: #f8f9fa; }
p.foot { font-size: 0.8em; color: #57606a; }
"""
# Sort by a cell's data-v (a number) when it has one, else after every number, by text.
SCRIPT = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  var heads = table.tHead.rows[table.tHead.rows.length - 1].cells;
  Array.prototype.forEach.call(heads, function (th, col) {
    th.addEventListener("click", function () {
      var down = th.getAttribute("aria-sort") === "ascending";
      Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", down ? "descending" : "ascending");
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = a.cells[col], y = b.cells[col];
        var u = x.dataset.v, v = y.dataset.v;
        if (u === undefined || v === undefined) {
          if (u !== v) { return u === undefined ? 1 : -1; }
          return x.textContent.localeCompare(y.textContent) * (down ? -1 : 1);
        }
        return (parseFloat(u) - parseFloat(v)) * (down ? -1 : 1);
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"""


def sort_value(text: str) -> float | None:
    """The number a displayed cell starts with ('71.00 ± 4.24 (n=2)' -> 71.0, '-3.80' ->
    -3.8), or None (a dash, 'diverged ...', a label)."""
    match = NUMBER.match(text.strip())
    return float(match.group(0)) if match else None


def _cell(text: str, first: bool) -> str:
    value = None if first else sort_value(text)
    attr = "" if value is None else f' data-v="{value!r}"'
    return f"<td{attr}>{html.escape(text, quote=False)}</td>"


def html_table(
    title: str,
    notes: list[tuple[str, str]],
    groups: list[str] | None,
    head: list[str],
    rows: list[list[str]],
    foot: str = "",
) -> str:
    """The page: `title`, the (key, text) notes (key 'WARNING' in red), then the table: a row
    of `groups` (each spanning len(head[1:]) // len(groups) columns) when given, a header row
    `head` (the first entry heads the row labels) and the display `rows`."""

    def esc(text: str) -> str:
        return html.escape(text, quote=False)

    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        '<head><meta charset="utf-8">',
        f"<title>{esc(title)}</title>",
        f"<style>{STYLE}</style>",
        "</head>",
        "<body>",
        f"<h1>{esc(title)}</h1>",
        '<ul class="notes">',
    ]
    for key, text in notes:
        if key == "WARNING":
            out.append(f'<li class="warning">WARNING: {esc(text)}</li>')
        else:
            out.append(f"<li>{esc(key)}: {esc(text)}</li>")
    out += ["</ul>", '<table class="sortable">', "<thead>"]
    if groups:
        span = (len(head) - 1) // len(groups)
        cells = "".join(f'<th colspan="{span}">{esc(g)}</th>' for g in groups)
        out.append(f"<tr><th></th>{cells}</tr>")
    out.append("<tr>" + "".join(f'<th scope="col">{esc(h)}</th>' for h in head) + "</tr>")
    out += ["</thead>", "<tbody>"]
    for line in rows:
        out.append("<tr>" + "".join(_cell(c, i == 0) for i, c in enumerate(line)) + "</tr>")
    out += ["</tbody>", "</table>"]
    if foot:
        out.append(f'<p class="foot">{esc(foot)}</p>')
    out += [f"<script>{SCRIPT}</script>", "</body>", "</html>"]
    return "\n".join(out) + "\n"

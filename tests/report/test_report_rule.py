"""The report's view of every table: the table rule writes each of the tables' extensions and
marks the .html (shown inline) and the .csv (to download) for `snakemake --report`, with the
figures' category and labels and a caption that exists."""

from __future__ import annotations

import re
from pathlib import Path

from fedbench.outputs.base import EXTENSIONS

ROOT = Path(__file__).resolve().parents[2]
RULES = (ROOT / "workflow" / "rules" / "report.smk").read_text()


def _rule(name: str) -> str:
    """The text of one rule of report.smk, up to the next top-level statement."""
    start = RULES.index(f"rule {name}:\n") + len(f"rule {name}:\n")
    end = re.search(r"^\S", RULES[start:], re.MULTILINE)
    return RULES[start : start + end.start()] if end else RULES[start:]


def _report_calls(rule: str) -> dict[str, str]:
    """Output name -> the arguments of its report(...) mark."""
    return dict(re.findall(r"(\w+)=report\(\n(.*?)\n        \),", rule, re.DOTALL))


def test_the_table_rule_writes_every_extension_and_reports_html_and_csv():
    table = _rule("table")
    for ext in EXTENSIONS["tables"]:
        assert f"{ext}=" in table and f"{{{{table}}}}.{ext}" in table, ext
    assert "html" in EXTENSIONS["tables"]
    assert table.index("md=") < table.index("tex=")  # output[0], the adapter's prefix, is .md
    marks = _report_calls(table)
    assert set(marks) == {"html", "csv"}
    figure = _report_calls(_rule("figure"))["png"]
    labels = re.search(r"labels=(\{.*\})", figure).group(1)
    for mark in marks.values():
        assert 'category="{paper}"' in mark and "subcategory=" in mark
        assert re.search(r"labels=(\{.*\})", mark).group(1) == labels.replace("figure", "table")
        caption = re.search(r'caption="(.*?)"', mark).group(1)
        assert (ROOT / "workflow" / "rules" / caption).resolve().is_file(), caption
    assert 'subcategory="tables ({scale} scale)"' in marks["html"]

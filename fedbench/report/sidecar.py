"""A table's account beside its tidy CSV: `<name>.json` holds what the .md, .tex and .html print
above the table (paper, caption, quantity, protocol, scale, notes, warnings), so `<name>.csv` is
one header row and one row per cell, which `pandas.read_csv(path)` reads as it is."""

from __future__ import annotations

import json

SIDECAR_FORMAT = "fedbench-table-notes/1"
# Where a page's reader finds the table's data (the report shows the .html alone, so not "beside
# this file"): the results folder, or the report's CSV entries.
CSV_FOOT = (
    "{name}.csv (its notes in {name}.json) in the table's results folder, "
    "results/<scale>/papers/<paper>/; in Snakemake's report, under 'table data, CSV'."
)


def sidecar_json(name: str, lines: list[tuple[str, str]]) -> str:
    """The sidecar of output `name`: its header lines in order, each {key, text} (a key such as
    Note or WARNING may come more than once), and the CSV file they describe."""
    doc = {
        "format": SIDECAR_FORMAT,
        "output": name,
        "csv": f"{name}.csv",
        "notes": [{"key": str(k), "text": str(t)} for k, t in lines],
    }
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


def read_sidecar(path) -> list[tuple[str, str]]:
    """The (key, text) lines of a sidecar file."""
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    return [(n["key"], n["text"]) for n in doc["notes"]]

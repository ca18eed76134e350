"""Paper tables: rows x columns of cells, each the seeds' mean (± spread) of one quantity at the
final or best round, beside the paper's value (`fedbench.report.tables`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fedbench.cells import ADDED_NOTE, Grid, RunKey
from fedbench.config import ConfigError
from fedbench.metrics import PACK_STATS
from fedbench.outputs import chosen
from fedbench.outputs.matrix import MATRIX_KEYS, MatrixKind, check_server, matrix_fields
from fedbench.report.tables import TableSpec, build_table, write_table

DEFAULTS_MARK = "†"


class TableKind(MatrixKind):
    name = "table"
    section = "tables"
    keys = (
        *MATRIX_KEYS, "server", "round", "seeds", "decimals", "spread", "seed_spread", "summaries",
        "notes", "select",
    )  # fmt: skip
    about = "a table"

    def required(self, out: dict[str, Any]) -> tuple[str, ...]:
        # `server: <name>`: a server scalar per cell (read as protocol "server", stat "value").
        return ("rows", "columns") if "server" in out else super().required(out)

    def check_own(self, where: str, out: dict[str, Any], catalog: dict) -> None:
        if "server" in out:
            check_server(where, out, catalog)
        decimals = out.get("decimals", 2)
        if isinstance(decimals, bool) or not (isinstance(decimals, int) and 0 <= decimals <= 10):
            raise ConfigError(
                f"{where}.decimals: expected an integer in 0..10, got {out['decimals']!r}"
            )
        if out.get("seed_spread", "std") not in ("std", "pstd", "maxdev"):
            raise ConfigError(
                f"{where}.seed_spread: {out['seed_spread']!r} is not 'std', 'pstd' or 'maxdev'"
            )
        _check_summaries(where, out)
        check_select(where, out)
        # `notes`: lines printed under the caption (e.g. a paper's own inconsistencies)
        notes = out.get("notes", [])
        if not (isinstance(notes, list) and all(isinstance(n, str) and n for n in notes)):
            raise ConfigError(f"{where}.notes: expected a list of non-empty strings, got {notes!r}")
        if out.get("spread") is not None and out["spread"] not in PACK_STATS:
            raise ConfigError(f"{where}.spread: {out['spread']!r} is not one of {list(PACK_STATS)}")
        if out.get("round", "final") not in ("final", "best"):
            raise ConfigError(f"{where}.round: must be 'final' or 'best'")

    def spec(self, grid: Grid, name: str, catalog: dict, scale: str) -> TableSpec:
        out = grid.output(self.section, name)
        cellmap = self.runs(grid, name, catalog, scale)  # chosen rows: choice files read once
        fields = matrix_fields(self, grid, name, catalog, scale, cellmap)
        fields["rows"], notes = defaults_marks(fields["rows"], cellmap, catalog)
        groups = {r["id"]: r["group"] for r in out["rows"] if "group" in r}
        fields["rows"] = [
            {**r, "group": groups[r["id"]]} if r["id"] in groups else r for r in fields["rows"]
        ]
        return TableSpec(
            **fields,
            notes=[
                *notes,
                *chosen.choice_notes(grid, name, catalog, scale),
                *out.get("notes", []),
                *([ADDED_NOTE] if any(r.get("added") for r in out["rows"]) else []),
            ],
            select=[dict(x) for x in out.get("select", [])],
            round=out.get("round", "final"),
            decimals=out.get("decimals", 2),
            spread=out.get("spread"),
            seed_spread=out.get("seed_spread", "std"),
            summaries=[dict(x) for x in out.get("summaries", [])],
        )

    def render(self, spec: TableSpec, out_prefix: Path) -> list[Path]:
        from fedbench.papers import load_paper_values

        return write_table(build_table(spec, load_paper_values(spec.paper)), spec, out_prefix)


def _check_summaries(where: str, out: dict) -> None:
    """Summary columns: a list of {id, label, stat: mean|std|mean_drop|ratio, columns: [column
    ids]} (mean_drop: the columns are (before, after) pairs; ratio: one column, and `reference`:
    the row whose mean divides every row's)."""
    summaries = out.get("summaries", [])
    if not isinstance(summaries, list):
        raise ConfigError(f"{where}.summaries: must be a list")
    col_ids = [c.get("id") for c in out.get("columns", [])]
    for summ in summaries:
        if not isinstance(summ, dict) or summ.get("id") is None:
            raise ConfigError(f"{where}.summaries: every entry needs an 'id', got {summ!r}")
        place = f"{where}.summaries entry {summ['id']!r}"
        unknown = sorted(set(summ) - {"id", "label", "stat", "columns", "reference"})
        if unknown:
            raise ConfigError(
                f"{place}: unknown key(s) {unknown}; valid: id, label, stat, columns, reference"
            )
        if summ["id"] in col_ids:
            raise ConfigError(f"{place}: the id is already a column's")
        if summ.get("stat") not in ("mean", "std", "mean_drop", "ratio"):
            raise ConfigError(
                f"{place}.stat: must be 'mean', 'std', 'mean_drop' or 'ratio', got "
                f"{summ.get('stat')!r}"
            )
        _check_ratio(place, summ, out, col_ids)
        bad = [c for c in summ.get("columns", col_ids) if c not in col_ids]
        if bad:
            raise ConfigError(f"{place}.columns: unknown column(s) {bad}; valid: {col_ids}")
        if summ["stat"] == "mean_drop" and len(summ.get("columns", col_ids)) % 2:
            raise ConfigError(f"{place}.columns: mean_drop needs (before, after) column pairs")


def check_select(where: str, out: dict) -> None:
    """`select`: a list of {by, tie} column ids (B-D13's choice per row group: rows' `group`)."""
    select = out.get("select", [])
    col_ids = [c.get("id") for c in out.get("columns", [])]
    if not isinstance(select, list):
        raise ConfigError(f"{where}.select: expected a list of {{by, tie}} mappings")
    for sel in select:
        if not isinstance(sel, dict) or sorted(sel) != ["by", "tie"]:
            raise ConfigError(
                f"{where}.select: each entry is {{by: <column id>, tie: <column id>}}, got {sel!r}"
            )
        bad = [sel[k] for k in ("by", "tie") if sel[k] not in col_ids]
        if bad:
            raise ConfigError(f"{where}.select: unknown column(s) {bad}; valid: {col_ids}")
    groups = [r.get("group") for r in out.get("rows", []) if "group" in r]
    if any(not isinstance(g, str) or not g for g in groups):
        raise ConfigError(f"{where}.rows: a row's group must be a non-empty string")


def _check_ratio(place: str, summ: dict, out: dict, col_ids: list) -> None:
    """stat ratio: one column and a `reference` naming a row of the table; other stats: none."""
    ref = summ.get("reference")
    if summ["stat"] != "ratio":
        if ref is not None:
            raise ConfigError(f"{place}.reference: only stat 'ratio' takes a reference row")
        return
    row_ids = [r.get("id") for r in out.get("rows", [])]
    if ref not in row_ids:
        raise ConfigError(f"{place}.reference: {ref!r} is not a row of the table; rows: {row_ids}")
    if len(summ.get("columns", col_ids)) != 1:
        raise ConfigError(
            f"{place}.columns: a ratio reads exactly one column, got {summ.get('columns', col_ids)}"
        )


def defaults_marks(
    rows: list[dict], cellmap: dict[tuple[str, str], list[RunKey]], catalog: dict
) -> tuple[list[dict], list[str]]:
    """Mark rows whose algorithm takes hyperparameters the paper does not give (the class's
    `defaults_from`) with a dagger, and say where they come from in one note per table."""
    from fedbench.algorithms import ALGORITHMS

    sources: dict[str, list[str]] = {}
    marked = []
    for row in rows:
        names = {
            k.algorithm for (rid, _c), keys in cellmap.items() if rid == row["id"] for k in keys
        }
        found = sorted(
            {
                src
                for n in names
                if (src := ALGORITHMS[catalog["algorithms"][n]["algorithm"]].defaults_from)
            }
        )
        if found:
            row = {**row, "label": f"{row['label']} {DEFAULTS_MARK}"}
            for src in found:
                sources.setdefault(src, []).append(str(row["id"]))
        marked.append(row)
    if not sources:
        return marked, []
    listed = "; ".join(f"{', '.join(ids)}: {src}" for src, ids in sources.items())
    return marked, [
        f"{DEFAULTS_MARK} hyperparameters the paper does not give, taken from the method's own "
        f"paper ({listed})"
    ]

"""Rows of tables and curve figures that run what a selection table chose (DQN-Fed's B-D13:
each hyperparameter is chosen on a validation split at seed 0, then the table runs the chosen
value at every seed), so the value is the pipeline's choice, not one written by hand.

A row `{id, label, chosen: <group>}` names no algorithm. Each column it crosses says whose choice
it runs: `chosen_by: {table: <selection table>, by: <one of its select entries' by column>}`,
a selection table being one with `select` (kind selection, or a table whose rows name their
`group`); the cell runs that entry's chosen row of the group. Rows with `algorithm` stay as they
are. The choice is a file (`choice_path`) that the workflow writes once the selection's runs are
in (rule `choice`, a Snakemake checkpoint), so a table with chosen rows knows its runs only after
it: `choices="read"`. Before any selection ran (the DAG-build validation, the cost estimate, a
count of a grid's runs) `choices="first"` stands each chosen cell for its group's first value.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from fedbench.cells import Grid
from fedbench.config import ConfigError
from fedbench.outputs.sweep_rows import expanded_rows, scale_rows

ROW_KEY = "chosen"
COLUMN_KEY = "chosen_by"
CHOICE_MODES = ("read", "first")


class ChoicePending(ConfigError):
    """A table's chosen rows were asked for their runs before the selection's choice exists."""


def choice_path(scale: str, paper: str, table: str, root: str = "results") -> str:
    """results/{scale}/choices/{paper}/{table}.json: what one selection table chose."""
    return f"{root}/{scale}/choices/{paper}/{table}.json"


def has_chosen(out: dict[str, Any]) -> bool:
    """Whether any row of the entry runs a selection's choice."""
    return any(isinstance(r, dict) and ROW_KEY in r for r in out.get("rows") or [])


def fixed_rows(out: dict[str, Any]) -> list[dict]:
    """The rows that name their algorithm (those a per-entry cell check can resolve)."""
    return [r for r in out.get("rows") or [] if not (isinstance(r, dict) and ROW_KEY in r)]


def check_keys(where: str, out: dict[str, Any]) -> None:
    """The entry's own part: a chosen row names a group and no algorithm; then every column
    says whose choice it runs (`chosen_by: {table, by}`), and no column does without one."""
    chosen = [r for r in out.get("rows") or [] if isinstance(r, dict) and ROW_KEY in r]
    for row in chosen:
        place = f"{where} row {row.get('id')!r}"
        if not (isinstance(row[ROW_KEY], str) and row[ROW_KEY]):
            raise ConfigError(
                f"{place}.{ROW_KEY}: expected the name of a row group of a selection table "
                f"(e.g. 'qffl'), got {row[ROW_KEY]!r}"
            )
        if "algorithm" in row:
            raise ConfigError(
                f"{place}: a row with {ROW_KEY!r} runs the selection's choice; drop its "
                "'algorithm' (or drop 'chosen' to run that algorithm)"
            )
    for col in out.get("columns") or []:
        if not isinstance(col, dict):
            continue
        place = f"{where} column {col.get('id')!r}"
        ref = col.get(COLUMN_KEY)
        if ref is None:
            if chosen:
                raise ConfigError(
                    f"{place}: rows {[r.get('id') for r in chosen]} run a selection's choice, "
                    f"so every column needs {COLUMN_KEY}: {{table: <selection table>, by: <its "
                    "select column>}"
                )
            continue
        if not chosen:
            raise ConfigError(f"{place}.{COLUMN_KEY}: no row of the table has {ROW_KEY!r}")
        if not (isinstance(ref, dict) and sorted(ref) == ["by", "table"]):
            raise ConfigError(
                f"{place}.{COLUMN_KEY}: expected {{table: <selection table>, by: <its select "
                f"column>}}, got {ref!r}"
            )
        if not all(isinstance(v, str) and v for v in ref.values()):
            raise ConfigError(f"{place}.{COLUMN_KEY}: table and by must be names, got {ref!r}")


def chosen_tables(grid: Grid, section: str, name: str) -> list[str]:
    """The selection tables whose choices an output's rows run (each once, in column order)."""
    out = grid.output(section, name)
    if not has_chosen(out):
        return []
    return list(dict.fromkeys(c[COLUMN_KEY]["table"] for c in out["columns"]))


def group_candidates(grid: Grid, table: str, catalog: dict, scale: str | None) -> dict:
    """Group -> the algorithms a selection table sweeps for it, in its order (all values when
    `scale` is None, else the values that scale trains)."""
    if scale is None:
        out = grid.output("tables", table)
        rows = expanded_rows(f"{grid.name}.{table}", out, catalog)
    else:
        rows = scale_rows(grid, table, catalog, scale)
    groups: dict[str, list[str]] = {}
    for row in rows:
        groups.setdefault(str(row.get("group", row["id"])), []).append(row["algorithm"])
    return groups


def check_grid(grid: Grid, catalog: dict, kind_of) -> None:
    """What one entry cannot check alone: each `chosen_by` names a selection table of the grid
    and one of its select columns, each chosen row's group is one that table sweeps, and every
    value it may choose makes a valid cell (checked by the entry's kind, `kind_of(section, out,
    where)`, as its own cells are)."""
    for section, name in ((s, n) for s in ("tables", "figures") for n in grid.outputs(s)):
        out = grid.output(section, name)
        if has_chosen(out):
            _check_entry(grid, section, name, catalog, kind_of)


def _check_entry(grid: Grid, section: str, name: str, catalog: dict, kind_of) -> None:
    tables = grid.outputs("tables")
    out = grid.output(section, name)
    where = f"{grid.path.name}.{section}.{name}"
    candidates: dict[str, dict[str, list[str]]] = {}  # column id -> group -> swept algorithms
    for col in out["columns"]:
        ref = col[COLUMN_KEY]
        place = f"{where} column {col['id']!r}.{COLUMN_KEY}"
        sel = tables.get(ref["table"])
        if sel is None or not sel.get("select"):
            valid = [n for n, o in tables.items() if o.get("select")]
            raise ConfigError(
                f"{place}: {ref['table']!r} is not a table of this grid that makes a choice "
                f"(one with `select`); valid: {valid}"
            )
        bys = [s["by"] for s in sel["select"]]
        if ref["by"] not in bys:
            raise ConfigError(
                f"{place}.by: {ref['by']!r} is not a select column of {ref['table']}; valid: {bys}"
            )
        candidates[col["id"]] = group_candidates(grid, ref["table"], catalog, None)
    for row in _chosen(out):
        for col in out["columns"]:
            if row[ROW_KEY] not in candidates[col["id"]]:
                raise ConfigError(
                    f"{where} row {row['id']!r}.{ROW_KEY}: {col[COLUMN_KEY]['table']} has no "
                    f"row group {row[ROW_KEY]!r}; groups: {list(candidates[col['id']])}"
                )
    kind = kind_of(section, out, where)
    widest = max(len(c[r[ROW_KEY]]) for c in candidates.values() for r in _chosen(out))
    for i in range(widest):  # every value a chosen cell may run, checked as a fixed row's
        rows = []
        for row in out["rows"]:
            if ROW_KEY in row:
                swept = {c: g[row[ROW_KEY]] for c, g in candidates.items()}
                row = _fixed(row, {c: names[min(i, len(names) - 1)] for c, names in swept.items()})
            rows.append(row)
        columns = [{k: v for k, v in c.items() if k != COLUMN_KEY} for c in out["columns"]]
        kind.check(where, {**out, "rows": rows, "columns": columns}, catalog)


def resolve_rows(
    grid: Grid, section: str, name: str, catalog: dict, scale: str, choices: str
) -> list[dict]:
    """The output's rows with each chosen row's algorithm mapped per column (a row field that
    maps column ids to names, as `fedbench.cells.merge_cell` reads it): the selection's choice
    (`choices="read"`, from its choice file) or its group's first value (`"first"`)."""
    if choices not in CHOICE_MODES:
        raise ValueError(f"choices must be one of {list(CHOICE_MODES)}, got {choices!r}")
    out = grid.output(section, name)
    if not has_chosen(out):
        return list(out["rows"])
    tables = chosen_tables(grid, section, name)  # each selection expanded and read once
    swept = {t: group_candidates(grid, t, catalog, scale) for t in tables}
    read = (
        {}
        if choices == "first"
        else {t: read_choice(choice_path(scale, grid.name, t)) for t in tables}
    )
    rows = []
    for row in out["rows"]:
        if ROW_KEY not in row:
            rows.append(row)
            continue
        algos = {}
        for col in out["columns"]:
            ref, group = col[COLUMN_KEY], row[ROW_KEY]
            values = swept[ref["table"]][group]
            algos[col["id"]] = (
                values[0]
                if choices == "first"
                else _chosen_algorithm(read[ref["table"]], ref, group, values, scale)
            )
        rows.append(_fixed(row, algos))
    return rows


def read_choice(path: str | Path) -> dict[str, Any]:
    """A choice file as written by `write_choice`; a clear error when it is missing or bad."""
    path = Path(path)
    if not path.exists():
        raise ChoicePending(
            f"{path}: the selection has not chosen yet; build it first (its runs, then the "
            f"choice): snakemake --cores N {path}"
        )
    try:
        data = json.loads(path.read_text())
        data["choices"]
    except (ValueError, KeyError, TypeError) as err:
        raise ConfigError(
            f"{path}: not a choice file ({err}); delete it and rebuild: snakemake --cores N {path}"
        ) from None
    return data


def _chosen_algorithm(data: dict, ref: dict, group: str, swept: list[str], scale: str) -> str:
    """The algorithm a choice file names for (select column, group); an error naming the file
    when it has none or names one the selection does not sweep at this scale (a stale file)."""
    path = choice_path(scale, data.get("paper", "?"), ref["table"])
    picked = data["choices"].get(ref["by"], {}).get(group)
    if picked is None:
        raise ConfigError(
            f"{path}: no choice for group {group!r} under {ref['by']!r} (none of its runs "
            "finished with a value); rerun its runs, then: snakemake --cores N " + path
        )
    if picked.get("algorithm") not in swept:
        raise ConfigError(
            f"{path}: chose {picked.get('algorithm')!r} for {group!r}, which {ref['table']} no "
            f"longer sweeps at this scale ({swept}); delete the file and rebuild it"
        )
    return str(picked["algorithm"])


def choice_notes(grid: Grid, name: str, catalog: dict, scale: str) -> list[str]:
    """One note per (selection, select column) a table's chosen rows run: what was chosen and on
    which validation value, read from the choice file."""
    out = grid.output("tables", name)
    if not has_chosen(out):
        return []
    groups = [r[ROW_KEY] for r in _chosen(out)]
    by_ref: dict[tuple[str, str], list[str]] = {}
    for col in out["columns"]:
        ref = col[COLUMN_KEY]
        by_ref.setdefault((ref["table"], ref["by"]), []).append(str(col.get("label", col["id"])))
    notes = []
    for (table, by), labels in by_ref.items():
        data = read_choice(choice_path(scale, grid.name, table))
        picked = data["choices"].get(by, {})
        parts = []
        for group in dict.fromkeys(groups):
            p = picked.get(group)
            if p is not None:
                parts.append(f"{p['label']} ({_num(p['by'])})")
        rule = data.get("rules", {}).get(by, f"the highest {by}")
        notes.append(
            f"Chosen rows ({', '.join(labels)}): {table}'s choice (B-D13: {rule}): "
            + ("; ".join(parts) or "none")
        )
    return notes


def write_choice(
    kind,
    grid: Grid,
    name: str,
    catalog: dict,
    scale: str,
    out_file: str | Path,
    preloaded: dict[Path, Any] | None = None,
) -> dict:
    """Build a selection table (of `kind`) from its runs and write what it chose (`choice_path`'s
    file):
    per select column, each group's chosen row (id, algorithm, label, its by and tie means);
    a group none of whose runs finished with a value is left out. Returns the record.
    `preloaded`: runs rebuilt from a run record, by folder (`fedbench record --choice-out`)."""
    from fedbench.io import write_text
    from fedbench.papers import load_paper_values
    from fedbench.report.tables import build_table, choices

    if not grid.output("tables", name).get("select"):
        raise ConfigError(f"{grid.name}.{name}: only a table with `select` makes a choice")
    spec = kind.spec(grid, name, catalog, scale)
    if preloaded:  # the record's runs fill the cells whose folders are not here
        here = {
            c: [d for d in v if Path(d) in preloaded or (Path(d) / "run.yaml").exists()]
            for c, v in spec.cells.items()
        }
        spec = dataclasses.replace(spec, cells=here)
    table = build_table(spec, load_paper_values(spec.paper), preloaded)
    mean = {(r["row"], r["column"]): r["ours_mean"] for _, r in table.iterrows()}
    algos = {str(r["id"]): r["algorithm"] for r in scale_rows(grid, name, catalog, scale)}
    labels = {str(c["id"]): str(c["label"]) for c in spec.columns}
    record: dict[str, Any] = {
        "paper": grid.name,
        "table": name,
        "scale": scale,
        "rules": {},
        "choices": {},
    }
    for sel, picked in choices(table, spec):
        by, tie = str(sel["by"]), str(sel["tie"])
        record["rules"][by] = (
            f"the highest {labels[by]}, ties to the lowest {labels[tie]}, then the first row"
        )
        record["choices"][by] = {
            group: {
                "row": str(row["id"]),
                "algorithm": algos[str(row["id"])],
                "label": str(row["label"]),
                "by": _finite(mean[(str(row["id"]), by)]),
                "tie": _finite(mean[(str(row["id"]), tie)]),
            }
            for group, row in picked
        }
    write_text(out_file, json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    return record


def _chosen(out: dict) -> list[dict]:
    return [r for r in out["rows"] if ROW_KEY in r]


def _fixed(row: dict, algorithms: dict[str, str]) -> dict:
    """A chosen row as a fixed one: its algorithm per column id."""
    return {**{k: v for k, v in row.items() if k != ROW_KEY}, "algorithm": algorithms}


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"

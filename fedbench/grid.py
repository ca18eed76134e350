"""Paper grids (config/papers/*.yaml): load and validate them, asking each table's and figure's
kind (`fedbench.outputs`) to check its entry and to name the runs and files it reads."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import yaml

from fedbench.cells import RUN_FIELDS, SECTIONS, Grid, RunKey, check_seeds
from fedbench.config import (
    ConfigError,
    catalog_files,
    extend_catalog,
    register_plugins,
    resolve_run,
    unknown_keys,
    unknown_name,
    validate_catalog,
)
from fedbench.outputs import chosen, kind_of
from fedbench.outputs.base import EXTENSIONS

# Output names as the table / figure rules match them (workflow/rules/report.smk uses these), so a
# grid output named otherwise fails at DAG build instead of as a MissingInputException.
OUTPUT_NAME_PATTERNS = {"tables": r"table[0-9][0-9a-z_]*", "figures": r"figure[0-9][0-9a-z_]*"}
GRID_KEYS = ("paper", "title", "default_scale", "seeds", "rows", "columns", "tables", "figures")
# A user's overlay appends rows (methods) to a grid's outputs of these kinds (their rows are the
# methods, their columns the settings); `to` names outputs, or every table / figure / output.
ADDED_ROW_KINDS = ("table", "rounds")
ADD_ROWS_KEYS = ("to", "rows")
ADD_ROWS_ALL = ("tables", "figures", "all")
ROW_RUN_FIELDS = ("dataset", "partition", "model")

__all__ = [
    "OUTPUT_NAME_PATTERNS",
    "add_rows",
    "Grid",
    "RunKey",
    "all_runs",
    "cells",
    "chosen_tables",
    "load_grid",
    "load_grids",
    "load_workflow",
    "output_files",
    "output_inputs",
    "output_kind",
    "output_spec",
    "resolve_scale",
    "validate_runs",
]


def load_grid(path: str | Path, catalog: dict[str, Any]) -> Grid:
    """Read and validate one grid file; errors name the file and the key."""
    path = Path(path)
    with open(path) as f:
        raw = yaml.safe_load(f)
    where = path.name
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping")
    unknown = sorted(set(raw) - set(GRID_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; valid: {list(GRID_KEYS)}")
    if raw.get("paper") != path.stem:
        raise ConfigError(f"{where}: 'paper' must equal the file name ({path.stem!r})")
    scale = raw.get("default_scale", "paper")
    if not isinstance(scale, str) or scale not in catalog["scales"]:
        raise ConfigError(f"{where}.default_scale: not one of {sorted(catalog['scales'])}")
    check_seeds(f"{where}.seeds", raw.get("seeds", [0]))
    for section in SECTIONS:
        outs = raw.get(section) or {}
        if not isinstance(outs, dict) or not all(isinstance(o, dict) for o in outs.values()):
            raise ConfigError(f"{where}.{section}: expected a mapping of names to mappings")
    grid = Grid(path.stem, raw, path)
    for section in SECTIONS:
        for name, out in grid.outputs(section).items():
            pattern = OUTPUT_NAME_PATTERNS[section]
            if not (isinstance(name, str) and re.fullmatch(pattern, name)):
                raise ConfigError(
                    f"{where}.{section}.{name}: an output name must match {pattern!r} (the "
                    f"paper's numbering, e.g. {section[:-1]}2 or {section[:-1]}3_1), got {name!r}"
                )
            place = f"{where}.{section}.{name}"
            _check_shapes(place, out)
            kind_of(section, out, place).validate(place, out, catalog)
    chosen.check_grid(grid, catalog, kind_of)
    return grid


def _check_shapes(where: str, out: dict[str, Any]) -> None:
    """The shapes the kinds' checks read: names are strings (a cell's dataset may list candidate
    names, a row's field may map column ids to names), each axis entry a mapping with a string
    id (ConfigError naming the key)."""

    def name_like(v: Any, candidates: bool = False) -> bool:
        if isinstance(v, list):  # a dataset's candidates, the first available one used
            return candidates and bool(v) and all(isinstance(x, str) for x in v)
        if isinstance(v, dict):
            return all(isinstance(k, str) and isinstance(x, str) for k, x in v.items())
        return isinstance(v, str)

    for key in ("kind", "metric", "protocol", "stat"):
        if key in out and not isinstance(out[key], str):
            raise ConfigError(f"{where}.{key}: expected a string, got {out[key]!r}")
    for axis in ("rows", "columns"):
        entries = out.get(axis)
        for i, entry in enumerate(entries if isinstance(entries, list) else []):
            place = f"{where}.{axis}[{i}]"
            if not isinstance(entry, dict):
                raise ConfigError(f"{place}: expected a mapping with an 'id', got {entry!r}")
            if not isinstance(entry.get("id", ""), (str, int)) or isinstance(entry.get("id"), bool):
                raise ConfigError(f"{place}.id: expected a string, got {entry['id']!r}")
            for key in (*RUN_FIELDS, "metric", "protocol", "stat", "label"):
                if key in entry and not name_like(entry[key], candidates=key == "dataset"):
                    raise ConfigError(f"{place}.{key}: expected a name, got {entry[key]!r}")


def load_grids(folder: str | Path, catalog: dict[str, Any]) -> dict[str, Grid]:
    """Every grid in `folder`, by paper name."""
    return {p.stem: load_grid(p, catalog) for p in sorted(Path(folder).glob("*.yaml"))}


def load_workflow(
    config: dict[str, Any], config_dir: str | Path = "config", papers_dir: str | Path | None = None
) -> dict[str, Grid]:
    """What the Snakefile checks at DAG build, in one call: register a user's `plugins`, add
    config/catalog/*.yaml to `config` (in place), validate the catalog, load every grid, append a
    user's `add_rows` and resolve every run at its scale."""
    register_plugins(config)
    extend_catalog(config, catalog_files(config_dir))
    validate_catalog(config)
    grids = load_grids(papers_dir if papers_dir is not None else Path(config_dir, "papers"), config)
    grids = add_rows(grids, config)
    for grid in grids.values():
        validate_runs(grid, config, resolve_scale(grid, config.get("scale")))
    return grids


def resolve_scale(grid: Grid, config_scale: str | None) -> str:
    """The config's scale if set, else the grid's default."""
    return config_scale or grid.default_scale


def output_kind(grid: Grid, section: str, name: str):
    """The kind (`fedbench.outputs`) of one table or figure of the grid."""
    return kind_of(section, grid.output(section, name), f"{grid.path.name}.{section}.{name}")


def cells(
    grid: Grid, section: str, name: str, catalog: dict, scale: str, choices: str = "read"
) -> dict[tuple[str, str], list[RunKey]]:
    """(row id, column id) -> the runs (one per seed) one table or figure reads (none for an
    output that reads no run, e.g. a partition figure). `choices`: rows that run a selection's
    choice read its choice file ("read") or stand for their group's first value ("first",
    before any selection ran; `fedbench.outputs.chosen`)."""
    return output_kind(grid, section, name).runs(grid, name, catalog, scale, choices)


def output_inputs(grid: Grid, section: str, name: str, catalog: dict, scale: str) -> list[str]:
    """Every file one table or figure reads: its runs' metrics.jsonl and run.yaml, each run once,
    then what its kind reads beside them (landscape .npz, dataset and partition files, the
    choice files of the selections its rows run)."""
    kind = output_kind(grid, section, name)
    runs = dict.fromkeys(k for ks in kind.runs(grid, name, catalog, scale).values() for k in ks)
    files = [f"{k.folder(scale)}/{f}" for k in runs for f in ("metrics.jsonl", "run.yaml")]
    return files + kind.inputs(grid, name, catalog, scale)


def output_spec(grid: Grid, section: str, name: str, catalog: dict, scale: str) -> Any:
    """The report's spec of one table or figure (what rendering it reads)."""
    return output_kind(grid, section, name).spec(grid, name, catalog, scale)


def all_runs(grid: Grid, catalog: dict, scale: str, choices: str = "read") -> list[RunKey]:
    """Every run the grid's tables and figures need (each once); `choices` as in `cells`."""
    keys: dict[RunKey, None] = {}
    for section in SECTIONS:
        for name in grid.outputs(section):
            for runs in cells(grid, section, name, catalog, scale, choices).values():
                keys.update(dict.fromkeys(runs))
    return list(keys)


def chosen_tables(grid: Grid, section: str, name: str) -> list[str]:
    """The selection tables whose choices one output's rows run (the workflow waits for each)."""
    return chosen.chosen_tables(grid, section, name)


def output_files(grid: Grid, scale: str, root: str = "results") -> list[str]:
    """results/{scale}/papers/{paper}/{name}.{ext} for every table and figure."""
    base = f"{root}/{scale}/papers/{grid.name}"
    return [
        f"{base}/{name}.{ext}"
        for section in SECTIONS
        for name in grid.outputs(section)
        for ext in EXTENSIONS[section]
    ]


def validate_runs(grid: Grid, catalog: dict, scale: str) -> None:
    """Resolve every run's full spec once (training values included), naming any bad one (a
    chosen row as its group's first value: the choice is not made at DAG build)."""
    for key in all_runs(grid, catalog, scale, choices="first"):
        try:
            resolve_run(
                catalog, scale, key.dataset, key.partition, key.model, key.algorithm, key.seed
            )
        except ValueError as err:
            raise ConfigError(f"{grid.path.name}: run {key.folder(scale)}: {err}") from None


def add_rows(grids: dict[str, Grid], config: dict[str, Any]) -> dict[str, Grid]:
    """The grids with a user's `add_rows` appended (config overlay, docs/extending.md):

        add_rows:
          quick:                     # a grid
            to: [table1, figure1]    # its outputs; or tables, figures, all
            rows:
              - {id: mine, label: "My method", algorithm: mine}   # a catalog algorithm entry

    Each added row runs on exactly the output's columns (datasets, partitions, models), seeds
    and quantity; fields the grid's own rows set beside the algorithm (a model per row) are taken
    from its first row. The rows come after the published ones, marked `added` (a table prints
    them without a paper value or Δ; claims read the grid files and never see them). Errors name
    the key and the nearest valid names."""
    extra = config.get("add_rows") or {}
    if not isinstance(extra, dict):
        raise ConfigError("add_rows: expected a mapping of grid names to {to, rows}")
    out = dict(grids)
    for gname, entry in extra.items():
        where = f"add_rows.{gname}"
        if gname not in grids:
            raise ConfigError(f"add_rows: {unknown_name('grid', gname, sorted(grids))}")
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: expected a mapping with keys {list(ADD_ROWS_KEYS)}")
        unknown = sorted(set(entry) - set(ADD_ROWS_KEYS))
        if unknown:
            raise ConfigError(unknown_keys(where, unknown, ADD_ROWS_KEYS))
        rows = entry.get("rows")
        if not (isinstance(rows, list) and rows and all(isinstance(r, dict) for r in rows)):
            raise ConfigError(f"{where}.rows: expected a non-empty list of mappings")
        for i, row in enumerate(rows):
            if not isinstance(row.get("id"), str) or "algorithm" not in row:
                raise ConfigError(
                    f"{where}.rows[{i}]: a row needs an 'id' and an 'algorithm' (a catalog "
                    "algorithm entry)"
                )
        out[gname] = _with_rows(grids[gname], where, entry.get("to", "tables"), rows, config)
    return out


def _with_rows(grid: Grid, where: str, to: Any, rows: list[dict], catalog: dict) -> Grid:
    raw = copy.deepcopy(grid.raw)
    names = _targets(grid, where, to)
    for section, name in names:
        place = f"{where} -> {grid.path.name}.{section}.{name}"
        out = raw[section][name]
        kind = kind_of(section, out, place)
        if kind.name not in ADDED_ROW_KINDS or any("algorithm" in c for c in out["columns"]):
            if to in ADD_ROWS_ALL:
                continue  # every output of a section: those whose rows are methods
            raise ConfigError(
                f"{place}: rows can be added to outputs whose rows are methods (kinds "
                f"{list(ADDED_ROW_KINDS)}, columns without an algorithm); this one is of kind "
                f"{kind.name!r}"
            )
        ids = {r.get("id") for r in out["rows"]}
        first = out["rows"][0]
        for row in rows:
            if row["id"] in ids:
                raise ConfigError(
                    f"{place}: row id {row['id']!r} is taken by a published row; choose another"
                )
        shared = {k: first[k] for k in ROW_RUN_FIELDS if k in first}
        out["rows"] = [*out["rows"], *({**shared, **r, "added": True} for r in rows)]
        kind.validate(place, out, catalog)
    return Grid(grid.name, raw, grid.path)


def _targets(grid: Grid, where: str, to: Any) -> list[tuple[str, str]]:
    """(section, name) of every output `to` names."""
    if to in ADD_ROWS_ALL:
        sections = SECTIONS if to == "all" else (to,)
        return [(sec, name) for sec in sections for name in grid.outputs(sec)]
    if not (isinstance(to, list) and to and all(isinstance(n, str) for n in to)):
        raise ConfigError(
            f"{where}.to: expected a list of {grid.name}'s tables and figures, or one of "
            f"{list(ADD_ROWS_ALL)}; got {to!r}"
        )
    known = {name: sec for sec in SECTIONS for name in grid.outputs(sec)}
    for name in to:
        if name not in known:
            raise ConfigError(f"{where}.to: {unknown_name('output', name, sorted(known))}")
    return [(known[name], name) for name in to]

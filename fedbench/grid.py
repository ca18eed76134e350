"""Paper grids (config/papers/*.yaml): which runs feed which table cell and figure panel."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fedbench.algorithms import ALGORITHMS
from fedbench.config import (
    ConfigError,
    catalog_files,
    data_mode,
    extend_catalog,
    resolve_run,
    validate_catalog,
)
from fedbench.metrics import PACK_STATS
from fedbench.metrics.names import CLIENT_METRICS

# Output names as the table / figure rules match them (workflow/rules/report.smk uses these), so a
# grid output named otherwise fails at DAG build instead of as a MissingInputException.
OUTPUT_NAME_PATTERNS = {"tables": r"table[0-9][0-9a-z_]*", "figures": r"figure[0-9][0-9a-z_]*"}
GRID_KEYS = ("paper", "title", "default_scale", "seeds", "rows", "columns", "tables", "figures")
OUTPUT_KEYS = (
    "caption",
    "metric",
    "protocol",
    "stat",
    "round",
    "percent",
    "rows",
    "columns",
    "seeds",
    "decimals",
    "spread",
    "seed_spread",
    "summaries",
    "kind",
    "panels",
    "landscape",
    "server",
    "smooth",
)
RUN_FIELDS = ("dataset", "partition", "model", "algorithm")
# Protocols chosen per client on a validation split (the partition's val_fraction).
VAL_PROTOCOLS = frozenset(n for cls in ALGORITHMS.values() for n in cls.val_selections)
TABLE_EXTS = ("md", "tex", "csv")
FIGURE_EXTS = ("png", "pdf")
FIGURE_KINDS = ("rounds", "lambda", "landscape", "partition", "parallel", "deviation")
# A landscape is always the run's objective (its mean loss) on the global test set, one run a cell.
LANDSCAPE_KEYS = ("caption", "kind", "rows", "columns", "seeds", "landscape")


@dataclass(frozen=True)
class RunKey:
    """The names that identify one run (and its folder)."""

    dataset: str
    partition: str
    model: str
    algorithm: str
    seed: int

    def folder(self, scale: str, root: str = "results") -> str:
        """results/{scale}/runs/{dataset}/{partition}/{model}/{algorithm}/seed{seed}"""
        return (
            f"{root}/{scale}/runs/{self.dataset}/{self.partition}/{self.model}/"
            f"{self.algorithm}/seed{self.seed}"
        )


@dataclass(frozen=True)
class Grid:
    """One paper's grid, validated against the catalog."""

    name: str
    raw: dict[str, Any]
    path: Path

    @property
    def default_scale(self) -> str:
        """The scale used when the config sets none."""
        return self.raw.get("default_scale", "paper")

    def outputs(self, kind: str) -> dict[str, dict[str, Any]]:
        """The grid's tables or figures by name."""
        return self.raw.get(kind, {}) or {}


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
    if raw.get("default_scale", "paper") not in catalog["scales"]:
        raise ConfigError(f"{where}.default_scale: not one of {sorted(catalog['scales'])}")
    _check_seeds(f"{where}.seeds", raw.get("seeds", [0]))
    for kind in ("tables", "figures"):
        outs = raw.get(kind) or {}
        if not isinstance(outs, dict) or not all(isinstance(o, dict) for o in outs.values()):
            raise ConfigError(f"{where}.{kind}: expected a mapping of names to mappings")
    grid = Grid(path.stem, raw, path)
    for kind in ("tables", "figures"):
        for name, out in grid.outputs(kind).items():
            if not (isinstance(name, str) and re.fullmatch(OUTPUT_NAME_PATTERNS[kind], name)):
                raise ConfigError(
                    f"{where}.{kind}.{name}: an output name must match "
                    f"{OUTPUT_NAME_PATTERNS[kind]!r} (the paper's numbering, e.g. "
                    f"{kind[:-1]}2 or {kind[:-1]}3_1), got {name!r}"
                )
            _validate_output(f"{where}.{kind}.{name}", out, catalog, kind)
    return grid


def load_grids(folder: str | Path, catalog: dict[str, Any]) -> dict[str, Grid]:
    """Every grid in `folder`, by paper name."""
    return {p.stem: load_grid(p, catalog) for p in sorted(Path(folder).glob("*.yaml"))}


def load_workflow(
    config: dict[str, Any], config_dir: str | Path = "config", papers_dir: str | Path | None = None
) -> dict[str, Grid]:
    """What the Snakefile checks at DAG build, in one call: add config/catalog/*.yaml to `config`
    (in place), validate the catalog, load every grid and resolve every run at its scale."""
    extend_catalog(config, catalog_files(config_dir))
    validate_catalog(config)
    grids = load_grids(papers_dir if papers_dir is not None else Path(config_dir, "papers"), config)
    for grid in grids.values():
        validate_runs(grid, config, resolve_scale(grid, config.get("scale")))
    return grids


def _check_seeds(where: str, seeds: Any) -> None:
    ok = isinstance(seeds, list) and seeds and len(set(seeds)) == len(seeds)
    if not (ok and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)):
        raise ConfigError(
            f"{where}: expected a non-empty list of distinct integers >= 0, got {seeds!r}"
        )


def _validate_output(where: str, out: dict, catalog: dict, kind: str) -> None:
    if kind == "figures" and out.get("kind") == "partition":
        from fedbench.report.partitions import validate_partition_figure

        validate_partition_figure(where, out, catalog)
        return
    if kind == "figures" and out.get("kind") == "parallel":
        from fedbench.report.parallel import validate_parallel_figure

        validate_parallel_figure(where, out, catalog)
        return
    if kind == "figures" and out.get("kind") == "deviation":
        from fedbench.report.deviations import validate_deviation_figure

        validate_deviation_figure(where, out, catalog)
        return
    unknown = sorted(set(out) - set(OUTPUT_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; valid: {list(OUTPUT_KEYS)}")
    for axis in ("rows", "columns"):
        entries = out.get(axis, [{}])
        if (
            not isinstance(entries, list)
            or not entries
            or not all(isinstance(e, dict) for e in entries)
        ):
            raise ConfigError(
                f"{where}.{axis}: expected a non-empty list of mappings (each with an 'id'), "
                f"got {entries!r}"
            )
    if "seeds" in out:
        _check_seeds(f"{where}.seeds", out["seeds"])
    decimals = out.get("decimals", 2)
    if isinstance(decimals, bool) or not (isinstance(decimals, int) and 0 <= decimals <= 10):
        raise ConfigError(
            f"{where}.decimals: expected an integer in 0..10, got {out['decimals']!r}"
        )
    if "percent" in out and not isinstance(out["percent"], bool):
        raise ConfigError(f"{where}.percent: expected true or false, got {out['percent']!r}")
    landscape = kind == "figures" and out.get("kind") == "landscape"
    if landscape:
        _validate_landscape(where, out, catalog)
    elif "landscape" in out:
        raise ConfigError(f"{where}.landscape: only figures of kind 'landscape' take it")
    if "server" in out or "smooth" in out:
        _check_server_figure(where, out, catalog, kind)
    for key in (
        ("rows", "columns")
        if landscape or "server" in out
        else ("metric", "protocol", "stat", "rows", "columns")
    ):
        if key not in out:
            raise ConfigError(f"{where}: missing key {key!r}")
    for key in ("spread", "seed_spread", "summaries"):
        if kind == "figures" and key in out:
            raise ConfigError(f"{where}.{key}: only tables take it")
    if out.get("seed_spread", "std") not in ("std", "pstd", "maxdev"):
        raise ConfigError(
            f"{where}.seed_spread: {out['seed_spread']!r} is not 'std', 'pstd' or 'maxdev'"
        )
    _check_summaries(where, out)
    if kind == "tables" and "kind" in out:
        raise ConfigError(f"{where}.kind: only figures have a kind")
    if kind == "tables" and "panels" in out:
        raise ConfigError(f"{where}.panels: only figures have panels")
    if out.get("panels", "columns") not in ("columns", "cells"):
        raise ConfigError(f"{where}.panels: {out['panels']!r} is not one of ['columns', 'cells']")
    if out.get("kind", "rounds") not in FIGURE_KINDS:
        raise ConfigError(f"{where}.kind: {out['kind']!r} is not one of {list(FIGURE_KINDS)}")
    if out.get("spread") is not None and out["spread"] not in PACK_STATS:
        raise ConfigError(f"{where}.spread: {out['spread']!r} is not one of {list(PACK_STATS)}")
    for entry in (out, *out["rows"], *out["columns"]):
        place = where if entry is out else f"{where} entry {entry.get('id')!r}"
        protocol, stat = entry.get("protocol"), entry.get("stat")
        if stat is not None and stat not in (*PACK_STATS, "value"):
            raise ConfigError(f"{place}.stat: {stat!r} is not one of {list(PACK_STATS)}")
        if protocol == "global_test" and stat not in (None, "value"):
            raise ConfigError(f"{place}.stat: protocol global_test takes stat 'value'")
        metric = entry.get("metric")
        if metric is not None and metric not in CLIENT_METRICS:
            raise ConfigError(f"{place}.metric: {metric!r} is not one of {list(CLIENT_METRICS)}")
    if out.get("round", "final") not in ("final", "best"):
        raise ConfigError(f"{where}.round: must be 'final' or 'best'")
    for axis in ("rows", "columns"):
        ids = [e.get("id") for e in out[axis]]
        if None in ids or len(set(ids)) != len(ids):
            raise ConfigError(f"{where}.{axis}: every entry needs a unique 'id'")
    for row in out["rows"]:
        for col in out["columns"]:
            cell = _merge(row, col, f"{where} cell ({row['id']}, {col['id']})")
            for field in RUN_FIELDS:
                for name in _as_list(cell[field]):
                    if name not in catalog[field + "s"]:
                        raise ConfigError(
                            f"{where} cell ({row['id']}, {col['id']}): unknown {field} {name!r}; "
                            f"valid: {', '.join(sorted(catalog[field + 's']))}"
                        )
            _check_validation(where, row, col, out, cell, catalog)
            _check_binary_metric(where, row, col, out, cell, catalog)


def _check_server_figure(where: str, out: dict, catalog: dict, kind: str) -> None:
    """`server: <name>` (a scalar every cell's algorithm logs, in place of metric/protocol/stat)
    and `smooth` are for figures of kind 'rounds'."""
    from fedbench.report.smooth import parse_smooth

    for key in ("server", "smooth"):
        if key in out and (kind != "figures" or out.get("kind", "rounds") != "rounds"):
            raise ConfigError(f"{where}.{key}: only figures of kind 'rounds' take it")
    parse_smooth(where, out.get("smooth"))
    if "server" not in out:
        return
    name = out["server"]
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}.server: expected a server scalar's name, got {name!r}")
    for entry in (out, *out.get("rows", []), *out.get("columns", [])):
        place = where if entry is out else f"{where} entry {entry.get('id')!r}"
        given = [k for k in QUANTITY_KEYS if k in entry]
        if given:
            raise ConfigError(
                f"{place}.{given[0]}: a figure of a server scalar ({where}.server) reads no "
                f"client metric; drop {given}"
            )
    for row in out.get("rows", []):
        for col in out.get("columns", []):
            cell = _merge(row, col, f"{where} cell ({row.get('id')}, {col.get('id')})")
            for algo in _as_list(cell["algorithm"]):
                if algo not in catalog["algorithms"]:
                    continue  # reported below, with the valid names
                cls = ALGORITHMS[catalog["algorithms"][algo]["algorithm"]]
                if name not in cls.server_scalars:
                    raise ConfigError(
                        f"{where}.server: {name!r} is not logged by algorithm {algo!r} (cell "
                        f"({row.get('id')}, {col.get('id')})); {cls.name} logs "
                        f"{list(cls.server_scalars)}"
                    )


def _check_summaries(where: str, out: dict) -> None:
    """Summary columns: a list of {id, label, stat: mean|std|mean_drop, columns: [column ids]}
    (mean_drop: the columns are (before, after) pairs)."""
    summaries = out.get("summaries", [])
    if not isinstance(summaries, list):
        raise ConfigError(f"{where}.summaries: must be a list")
    col_ids = [c.get("id") for c in out.get("columns", [])]
    for summ in summaries:
        if not isinstance(summ, dict) or summ.get("id") is None:
            raise ConfigError(f"{where}.summaries: every entry needs an 'id', got {summ!r}")
        place = f"{where}.summaries entry {summ['id']!r}"
        unknown = sorted(set(summ) - {"id", "label", "stat", "columns"})
        if unknown:
            raise ConfigError(f"{place}: unknown key(s) {unknown}; valid: id, label, stat, columns")
        if summ["id"] in col_ids:
            raise ConfigError(f"{place}: the id is already a column's")
        if summ.get("stat") not in ("mean", "std", "mean_drop"):
            raise ConfigError(
                f"{place}.stat: must be 'mean', 'std' or 'mean_drop', got {summ.get('stat')!r}"
            )
        bad = [c for c in summ.get("columns", col_ids) if c not in col_ids]
        if bad:
            raise ConfigError(f"{place}.columns: unknown column(s) {bad}; valid: {col_ids}")
        if summ["stat"] == "mean_drop" and len(summ.get("columns", col_ids)) % 2:
            raise ConfigError(f"{place}.columns: mean_drop needs (before, after) column pairs")


def _check_binary_metric(where: str, row: dict, col: dict, out: dict, cell: dict, catalog: dict):
    """auroc is recorded for 2-class datasets only (multiclass AUROC is not computed)."""
    metric = next((e["metric"] for e in (row, col, out) if e.get("metric")), None)
    if metric != "auroc":
        return
    from fedbench.data import SOURCES

    for name in _as_list(cell["dataset"]):
        classes = SOURCES[catalog["datasets"][name]["source"]].num_classes
        if classes != 2:
            raise ConfigError(
                f"{where} cell ({row['id']}, {col['id']}): metric 'auroc' needs a 2-class "
                f"dataset; {name!r} has {classes} classes"
            )


def _check_validation(where: str, row: dict, col: dict, out: dict, cell: dict, catalog: dict):
    """A protocol chosen on a validation split needs partitions that hold one out."""
    protocol = next((e["protocol"] for e in (row, col, out) if e.get("protocol")), None)
    if protocol not in VAL_PROTOCOLS:
        return
    for name in _as_list(cell["partition"]):
        if not catalog["partitions"][name].get("val_fraction", 0) > 0:
            raise ConfigError(
                f"{where} cell ({row['id']}, {col['id']}): protocol {protocol!r} chooses on a "
                f"validation split, but partition {name!r} has no val_fraction > 0"
            )


def _validate_landscape(where: str, out: dict, catalog: dict) -> None:
    """A kind='landscape' figure: its keys, one seed, and settings valid at every scale."""
    from fedbench.metrics.landscape import LandscapeError, LandscapeSettings

    unknown = sorted(set(out) - set(LANDSCAPE_KEYS))
    if unknown:
        raise ConfigError(
            f"{where}: key(s) {unknown} do not apply to a landscape (always the mean "
            f"cross-entropy on the global test set); valid: {list(LANDSCAPE_KEYS)}"
        )
    if not isinstance(out.get("seeds"), list) or len(out["seeds"]) != 1:
        raise ConfigError(f"{where}.seeds: a landscape is of one run per cell: give one seed")
    if not isinstance(out.get("landscape", {}), dict):
        raise ConfigError(f"{where}.landscape: expected a mapping, got {out['landscape']!r}")
    scales = (out.get("landscape") or {}).get("scales") or {}
    bad = sorted(set(scales) - set(catalog["scales"])) if isinstance(scales, dict) else []
    if bad:
        raise ConfigError(
            f"{where}.landscape.scales: unknown scale(s) {bad}; valid: {sorted(catalog['scales'])}"
        )
    for scale in catalog["scales"]:
        try:
            LandscapeSettings.for_scale(out.get("landscape"), scale)
        except (LandscapeError, TypeError) as err:
            raise ConfigError(f"{where}.landscape (scale {scale}): {err}") from None


def _as_list(v: Any) -> list:
    return v if isinstance(v, list) else [v]


def _merge(row: dict, col: dict, where: str) -> dict[str, Any]:
    """The run fields of one cell. A row's field may map column ids to names (SuPerFed's
    per-setting ν and L), with an optional `default`."""
    cell = {}
    for field in RUN_FIELDS:
        values = [e[field] for e in (row, col) if field in e]
        if len(values) != 1:
            raise ConfigError(f"{where}: {field!r} must be set by exactly one of row and column")
        value = values[0]
        if isinstance(value, dict):
            if col["id"] not in value and "default" not in value:
                raise ConfigError(
                    f"{where}: {field!r} maps columns to names but has no entry for column "
                    f"{col['id']!r} and no 'default'"
                )
            value = value.get(col["id"], value.get("default"))
        cell[field] = value
    return cell


def choose_dataset(candidates: str | list[str], catalog: dict, scale: str) -> str:
    """First candidate available offline (real-data scales), else the first one."""
    names = _as_list(candidates)
    if len(names) == 1 or data_mode(catalog, scale) == "standin":
        return names[0]
    from fedbench.data import SOURCES

    for name in names:
        if SOURCES[catalog["datasets"][name]["source"]].available_offline():
            return name
    return names[0]


def resolve_scale(grid: Grid, config_scale: str | None) -> str:
    """The config's scale if set, else the grid's default."""
    return config_scale or grid.default_scale


def cells(
    grid: Grid, kind: str, name: str, catalog: dict, scale: str
) -> dict[tuple[str, str], list[RunKey]]:
    """(row id, column id) -> the runs (one per seed) of that cell (none for a partition
    figure, which draws partition files, not runs)."""
    out = grid.outputs(kind)[name]
    if out.get("kind") == "partition":
        return {}
    seeds = out.get("seeds", grid.raw.get("seeds", [0]))
    seed_cap = catalog["scales"][scale].get("caps", {}).get("seeds")
    if seed_cap is not None:
        seeds = seeds[:seed_cap]
    if out.get("kind") == "parallel":
        return {
            cell: [k for _, keys in points for k in keys]
            for cell, points in parallel_points(grid, name, catalog, scale).items()
        }
    result = {}
    for row in out["rows"]:
        for col in out["columns"]:
            cell = _merge(row, col, f"{grid.name}.{name}")
            dataset = choose_dataset(cell["dataset"], catalog, scale)
            result[(row["id"], col["id"])] = [
                RunKey(dataset, cell["partition"], cell["model"], cell["algorithm"], int(s))
                for s in seeds
            ]
    return result


def column_labels(grid: Grid, kind: str, name: str, catalog: dict, scale: str) -> list[dict]:
    """Columns with '{dataset}' in labels filled by the chosen dataset."""
    out = grid.outputs(kind)[name]
    cols = []
    for col in out["columns"]:
        label = col.get("label", col["id"])
        if "dataset" in col:
            label = label.replace("{dataset}", choose_dataset(col["dataset"], catalog, scale))
        cols.append({**_axis_entry(col), "label": label})
    return cols


QUANTITY_KEYS = ("metric", "protocol", "stat")


def _axis_entry(entry: dict) -> dict[str, Any]:
    """What the report needs of a row or column: id, label, and any quantity override."""
    out = {"id": entry["id"], "label": entry.get("label", entry["id"])}
    out.update({k: entry[k] for k in QUANTITY_KEYS if k in entry})
    if "paper_ref" in entry:  # "table/row": the paper printed this row in another table
        ref = str(entry["paper_ref"])
        if ref.count("/") != 1 or not all(ref.split("/")):
            raise ConfigError(f"row {entry['id']!r}: paper_ref must be 'table/row', got {ref!r}")
        out["paper_ref"] = ref
    return out


def all_runs(grid: Grid, catalog: dict, scale: str) -> list[RunKey]:
    """Every run the grid's tables and figures need (each once)."""
    keys: dict[RunKey, None] = {}
    for kind in ("tables", "figures"):
        for name in grid.outputs(kind):
            for runs in cells(grid, kind, name, catalog, scale).values():
                keys.update(dict.fromkeys(runs))
    return list(keys)


def output_files(grid: Grid, scale: str, root: str = "results") -> list[str]:
    """results/{scale}/papers/{paper}/{name}.{ext} for every table and figure."""
    base = f"{root}/{scale}/papers/{grid.name}"
    files = [f"{base}/{t}.{e}" for t in grid.outputs("tables") for e in TABLE_EXTS]
    files += [f"{base}/{f}.{e}" for f in grid.outputs("figures") for e in FIGURE_EXTS]
    return files


def validate_runs(grid: Grid, catalog: dict, scale: str) -> None:
    """Resolve every run's full spec once (training values included), naming any bad one."""
    for key in all_runs(grid, catalog, scale):
        try:
            resolve_run(
                catalog, scale, key.dataset, key.partition, key.model, key.algorithm, key.seed
            )
        except ValueError as err:
            raise ConfigError(f"{grid.path.name}: run {key.folder(scale)}: {err}") from None


def _spec_header(grid: Grid, kind: str, name: str, scale: str) -> dict[str, Any]:
    """The fields every report spec takes alike from its grid entry: paper, name, caption, scale."""
    caption = grid.outputs(kind)[name].get("caption", "")
    return {"paper": grid.name, "name": name, "caption": caption, "scale": scale}


def _spec_fields(grid: Grid, kind: str, name: str, catalog: dict, scale: str) -> dict[str, Any]:
    out = grid.outputs(kind)[name]
    # A server scalar is read as protocol "server", stat "value" (fedbench.report.collect).
    server = out.get("server")
    return {
        **_spec_header(grid, kind, name, scale),
        "metric": server or out["metric"],
        "protocol": "server" if server else out["protocol"],
        "stat": "value" if server else out["stat"],
        "percent": bool(out.get("percent", False)),
        "rows": [_axis_entry(r) for r in out["rows"]],
        "columns": column_labels(grid, kind, name, catalog, scale),
        "cells": {
            cell: [Path(k.folder(scale)) for k in keys]
            for cell, keys in cells(grid, kind, name, catalog, scale).items()
        },
    }


def table_spec(grid: Grid, name: str, catalog: dict, scale: str):
    """The report's TableSpec of one grid table."""
    from fedbench.report import TableSpec

    out = grid.outputs("tables")[name]
    fields = _spec_fields(grid, "tables", name, catalog, scale)
    fields["rows"], notes = _defaults_marks(
        fields["rows"], cells(grid, "tables", name, catalog, scale), catalog
    )
    return TableSpec(
        **fields,
        notes=notes,
        round=out.get("round", "final"),
        decimals=out.get("decimals", 2),
        spread=out.get("spread"),
        seed_spread=out.get("seed_spread", "std"),
        summaries=[dict(x) for x in out.get("summaries", [])],
    )


DEFAULTS_MARK = "†"


def _defaults_marks(
    rows: list[dict], cellmap: dict[tuple[str, str], list[RunKey]], catalog: dict
) -> tuple[list[dict], list[str]]:
    """Mark rows whose algorithm takes hyperparameters the paper does not give (the class's
    `defaults_from`) with a dagger, and say where they come from in one note per table."""
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


def figure_spec(grid: Grid, name: str, catalog: dict, scale: str):
    """The report's FigureSpec of one grid figure."""
    from fedbench.report import FigureSpec

    out = grid.outputs("figures")[name]
    if out.get("kind") == "landscape":
        raise ConfigError(f"{grid.name}.{name}: a figure of kind landscape (see landscape_spec)")
    if out.get("kind") == "parallel":
        raise ConfigError(f"{grid.name}.{name}: a figure of kind parallel (see parallel_spec)")
    if out.get("kind") == "deviation":
        raise ConfigError(f"{grid.name}.{name}: a figure of kind deviation (see deviation_spec)")
    from fedbench.report.smooth import parse_smooth

    return FigureSpec(
        **_spec_fields(grid, "figures", name, catalog, scale),
        kind=out.get("kind", "rounds"),
        panels=out.get("panels", "columns"),
        smooth=parse_smooth(f"{grid.name}.{name}", out.get("smooth")),
    )


def landscape_file(scale: str, paper: str, figure: str, key: RunKey, root: str = "results") -> str:
    """results/{scale}/landscapes/{paper}/{figure}/{dataset}/{partition}/{model}/{algorithm}/
    seed{seed}.npz: a run's landscape, under the figure whose settings computed it."""
    return (
        f"{root}/{scale}/landscapes/{paper}/{figure}/{key.dataset}/{key.partition}/{key.model}/"
        f"{key.algorithm}/seed{key.seed}.npz"
    )


def landscape_panels(grid: Grid, name: str, catalog: dict, scale: str) -> list[tuple[str, RunKey]]:
    """(panel label, run) per cell of a landscape figure, column by column, rows in order."""
    out = grid.outputs("figures")[name]
    runs = cells(grid, "figures", name, catalog, scale)
    cols = column_labels(grid, "figures", name, catalog, scale)
    panels = []
    for col in cols:
        for row in out["rows"]:
            label = str(row.get("label", row["id"]))
            if len(cols) > 1:
                label += f", {col['label']}"
            panels.append((label, runs[(row["id"], col["id"])][0]))
    return panels


def landscape_spec(grid: Grid, name: str, catalog: dict, scale: str):
    """The report's LandscapeFigureSpec of one grid figure of kind 'landscape'."""
    from fedbench.metrics.landscape import LandscapeSettings
    from fedbench.report.landscape import LandscapeFigureSpec

    out = grid.outputs("figures")[name]
    return LandscapeFigureSpec(
        **_spec_header(grid, "figures", name, scale),
        panels=[
            (label, Path(landscape_file(scale, grid.name, name, key)))
            for label, key in landscape_panels(grid, name, catalog, scale)
        ],
        settings=LandscapeSettings.for_scale(out.get("landscape"), scale),
    )


def partition_panels(
    grid: Grid, name: str, catalog: dict, scale: str
) -> list[tuple[str, str, str]]:
    """(column label, dataset file, partition file) per column of a figure of kind 'partition'."""
    out = grid.outputs("figures")[name]
    seed = int(out.get("seeds", [0])[0])
    panels = []
    for col, labelled in zip(
        out["columns"], column_labels(grid, "figures", name, catalog, scale), strict=True
    ):
        dataset = choose_dataset(col["dataset"], catalog, scale)
        panels.append(
            (
                labelled["label"],
                f"results/{scale}/data/{dataset}.npz",
                f"results/{scale}/partitions/{dataset}/{col['partition']}/seed{seed}.npz",
            )
        )
    return panels


def deviation_spec(grid: Grid, name: str, catalog: dict, scale: str):
    """The report's DeviationFigureSpec of one grid figure of kind 'deviation'."""
    from fedbench.report.deviations import DeviationFigureSpec

    out = grid.outputs("figures")[name]
    return DeviationFigureSpec(
        **_spec_header(grid, "figures", name, scale),
        protocol=out.get("protocol", "personal"),
        client=int(out.get("client", 0)),
        seed=int(out["seeds"][0]),
        rows=[_axis_entry(r) for r in out["rows"]],
        columns=column_labels(grid, "figures", name, catalog, scale),
        cells={
            cell: Path(keys[0].folder(scale))
            for cell, keys in cells(grid, "figures", name, catalog, scale).items()
        },
    )


def partition_spec(grid: Grid, name: str, catalog: dict, scale: str):
    """The report's PartitionFigureSpec of one grid figure of kind 'partition'."""
    from fedbench.report.partitions import PartitionFigureSpec, PartitionPanel

    out = grid.outputs("figures")[name]
    return PartitionFigureSpec(
        **_spec_header(grid, "figures", name, scale),
        splits=tuple(row["id"] for row in out["rows"]),
        columns=tuple(
            PartitionPanel(label, Path(data), Path(part))
            for label, data, part in partition_panels(grid, name, catalog, scale)
        ),
    )


def _named_twins(
    catalog: dict, scale: str, cell: tuple[str, str, str], template: str, variants: list[str]
) -> dict[str, str]:
    """Sweep variant -> the first catalog entry outside the sweep that trains the same run in
    this cell (same algorithm with equal hyperparameters, equal training block), so a sweep's
    default point (pfedbred-mh-l15-e0.05 = pfedbred-mh-l15) reuses the tables' run instead of
    training it a second time under another name."""
    from fedbench.algorithms import build_algorithm
    from fedbench.config import sweep_fields

    pattern = re.escape(template)
    for field in sweep_fields(template):
        pattern = pattern.replace(re.escape("{" + field + "}"), ".+")

    def identity(name: str) -> tuple[str, str] | None:
        try:
            spec = resolve_run(catalog, scale, *cell, name, 0)
        except ConfigError:  # an entry that cannot run in this cell (e.g. too many clients)
            return None
        a = spec["algorithm"]
        algo = build_algorithm(a["algorithm"], **a["params"])
        return repr(algo), yaml.safe_dump(spec["training"], sort_keys=True)

    algos = catalog["algorithms"]
    kinds = {algos[v]["algorithm"] for v in variants}
    named: dict[tuple[str, str], str] = {}
    for name, entry in algos.items():
        if entry.get("algorithm") in kinds and not re.fullmatch(pattern, name):
            key = identity(name)
            if key is not None:
                named.setdefault(key, name)
    twins = {v: named.get(identity(v)) for v in variants}
    return {v: n for v, n in twins.items() if n is not None}


def parallel_points(
    grid: Grid, name: str, catalog: dict, scale: str
) -> dict[tuple[str, str], list[tuple[dict[str, Any], list[RunKey]]]]:
    """(row id, column id) -> (swept values, runs one per seed) per point a figure of kind
    'parallel' draws at this scale (the scale's caps.sweep_points may thin the grid)."""
    from fedbench.config import sweep_fields, sweep_name
    from fedbench.report.parallel import column_sweep, select_points

    out = grid.outputs("figures")[name]
    caps = catalog["scales"][scale].get("caps", {})
    seeds = out.get("seeds", grid.raw.get("seeds", [0]))
    seeds = seeds[: caps["seeds"]] if "seeds" in caps else seeds
    result = {}
    for col in out["columns"]:
        sweep = column_sweep(out, col)
        axes = sweep_fields(sweep["algorithm"])
        points = select_points(sweep["values"], axes, caps.get("sweep_points"))
        dataset = choose_dataset(col["dataset"], catalog, scale)
        cell = (dataset, col["partition"], col["model"])
        variants = [sweep_name(sweep["algorithm"], point) for point in points]
        twins = _named_twins(catalog, scale, cell, sweep["algorithm"], variants)
        runs = [
            (point, [RunKey(*cell, twins.get(v, v), int(s)) for s in seeds])
            for point, v in zip(points, variants, strict=True)
        ]
        for row in out["rows"]:
            result[(row["id"], col["id"])] = runs
    return result


def parallel_spec(grid: Grid, name: str, catalog: dict, scale: str):
    """The report's ParallelFigureSpec of one grid figure of kind 'parallel'."""
    from fedbench.config import sweep_fields
    from fedbench.report.layout import Quantity
    from fedbench.report.parallel import (
        ParallelFigureSpec,
        ParallelPanel,
        ParallelPoint,
        axis_range,
        column_sweep,
    )

    out = grid.outputs("figures")[name]
    points = parallel_points(grid, name, catalog, scale)
    labels = {c["id"]: c["label"] for c in column_labels(grid, "figures", name, catalog, scale)}
    panels = []
    for col in out["columns"]:
        sweep = column_sweep(out, col)
        axes = tuple(sweep_fields(sweep["algorithm"]))
        for row in out["rows"]:
            panels.append(
                ParallelPanel(
                    label=f"{labels[col['id']]} {row.get('label', row['id'])}",
                    quantity=Quantity(out["metric"], row["protocol"], out["stat"]),
                    axes=axes,
                    labels={a: str(sweep["labels"].get(a, a)) for a in axes},
                    ranges={a: axis_range(sweep, a) for a in axes},
                    points=tuple(
                        ParallelPoint(
                            {a: float(v) for a, v in point.items()},
                            tuple(Path(k.folder(scale)) for k in keys),
                        )
                        for point, keys in points[(row["id"], col["id"])]
                    ),
                )
            )
    return ParallelFigureSpec(
        **_spec_header(grid, "figures", name, scale),
        round=out.get("round", "best"),
        panels=tuple(panels),
        columns=len(out["rows"]),
    )

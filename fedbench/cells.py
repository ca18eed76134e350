"""A paper grid's rows x columns: the runs each cell names, and what every output kind shares.

`fedbench.grid` loads grids and asks each output's kind (`fedbench.outputs`) to validate it and
to say which runs it needs; both build on what is here: the run's names (`RunKey`), one cell's
run fields from its row and column (`merge_cell`), the dataset a scale trains on
(`choose_dataset`), and the axis labels and spec header every report spec carries.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedbench.config import ConfigError, data_mode, unknown_entry

RUN_FIELDS = ("dataset", "partition", "model", "algorithm")
# What a row or column may set to override the output's quantity.
QUANTITY_KEYS = ("metric", "protocol", "stat")
SECTIONS = ("tables", "figures")
# Marks a row a user's config overlay added (fedbench.grid.add_rows): not the paper's.
ADDED_MARK = "‡"
ADDED_NOTE = (
    f"{ADDED_MARK} not from the paper: a row added by a config overlay (add_rows), on the "
    "same datasets, partitions and seeds; no paper value and no Δ"
)


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

    def outputs(self, section: str) -> dict[str, dict[str, Any]]:
        """The grid's tables or figures by name."""
        return self.raw.get(section, {}) or {}

    def output(self, section: str, name: str) -> dict[str, Any]:
        """One table's or figure's grid entry."""
        return self.outputs(section)[name]


def as_list(v: Any) -> list:
    """`v` itself if a list, else `[v]` (a cell may name one value or candidates)."""
    return v if isinstance(v, list) else [v]


def check_seeds(where: str, seeds: Any) -> None:
    """A non-empty list of distinct integers >= 0."""
    ints = isinstance(seeds, list) and all(
        isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds
    )
    if not (ints and seeds and len(set(seeds)) == len(seeds)):
        raise ConfigError(
            f"{where}: expected a non-empty list of distinct integers >= 0, got {seeds!r}"
        )


def check_names(place: str, fields: dict[str, Any], catalog: dict) -> None:
    """Every run-field name (one or a list of candidates) is in the catalog."""
    for field, names in fields.items():
        for name in as_list(names):
            if name not in catalog[field + "s"]:
                raise ConfigError(f"{place}: {unknown_entry(catalog, field + 's', name)}")


def merge_cell(row: dict, col: dict, where: str) -> dict[str, Any]:
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
    names = as_list(candidates)
    if len(names) == 1 or data_mode(catalog, scale) == "standin":
        return names[0]
    from fedbench.data import SOURCES

    for name in names:
        if SOURCES[catalog["datasets"][name]["source"]].available_offline():
            return name
    return names[0]


def output_seeds(grid: Grid, out: dict, catalog: dict, scale: str) -> list[int]:
    """The output's seeds (else the grid's), cut to the scale's `caps.seeds`."""
    seeds = out.get("seeds", grid.raw.get("seeds", [0]))
    cap = catalog["scales"][scale].get("caps", {}).get("seeds")
    return seeds if cap is None else seeds[:cap]


def rect_cells(
    grid: Grid, section: str, name: str, catalog: dict, scale: str
) -> dict[tuple[str, str], list[RunKey]]:
    """(row id, column id) -> the runs (one per seed) of every row x column cell."""
    out = grid.output(section, name)
    seeds = output_seeds(grid, out, catalog, scale)
    result = {}
    for row in out["rows"]:
        for col in out["columns"]:
            cell = merge_cell(row, col, f"{grid.name}.{name}")
            dataset = choose_dataset(cell["dataset"], catalog, scale)
            result[(row["id"], col["id"])] = [
                RunKey(dataset, cell["partition"], cell["model"], cell["algorithm"], int(s))
                for s in seeds
            ]
    return result


def axis_entry(entry: dict) -> dict[str, Any]:
    """What the report needs of a row or column: id, label, and any quantity override."""
    out = {"id": entry["id"], "label": entry.get("label", entry["id"])}
    out.update({k: entry[k] for k in QUANTITY_KEYS if k in entry})
    if entry.get("added"):  # a user's row (config overlay add_rows), not the paper's
        out.update(label=f"{out['label']} {ADDED_MARK}", added=True)
    if "paper_ref" in entry:  # "table/row": the paper printed this row in another table
        ref = str(entry["paper_ref"])
        if ref.count("/") != 1 or not all(ref.split("/")):
            raise ConfigError(f"row {entry['id']!r}: paper_ref must be 'table/row', got {ref!r}")
        out["paper_ref"] = ref
    return out


def dataset_label(catalog: dict, name: str) -> str:
    """A dataset's display name: its catalog entry's `label` ('Fashion-MNIST'), else its name."""
    return str(catalog["datasets"][name].get("label", name))


def column_labels(grid: Grid, section: str, name: str, catalog: dict, scale: str) -> list[dict]:
    """Columns with '{dataset}' in labels filled by the chosen dataset's display name."""
    cols = []
    for col in grid.output(section, name)["columns"]:
        label = col.get("label", col["id"])
        if "dataset" in col and "{dataset}" in label:
            chosen = choose_dataset(col["dataset"], catalog, scale)
            label = label.replace("{dataset}", dataset_label(catalog, chosen))
        cols.append({**axis_entry(col), "label": label})
    return cols


def spec_header(grid: Grid, section: str, name: str, scale: str) -> dict[str, Any]:
    """The fields every report spec takes alike from its grid entry: paper, name, caption, scale."""
    caption = grid.output(section, name).get("caption", "")
    return {"paper": grid.name, "name": name, "caption": caption, "scale": scale}


def run_folders(
    cellmap: dict[tuple[str, str], list[RunKey]], scale: str
) -> dict[tuple[str, str], list[Path]]:
    """The run directories of each cell."""
    return {cell: [Path(k.folder(scale)) for k in keys] for cell, keys in cellmap.items()}

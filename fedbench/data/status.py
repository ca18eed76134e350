"""Where every grid's data stands: present, fetchable (by which library or URL), a manual step
(the exact files and their URLs), or a stand-in only at the scale asked for.

`python -m fedbench.data status [--scale quick] [--markdown] [--by-source]` (and
`snakemake data_status`). It reads the YAML files as they are (config/config.yaml's scales and
datasets, config/catalog/*.yaml's datasets, every `dataset:` a grid in config/papers/ names,
candidates included), not through `fedbench.grid`, which sits above the data layer; it hashes
nothing and imports no data library (about 0.6 s of CPU on the project's 2-core machine).
`prepare` re-verifies every file's SHA-256 before it reads it (`manifest_verifies`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = ["Row", "by_source", "grid_datasets", "markdown", "rows", "state", "summary", "text"]

PRESENT = "present and verified"
FETCHABLE = "fetchable"
MANUAL = "needs a manual step"
STANDIN = "stand-in only at this scale"
GENERATED = "generated: nothing to fetch"
UNKNOWN = "unknown source"


@dataclass(frozen=True)
class Row:
    """One dataset at one scale: the grids that name it, its source, its state and how."""

    scale: str
    dataset: str
    source: str
    grids: tuple[str, ...]
    state: str
    how: str


def _yaml(path: Path) -> dict[str, Any]:
    with open(path) as f:
        data = yaml.safe_load(f) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping at the top level")
    return data


def _dataset_names(node: Any) -> Iterator[str]:
    """Every dataset name under a `dataset:` key anywhere in a grid (a name, a list of
    candidates, or a mapping of them)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "dataset":
                yield from _names(value)
            else:
                yield from _dataset_names(value)
    elif isinstance(node, list):
        for item in node:
            yield from _dataset_names(item)


def _names(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _names(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _names(v)


def grid_datasets(config_dir: str | os.PathLike) -> dict[str, tuple[str, list[str]]]:
    """grid name -> (its default scale, the datasets it names, in first-seen order)."""
    out = {}
    for path in sorted(Path(config_dir, "papers").glob("*.yaml")):
        grid = _yaml(path)
        names = list(dict.fromkeys(_dataset_names(grid)))
        out[path.stem] = (str(grid.get("default_scale", "paper")), names)
    return out


def catalog(config_dir: str | os.PathLike) -> tuple[dict[str, Any], dict[str, Any]]:
    """(scales, datasets) of config/config.yaml with config/catalog/*.yaml's datasets added."""
    config_dir = Path(config_dir)
    main = _yaml(config_dir / "config.yaml")
    datasets = dict(main.get("datasets") or {})
    for path in sorted((config_dir / "catalog").glob("*.yaml")):
        datasets.update(_yaml(path).get("datasets") or {})
    return dict(main.get("scales") or {}), datasets


def state(source: Any, raw_dir: Path, mode: str) -> tuple[str, str]:
    """(state, how) of one source whose files live in raw_dir, at a scale with this data mode."""
    if mode == "standin":
        return STANDIN, "generated, shape-faithful stand-in (the numbers mean nothing)"
    if not source.files:
        return GENERATED, source.fetch_route()
    if source.present(raw_dir):
        return PRESENT, f"{raw_dir}/MANIFEST.json (SHA-256 at fetch; sizes match now)"
    if source.needs_manual_step():
        return MANUAL, manual_places(source.manual_files(raw_dir))
    how = source.fetch_route()
    offline = source.offline_dir() if source.available_offline() else None
    if offline is not None and "offline" not in how:
        how += f"; offline copy in {offline}"
    return FETCHABLE, how


def manual_places(files: list[tuple[Path, str]]) -> str:
    """Where each hand-fetched file goes and where it comes from, each source or note said once
    (Clothing1M's 18 files share one: `folder/{a, b, ...} <- where`)."""
    by_where: dict[str, list[Path]] = {}
    for path, where in files:
        by_where.setdefault(where, []).append(Path(path))
    parts = []
    for where, paths in by_where.items():
        if len(paths) == 1:
            parts.append(f"{paths[0]} <- {where}")
            continue
        folder = Path(os.path.commonpath([p.parent for p in paths]))
        names = ", ".join(str(p.relative_to(folder)) for p in paths)
        parts.append(f"{folder}/{{{names}}} <- {where}")
    return "; ".join(parts)


def rows(
    config_dir: str | os.PathLike = "config",
    raw_root: str | os.PathLike = "resources/raw",
    scale: str | None = None,
    sources: Any = None,
) -> list[Row]:
    """One row per (scale, dataset) of every grid: at `scale`, or each grid at its default."""
    if sources is None:
        from fedbench.data import SOURCES as sources
    scales, datasets = catalog(config_dir)
    if scale is not None and scale not in scales:
        raise ValueError(f"unknown scale {scale!r}; valid: {', '.join(sorted(scales))}")
    uses: dict[tuple[str, str], list[str]] = {}
    for grid, (default, names) in grid_datasets(config_dir).items():
        for name in names:
            uses.setdefault((scale or default, name), []).append(grid)
    out = []
    for (at, name), grids in sorted(uses.items()):
        entry = datasets.get(name)
        source_name = entry.get("source") if isinstance(entry, dict) else None
        if source_name not in sources:
            what = "not in the catalog" if entry is None else f"source {source_name!r} unknown"
            out.append(Row(at, name, str(source_name), tuple(grids), UNKNOWN, what))
            continue
        mode = (scales.get(at) or {}).get("data", "real")
        # `source: hub | original` in the entry's params picks the route shown (hub.py)
        source = sources[source_name].routed(dict(entry.get("params") or {}))
        st, how = state(source, Path(raw_root, source_name), mode)
        out.append(Row(at, name, source_name, tuple(grids), st, how))
    return out


def by_source(table: list[Row]) -> list[Row]:
    """One row per (scale, source): its datasets joined in `dataset`, its grids merged (the
    README's shorter table)."""
    merged: dict[tuple[str, str], Row] = {}
    for r in table:
        key = (r.scale, r.source)
        if key not in merged:
            merged[key] = r
            continue
        m = merged[key]
        grids = tuple(dict.fromkeys(m.grids + r.grids))
        merged[key] = Row(m.scale, f"{m.dataset}, {r.dataset}", m.source, grids, m.state, m.how)
    return sorted(merged.values(), key=lambda r: (r.scale, r.source))


HEADER = ("scale", "dataset", "source", "state", "how", "grids")


def _cells(row: Row) -> tuple[str, ...]:
    return (row.scale, row.dataset, row.source, row.state, row.how, ", ".join(row.grids))


def markdown(table: list[Row]) -> str:
    """A markdown table (the README's data table)."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + " --- |" * len(HEADER)]
    for row in table:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in _cells(row)) + " |")
    return "\n".join(lines) + "\n"


def text(table: list[Row]) -> str:
    """Aligned columns (the last, `how`, unpadded), then a count per state."""
    cells = [(r.scale, r.dataset, r.source, r.state) for r in table]
    widths = [
        max(len(x) for x in col) for col in zip(("scale", "dataset", "source", "state"), *cells)
    ]
    lines = []
    for row, how in [(("scale", "dataset", "source", "state"), "how")] + [
        (c, r.how) for c, r in zip(cells, table)
    ]:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + how)
    counts: dict[str, int] = {}
    for r in table:
        counts[r.state] = counts.get(r.state, 0) + 1
    lines.append("")
    lines.append(", ".join(f"{n} {s}" for s, n in counts.items()))
    return "\n".join(lines) + "\n"


# The library a fetch route names (fetch_route's first words), for the summary's rows.
ROUTES = (
    ("torchvision.datasets", "fetchable through torchvision.datasets"),
    ("medmnist.", "fetchable through medmnist"),
    ("datasets.load_dataset", "fetchable through Hugging Face `datasets` (hub)"),
    ("urllib", "fetchable by direct download (urllib)"),
)


def _group(row: Row) -> str:
    if row.state != FETCHABLE:
        return row.state
    return next((label for prefix, label in ROUTES if row.how.startswith(prefix)), FETCHABLE)


def summary(table: list[Row]) -> str:
    """A markdown table of the sources in each state (fetchable ones by library): the README's
    data table, from `status --summary`."""
    groups: dict[str, list[str]] = {}
    for row in table:
        names = groups.setdefault(_group(row), [])
        if row.source not in names:
            names.append(row.source)
    order = [PRESENT] + [label for _, label in ROUTES] + [FETCHABLE, MANUAL, STANDIN, GENERATED]
    order += [g for g in groups if g not in order]
    lines = ["| state | sources |", "| --- | --- |"]
    for g in order:
        if g in groups:
            lines.append(f"| {g} | {', '.join(sorted(groups[g]))} |")
    return "\n".join(lines) + "\n"

"""Partition figures: how a partition spreads the classes over clients, one client x class count
matrix per (split, column); reads the prepared dataset and one seed's partition file, no run
(`fedbench.report.partitions`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fedbench.cells import Grid, RunKey, check_names, choose_dataset, column_labels, spec_header
from fedbench.config import ConfigError
from fedbench.outputs.base import OutputKind, check_axes
from fedbench.report.partitions import (
    SPLITS,
    PartitionFigureSpec,
    PartitionPanel,
    write_partition_figure,
)


class PartitionKind(OutputKind):
    name = "partition"
    section = "figures"
    keys = ("caption", "kind", "rows", "columns", "seeds")
    about = "a partition figure (client x class counts)"

    def check(self, where: str, out: dict[str, Any], catalog: dict) -> None:
        """One seed, rows = splits, columns = (dataset, partition) pairs known to the catalog."""
        seeds = out.get("seeds", [0])
        if not isinstance(seeds, list) or len(seeds) != 1:
            raise ConfigError(f"{where}.seeds: a partition figure draws one seed's split: give one")
        check_axes(where, out)
        for row in out["rows"]:
            if row["id"] not in SPLITS:
                raise ConfigError(f"{where}.rows: id {row['id']!r} is not a split; valid: {SPLITS}")
        for col in out["columns"]:
            place = f"{where} column {col['id']!r}"
            bad = sorted(set(col) - {"id", "label", "dataset", "partition"})
            if bad:
                raise ConfigError(
                    f"{place}: unknown key(s) {bad}; valid: id, label, dataset, partition"
                )
            check_names(place, {f: col.get(f) for f in ("dataset", "partition")}, catalog)

    def runs(
        self, grid: Grid, name: str, catalog: dict, scale: str, choices: str = "read"
    ) -> dict[tuple[str, str], list[RunKey]]:
        return {}  # it draws partition files, not runs

    def inputs(self, grid: Grid, name: str, catalog: dict, scale: str) -> list[str]:
        """Each column's dataset and partition files."""
        panels = partition_panels(grid, name, catalog, scale)
        return [f for _, data, part in panels for f in (data, part)]

    def spec(self, grid: Grid, name: str, catalog: dict, scale: str) -> PartitionFigureSpec:
        return PartitionFigureSpec(
            **spec_header(grid, self.section, name, scale),
            splits=tuple(row["id"] for row in grid.output(self.section, name)["rows"]),
            columns=tuple(
                PartitionPanel(label, Path(data), Path(part))
                for label, data, part in partition_panels(grid, name, catalog, scale)
            ),
        )

    def render(self, spec: PartitionFigureSpec, out_prefix: Path) -> list[Path]:
        return write_partition_figure(spec, out_prefix)


def partition_panels(
    grid: Grid, name: str, catalog: dict, scale: str
) -> list[tuple[str, str, str]]:
    """(column label, dataset file, partition file) per column of a figure of kind 'partition'."""
    out = grid.output("figures", name)
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

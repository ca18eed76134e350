"""Partition figures: how a partition spreads the classes over clients, one client x class count
matrix per (split, column); reads the prepared dataset and one seed's partition file, no run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.cells import Grid, RunKey, check_names, choose_dataset, column_labels, spec_header
from fedbench.config import ConfigError
from fedbench.outputs.base import OutputKind, check_axes


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


# ---------------------------------------------------------------------------------------------
# Drawing (was fedbench/report/partitions.py).
# Figures of how a partition spreads the classes over clients: one client x class count matrix
# per panel, for the clients' training and test splits (pFedBreD's Figures 4 and 10).
#
# A figure of kind `partition` names, per column, a dataset and a partition; its rows are the
# splits to draw (`train`, `test`). It reads the partition file of one seed and the labels of the
# prepared dataset; no run is needed.


SPLITS = ("train", "test")


@dataclass(frozen=True)
class PartitionPanel:
    """One column of a partition figure: where its labels and split are."""

    label: str
    data: Path
    partition: Path


@dataclass(frozen=True)
class PartitionFigureSpec:
    paper: str
    name: str
    caption: str
    scale: str
    splits: tuple[str, ...]
    columns: tuple[PartitionPanel, ...]


def count_matrix(labels: np.ndarray, clients: list[np.ndarray], num_classes: int) -> np.ndarray:
    """(clients, classes) sample counts of the given per-client index arrays."""
    out = np.zeros((len(clients), num_classes), dtype=np.int64)
    for k, idx in enumerate(clients):
        out[k] = np.bincount(labels[np.asarray(idx, dtype=np.int64)], minlength=num_classes)
    return out


def partition_counts(data_path: Path, partition_path: Path) -> dict[str, np.ndarray]:
    """Per split, the client x class counts of one partition file (labels after any noise
    the partition applied: what the clients train and are tested on)."""
    from fedbench.data.base import load_dataset
    from fedbench.data.partition import load_partition

    ds = load_dataset(data_path)
    part = load_partition(partition_path)
    labels = ds.y_train if part.labels is None else part.labels
    labels = np.asarray(labels, dtype=np.int64)
    return {
        "train": count_matrix(labels, part.train, ds.num_classes),
        "test": count_matrix(labels, part.test, ds.num_classes),
    }


def write_partition_figure(spec: PartitionFigureSpec, out_prefix: str | Path) -> list[Path]:
    """Heatmaps (rows = splits, columns = partitions; clients vertical, classes horizontal, as
    the paper draws them), log colour scale; .png and .pdf, each written atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm

    from fedbench.report.figures import save_figure

    counts = [partition_counts(c.data, c.partition) for c in spec.columns]
    nr, nc = len(spec.splits), len(spec.columns)
    fig, axes = plt.subplots(
        nr, nc, figsize=(2.8 * nc + 1.2, 2.8 * nr + 0.6), squeeze=False, layout="constrained"
    )
    vmax = max(int(m[s].max()) for m in counts for s in spec.splits) or 1
    image: Any = None
    for j, (col, mats) in enumerate(zip(spec.columns, counts, strict=True)):
        for i, split in enumerate(spec.splits):
            ax = axes[i][j]
            m = mats[split].astype(float)
            image = ax.imshow(
                np.where(m > 0, m, np.nan),
                aspect="auto",
                interpolation="nearest",
                cmap="viridis",
                norm=LogNorm(vmin=1, vmax=vmax),
            )
            ax.set_title(f"{col.label}: {split}", fontsize=9)
            if i == nr - 1:
                ax.set_xlabel("class", fontsize=8)
            if j == 0:
                ax.set_ylabel("client", fontsize=8)
            ax.tick_params(labelsize=7)
    if image is not None:
        fig.colorbar(image, ax=axes, shrink=0.8, label="samples (log scale; blank = none)")
    title = spec.caption or spec.name
    if spec.scale != "paper":
        title += f" [{spec.scale} scale]"
    fig.suptitle(title, fontsize=10)
    return save_figure(fig, out_prefix)

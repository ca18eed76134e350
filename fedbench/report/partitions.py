"""Figures of how a partition spreads the classes over clients: one client x class count matrix
per panel, for the clients' training and test splits (pFedBreD's Figures 4 and 10).

A figure of kind `partition` names, per column, a dataset and a partition; its rows are the
splits to draw (`train`, `test`). It reads the partition file of one seed and the labels of the
prepared dataset; no run is needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

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

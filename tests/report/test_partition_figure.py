"""Figures of kind 'partition' (client x class counts; pFedBreD's Figures 4 and 10)."""

from __future__ import annotations

import numpy as np
import pytest

from fedbench.config import ConfigError
from fedbench.data.base import ArrayDataset, save_dataset
from fedbench.data.partition import Partition, save_partition
from fedbench.outputs.partition import (
    PartitionFigureSpec,
    PartitionKind,
    PartitionPanel,
    count_matrix,
    partition_counts,
    write_partition_figure,
)

CATALOG = {"datasets": {"d": {}}, "partitions": {"p": {}}}


def _figure(**kw):
    out = {
        "kind": "partition",
        "seeds": [0],
        "rows": [{"id": "train"}, {"id": "test"}],
        "columns": [{"id": "c", "dataset": "d", "partition": "p"}],
    }
    out.update(kw)
    return out


def test_count_matrix_by_hand():
    labels = np.array([0, 1, 1, 2, 2, 2])
    m = count_matrix(labels, [np.array([0, 1]), np.array([3, 4, 5, 2])], 4)
    assert m.tolist() == [[1, 1, 0, 0], [0, 1, 3, 0]]


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"metric": "top1"}, "metric"),
        ({"seeds": [0, 1]}, "one"),
        ({"rows": [{"id": "val"}]}, "not a split"),
        ({"columns": [{"id": "c", "dataset": "nope", "partition": "p"}]}, "unknown dataset 'nope'"),
        ({"columns": [{"id": "c", "dataset": "d", "partition": "p", "model": "m"}]}, "model"),
        ({"rows": []}, "rows"),
    ],
)
def test_bad_figures_are_rejected_naming_the_key(change, needle):
    PartitionKind().validate("g.figure9", _figure(), CATALOG)  # the unchanged one is fine
    with pytest.raises(ConfigError, match=needle):
        PartitionKind().validate("g.figure9", _figure(**change), CATALOG)


def _files(tmp_path, noisy=False):
    y = np.array([0, 0, 1, 1, 2, 2, 2, 1])
    ds = ArrayDataset(
        name="toy",
        x_train=np.zeros((8, 2), dtype=np.float32),
        y_train=y,
        x_test=np.zeros((2, 2), dtype=np.float32),
        y_test=np.array([0, 1]),
        num_classes=3,
        standin=True,
        provenance="test",
    )
    save_dataset(ds, tmp_path / "d.npz")
    labels = np.array([2, 2, 2, 2, 2, 2, 2, 2]) if noisy else None
    part = Partition(
        train=[np.array([0, 1, 2]), np.array([4, 5])],
        test=[np.array([3]), np.array([6, 7])],
        meta={},
        labels=labels,
    )
    save_partition(tmp_path / "p.npz", part)
    return tmp_path / "d.npz", tmp_path / "p.npz"


def test_counts_from_files_and_noisy_labels(tmp_path):
    data, part = _files(tmp_path)
    counts = partition_counts(data, part)
    assert counts["train"].tolist() == [[2, 1, 0], [0, 0, 2]]
    assert counts["test"].tolist() == [[0, 1, 0], [0, 1, 1]]
    # With label noise the partition's labels are the ones the clients hold.
    data, part = _files(tmp_path, noisy=True)
    assert partition_counts(data, part)["train"].tolist() == [[0, 0, 3], [0, 0, 2]]


def test_figure_files_written(tmp_path):
    data, part = _files(tmp_path)
    spec = PartitionFigureSpec(
        paper="p",
        name="figure9",
        caption="toy",
        scale="smoke",
        splits=("test", "train"),
        columns=(PartitionPanel("A", data, part), PartitionPanel("B", data, part)),
    )
    paths = write_partition_figure(spec, tmp_path / "figure9")
    assert [p.name for p in paths] == ["figure9.png", "figure9.pdf"]
    assert all(p.stat().st_size > 1000 for p in paths)
    assert not list(tmp_path.glob("*.tmp*"))


def test_grid_partition_figure_has_files_not_runs():
    from fedbench.config import load_catalog
    from fedbench.grid import cells, load_grid, output_spec
    from fedbench.outputs.partition import partition_panels

    cat = load_catalog("config/config.yaml")
    grid = load_grid("config/papers/pfedbred.yaml", cat)
    assert cells(grid, "figures", "figure10", cat, "smoke") == {}
    panels = partition_panels(grid, "figure10", cat, "smoke")
    assert panels[0] == (
        "α=0.01",
        "results/smoke/data/pfedbred-fmnist.npz",
        "results/smoke/partitions/pfedbred-fmnist/pfedbred-fmnist-dir0.01-k40/seed0.npz",
    )
    assert output_spec(grid, "figures", "figure10", cat, "smoke").splits == ("test", "train")

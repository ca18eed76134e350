"""Display names in the quick grid's outputs: a dataset's catalog `label` where a column label
says {dataset}, plain method names in the rows."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from fedbench.config import ConfigError, load_catalog
from fedbench.grid import cells, load_grid, output_spec

ROOT = Path(__file__).resolve().parent.parent
NAMES = {"fmnist": "Fashion-MNIST", "mnist5k": "MNIST-5k"}


@pytest.mark.parametrize(("section", "name"), [("tables", "table1"), ("figures", "figure1")])
def test_columns_name_the_dataset_and_rows_the_method(catalog, section, name):
    grid = load_grid(ROOT / "config" / "papers" / "quick.yaml", catalog)
    spec = output_spec(grid, section, name, catalog, "quick")
    chosen = cells(grid, section, name, catalog, "quick")[("fedavg", "image-shards")][0].dataset
    labels = [c["label"] for c in spec.columns]
    assert labels[:2] == [
        f"{NAMES[chosen]}, 2 shards/client, K=100",
        f"{NAMES[chosen]}, Dirichlet 0.3, K=100",
    ]
    assert labels[2] == "Synthetic(1,1), 30 devices"  # no {dataset}: as written
    assert [r["label"] for r in spec.rows] == ["FedAvg", "FedProx (μ = 0.01)", "SCAFFOLD"]


def test_a_dataset_without_a_label_is_named_by_its_key(catalog):
    bare = copy.deepcopy(catalog)
    for name in NAMES:
        bare["datasets"][name].pop("label")
    grid = load_grid(ROOT / "config" / "papers" / "quick.yaml", bare)
    spec = output_spec(grid, "tables", "table1", bare, "quick")
    chosen = cells(grid, "tables", "table1", bare, "quick")[("fedavg", "image-shards")][0].dataset
    assert spec.columns[0]["label"] == f"{chosen}, 2 shards/client, K=100"


def test_the_catalog_takes_a_dataset_label_and_still_names_unknown_keys(tmp_path):
    text = (ROOT / "config" / "config.yaml").read_text()
    assert "label: Fashion-MNIST" in text
    bad = text.replace("    label: Fashion-MNIST\n", "    lable: Fashion-MNIST\n", 1)
    (tmp_path / "config.yaml").write_text(bad)
    if (ROOT / "config" / "catalog").is_dir():
        (tmp_path / "catalog").symlink_to(ROOT / "config" / "catalog")
    with pytest.raises(ConfigError, match="lable"):
        load_catalog(tmp_path / "config.yaml")

"""Rows whose hyperparameters come from the method's own paper are marked in generated tables."""

from fedbench.config import load_catalog
from fedbench.grid import load_grid, output_spec
from fedbench.outputs.table import DEFAULTS_MARK


def test_rows_of_methods_without_paper_hyperparameters_are_marked():
    cat = load_catalog("config/config.yaml")
    grid = load_grid("config/papers/pfedbred.yaml", cat)
    spec = output_spec(grid, "tables", "table1", cat, "smoke")
    labels = {r["id"]: r["label"] for r in spec.rows}
    # FedEM and pFedBayes take their own papers' defaults (their classes say so); the paper's own
    # methods and the baselines it configures are not marked.
    assert labels["fedem"].endswith(DEFAULTS_MARK) and labels["pfedbayes"].endswith(DEFAULTS_MARK)
    assert not labels["mh"].endswith(DEFAULTS_MARK)
    assert not labels["fedavg"].endswith(DEFAULTS_MARK)
    (note,) = spec.notes
    assert "fedem: FedEM" in note and "pfedbayes: pFedBayes" in note
    # A table with no such row has no note.
    assert output_spec(grid, "tables", "table3", cat, "smoke").notes == []

"""Paper values as data: loading, lookup, and errors naming the file and the entry."""

from __future__ import annotations

import pytest

from fedbench.io import write_text, write_yaml
from fedbench.papers import PaperValuesError, load_paper_values

GOOD = {
    "table": "table2_3",
    "row": "fedavg",
    "column": "mnist-k50",
    "value": 74.8,
    "std": 1.2,
    "where": "Table 2.3, row FedAvg, column MNIST K=50",
}


def write(tmp_path, *entries, paper="demo", **top):
    """Write tmp_path/demo.yaml with the given entries; return its path."""
    doc = {"paper": paper, "source": "a test", "values": list(entries), **top}
    write_yaml(tmp_path / "demo.yaml", doc)
    return tmp_path / "demo.yaml"


def test_load_and_get(tmp_path):
    write(tmp_path, GOOD, {**GOOD, "column": "cifar", "value": 60, "std": None})
    pv = load_paper_values("demo", tmp_path)
    v = pv.get("table2_3", "fedavg", "mnist-k50")
    assert (v.value, v.std, v.where) == (74.8, 1.2, GOOD["where"])
    assert pv.get("table2_3", "fedavg", "cifar").std is None
    assert pv.get("table2_3", "fedprox", "mnist-k50") is None and len(pv) == 2


def test_missing_file_is_empty(tmp_path):
    pv = load_paper_values("nothing", tmp_path)
    assert len(pv) == 0 and pv.get("t", "r", "c") is None


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({k: v for k, v in GOOD.items() if k != "where"}, r"missing key\(s\) \['where'\]"),
        ({**GOOD, "vlaue": 1.0}, r"unknown key\(s\) \['vlaue'\]"),
        ({**GOOD, "value": "74.8"}, "'value' must be a finite number"),
        ({**GOOD, "value": True}, "'value' must be a finite number"),
        ({**GOOD, "std": -1}, "'std' must be a number >= 0"),
        ({**GOOD, "row": ""}, "'row' must be a non-empty string"),
        ("just a string", "must be a mapping"),
    ],
)
def test_malformed_entry_names_file_and_entry(tmp_path, entry, message):
    path = write(tmp_path, GOOD, entry)
    with pytest.raises(PaperValuesError, match=message) as err:
        load_paper_values("demo", tmp_path)
    assert str(path) in str(err.value) and "values[1]" in str(err.value)


def test_malformed_file(tmp_path):
    path = tmp_path / "demo.yaml"
    write(tmp_path, GOOD, GOOD)
    with pytest.raises(PaperValuesError, match=r"values\[1\] repeats"):
        load_paper_values("demo", tmp_path)
    write(tmp_path, GOOD, paper="other")
    with pytest.raises(PaperValuesError, match="'paper' is 'other'"):
        load_paper_values("demo", tmp_path)
    write(tmp_path, GOOD, extra=1)
    with pytest.raises(PaperValuesError, match=r"unknown key\(s\) \['extra'\]"):
        load_paper_values("demo", tmp_path)
    write_text(path, "paper: demo\nvalues: [unclosed\n")
    with pytest.raises(PaperValuesError, match="cannot read") as err:
        load_paper_values("demo", tmp_path)
    assert str(path) in str(err.value)

"""What each paper reported, as data: `fedbench/papers/{paper}.yaml`, validated on load.

A file looks like::

    paper: superfed
    source: "S.-J. Hahn, doctoral thesis (UNIST 2024), text file 000"
    values:
      - {table: table2_3, row: fedavg, column: mnist-k50, value: 74.8, std: 1.2,
         where: "Table 2.3, row FedAvg, column MNIST K=50"}

Values are stored exactly as printed in the paper (so in % when the paper prints %); `std` is the
paper's own ± when it gives one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

PAPERS_DIR = Path(__file__).resolve().parent
TOP_KEYS = ("paper", "source", "values")
REQUIRED_KEYS = ("table", "row", "column", "value", "where")
OPTIONAL_KEYS = ("std",)


class PaperValuesError(ValueError):
    """A malformed paper-values file, named by its path and entry."""


@dataclass(frozen=True)
class PaperValue:
    """One number a paper printed, with where it was printed."""

    table: str
    row: str
    column: str
    value: float
    where: str
    std: float | None = None


@dataclass(frozen=True)
class PaperValues:
    """All numbers one paper reported, looked up by (table, row id, column id)."""

    paper: str
    source: str = ""
    values: dict[tuple[str, str, str], PaperValue] = field(default_factory=dict)

    def get(self, table: str, row: str, column: str) -> PaperValue | None:
        """The paper's value for one table cell, or None when the paper gives none."""
        return self.values.get((table, row, column))

    def __len__(self) -> int:
        """Number of reported values."""
        return len(self.values)


def _number(raw: Any) -> float | None:
    """A finite real number from YAML, or None when `raw` is not one."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        return None
    value = float(raw)
    return value if math.isfinite(value) else None


def _entry(path: Path, i: int, raw: Any) -> PaperValue:
    """Validate one `values` entry."""
    if not isinstance(raw, dict):
        raise PaperValuesError(f"{path}: values[{i}] must be a mapping, got {type(raw).__name__}")
    label = ", ".join(f"{k}={raw[k]}" for k in ("table", "row", "column") if k in raw)
    where = f"{path}: values[{i}] ({label})"
    missing = [k for k in REQUIRED_KEYS if k not in raw]
    if missing:
        required = list(REQUIRED_KEYS)
        raise PaperValuesError(f"{where}: missing key(s) {missing}; required: {required}")
    unknown = sorted(set(raw) - set(REQUIRED_KEYS) - set(OPTIONAL_KEYS))
    if unknown:
        valid = sorted(REQUIRED_KEYS + OPTIONAL_KEYS)
        raise PaperValuesError(f"{where}: unknown key(s) {unknown}; valid: {valid}")
    for key in ("table", "row", "column", "where"):
        if not isinstance(raw[key], str) or not raw[key].strip():
            raise PaperValuesError(f"{where}: {key!r} must be a non-empty string")
    value = _number(raw["value"])
    if value is None:
        raise PaperValuesError(f"{where}: 'value' must be a finite number, got {raw['value']!r}")
    std = raw.get("std")
    if std is not None:
        std = _number(std)
        if std is None or std < 0:
            raise PaperValuesError(f"{where}: 'std' must be a number >= 0, got {raw['std']!r}")
    return PaperValue(raw["table"], raw["row"], raw["column"], value, raw["where"], std)


def read_paper_values(path: str | Path) -> PaperValues:
    """Read and validate one paper-values YAML file."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise PaperValuesError(f"{path}: cannot read paper values: {err}") from err
    if not isinstance(doc, dict):
        raise PaperValuesError(f"{path}: expected a mapping with keys {list(TOP_KEYS)}")
    unknown = sorted(set(doc) - set(TOP_KEYS))
    if unknown:
        raise PaperValuesError(f"{path}: unknown key(s) {unknown}; valid: {list(TOP_KEYS)}")
    if not isinstance(doc.get("paper"), str) or not doc["paper"]:
        raise PaperValuesError(f"{path}: 'paper' must be a non-empty string")
    if not isinstance(doc.get("source"), str) or not doc["source"].strip():
        raise PaperValuesError(f"{path}: 'source' must say where the numbers come from")
    raw_values = doc.get("values")
    if not isinstance(raw_values, list):
        raise PaperValuesError(f"{path}: 'values' must be a list of entries")
    values: dict[tuple[str, str, str], PaperValue] = {}
    for i, raw in enumerate(raw_values):
        pv = _entry(path, i, raw)
        key = (pv.table, pv.row, pv.column)
        if key in values:
            raise PaperValuesError(f"{path}: values[{i}] repeats table/row/column {key}")
        values[key] = pv
    return PaperValues(doc["paper"], doc["source"], values)


def load_paper_values(paper: str, directory: str | Path | None = None) -> PaperValues:
    """The values of `{directory}/{paper}.yaml` (default: this package), or none if no file."""
    path = Path(directory or PAPERS_DIR) / f"{paper}.yaml"
    if not path.exists():
        return PaperValues(paper)
    pv = read_paper_values(path)
    if pv.paper != paper:
        raise PaperValuesError(f"{path}: 'paper' is {pv.paper!r} but the file is for {paper!r}")
    return pv


__all__ = [
    "PaperValue",
    "PaperValues",
    "PaperValuesError",
    "load_paper_values",
    "read_paper_values",
]

"""Heart disease (UCI, as FLamby's Fed-Heart-Disease): 4 hospitals, 15 features, binary.

AAggFF's Table 3.10 benchmark (aaggff.md §9.4): the four `processed.*.data` files, columns 10-12
(slope, ca, thal) dropped, missing values filled with the hospital's column mean, cp and restecg
one-hot, target = (num > 0).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.data.base import ArrayDataset, RemoteFile
from fedbench.data.berka import standardise_per_client
from fedbench.data.natural import CheckedSource, natural_dataset, natural_standin, tabular_draw

UCI_URL = "https://archive.ics.uci.edu/ml/machine-learning-databases/heart-disease/"
HOSPITALS = ("cleveland", "hungarian", "switzerland", "va")
FILES = tuple(f"processed.{h}.data" for h in HOSPITALS)
KEPT = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9)  # age sex cp trestbps chol fbs restecg thalach exang oldpeak
NUMERIC = ("age", "sex", "trestbps", "chol", "fbs", "thalach", "exang", "oldpeak")
CP_VALUES, RESTECG_VALUES = (1, 2, 3, 4), (0, 1, 2)
# Rows per hospital in the UCI files (303, 294, 123, 200 = 920); FLamby drops rows with missing
# values (740), the AAggFF release fills them with the mean (920).
STATS = (4, 230.0, 78.0)


def parse_heart(text: str, what: str, allow_empty: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """One processed.*.data file -> (15 features, label); '?' filled with the column mean."""
    rows = [line.split(",") for line in text.splitlines() if line.strip()]
    if not rows and allow_empty:
        return np.zeros((0, 15)), np.zeros(0, dtype=np.int64)
    if not rows or any(len(r) != 14 for r in rows):
        bad = next((len(r) for r in rows if len(r) != 14), 0)
        raise ValueError(f"{what}: expected 14 comma-separated columns per row, found {bad}")
    try:
        table = np.array([[np.nan if v.strip() == "?" else float(v) for v in r] for r in rows])
    except ValueError as err:
        raise ValueError(f"{what}: non-numeric value ({err})") from None
    cols = table[:, KEPT]
    seen = (~np.isnan(cols)).sum(axis=0)
    # a column missing in every row of a hospital is filled with 0
    means = np.nansum(cols, axis=0) / np.maximum(seen, 1)
    cols = np.where(np.isnan(cols), means, cols)
    cp, restecg = cols[:, 2].round(), cols[:, 6].round()
    numeric = cols[:, [0, 1, 3, 4, 5, 7, 8, 9]]
    onehot = [(cp == v).astype(float) for v in CP_VALUES] + [
        (restecg == v).astype(float) for v in RESTECG_VALUES
    ]
    x = np.column_stack([numeric, *onehot])
    y = (table[:, 13] > 0).astype(np.int64)
    return x, y


def _missing(values: list[str]) -> bool:
    """True when a row lacks one of the kept columns (FLamby's dropping of incomplete rows)."""
    return any(i >= len(values) or values[i].strip() == "?" for i in KEPT)


class Heart(CheckedSource):
    """UCI heart disease, 4 hospitals (Cleveland, Hungarian, Switzerland, VA Long Beach).

    The UCI repository publishes no checksums; fetch checks that each file parses as 14 numeric
    columns. The release fits a StandardScaler on each hospital's 80 % split; here
    `standardise: client` z-scores each hospital's 15 columns over all its rows. One-hot columns
    use the fixed categories cp 1-4 and restecg 0-2, so every hospital has the same 15 features
    (the release's per-hospital get_dummies could give fewer where a value never occurs).
    """

    name = "heart"
    input_shape = (15,)
    num_classes = 2
    params = {"standardise": "client", "missing": "mean"}
    files = [RemoteFile(f, (UCI_URL + f,)) for f in FILES]

    def _params(self, params: dict[str, Any]) -> dict[str, Any]:
        params = self.check_params(params)
        if params["standardise"] not in ("client", "none"):
            raise ValueError(
                f"heart: standardise must be client|none, got {params['standardise']!r}"
            )
        if params["missing"] not in ("mean", "drop"):
            raise ValueError(f"heart: missing must be mean|drop, got {params['missing']!r}")
        return params

    def check_file(self, filename: str, path: Path) -> None:
        """Each file must parse as 14 numeric columns."""
        parse_heart(path.read_text(errors="strict"), filename)

    def load(self, raw_dir: str | os.PathLike, **params: Any) -> ArrayDataset:
        """All rows of the four hospitals, groups = hospital in the order of HOSPITALS."""
        params = self._params(params)
        xs, ys, gs = [], [], []
        for k, f in enumerate(FILES):
            text = self._path(raw_dir, f).read_text()
            if params["missing"] == "drop":
                text = "\n".join(
                    line for line in text.splitlines() if not _missing(line.split(","))
                )
            x, y = parse_heart(text, f, allow_empty=params["missing"] == "drop")
            xs.append(x)
            ys.append(y)
            gs.append(np.full(len(y), k, dtype=np.int64))
        x, groups = np.concatenate(xs), np.concatenate(gs)
        if params["standardise"] == "client":
            x = standardise_per_client(x, groups, x.shape[1])
        return natural_dataset(
            self.name,
            x,
            np.concatenate(ys),
            groups,
            self.num_classes,
            f"heart: {', '.join(FILES)} in {raw_dir}; rows per hospital "
            f"{[len(y) for y in ys]}; params={params}",
        )

    def standin(
        self, rng: np.random.Generator, *, n_train: int = 2000, n_test: int = 500, **params: Any
    ) -> ArrayDataset:
        """15 standardised features, binary label, 4 hospitals."""
        self._params(params)
        return natural_standin(
            self.name,
            rng,
            n_train,
            STATS,
            None,
            tabular_draw(15, 2),
            self.num_classes,
            "15 Gaussian features with a class direction and hospital offsets",
        )

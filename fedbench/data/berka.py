"""Berka (PKDD'99 Czech financial data): loan default, 15 features, one client per region.

AAggFF's cross-silo benchmark (aaggff.md §9.4): 682 loans; the regions (district table A3) are the
clients, north Bohemia (one default only) left out, so 7 clients and 621 loans.
"""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.data.base import ArrayDataset, RemoteFile
from fedbench.data.natural import (
    CheckedSource,
    check_zip_members,
    natural_dataset,
    natural_standin,
    tabular_draw,
)

BERKA_ZIP = "data_berka.zip"
TABLES = ("loan", "account", "district", "order", "trans")
EXCLUDED_REGION = "north Bohemia"
FREQUENCY = {"POPLATEK MESICNE": 0, "POPLATEK TYDNE": 1, "POPLATEK PO OBRATU": 2}
FEATURES = (
    "amount",
    "duration",
    "payments",
    "date_between",
    "num_inhabitants",
    "average_salary",
    "entrepreneur_rate",
    "average_unemployment_rate",
    "average_crime_rate",
    "average_order_amount",
    "num_trans",
    "average_trans_amount",
    "average_trans_balance",
    "frequency_1",
    "frequency_2",
)
STATS = (7, 88.71, 24.78)  # Table 3.5: clients, mean and std of the per-client sample counts


def read_tables(path: Path) -> dict[str, Any]:
    """The five .asc tables (';'-separated, quoted strings) of the zip as pandas frames."""
    import pandas as pd

    out = {}
    with zipfile.ZipFile(path) as z:
        members = {Path(n).stem: n for n in z.namelist() if n.endswith(".asc")}
        for table in TABLES:
            if table not in members:
                raise ValueError(f"{path}: no {table}.asc in the zip")
            out[table] = pd.read_csv(
                io.BytesIO(z.read(members[table])), sep=";", low_memory=False, na_values=["?"]
            )
    return out


def berka_features(tables: dict[str, Any], district_mean: str) -> tuple[Any, list[str]]:
    """One row per loan: the 15 features, status (0 good: A/C, 1 default: B/D) and region.

    district_mean "thesis": unemployment = mean(A12, A13), crime = mean(A15, A16), ignoring the
    one missing ('?') value. "code": the release's pandas call skips a whole column that held a
    '?' (A12, A15), so unemployment = A13 and crime = A16.
    """
    import pandas as pd

    loan = tables["loan"].merge(tables["account"], on="account_id", suffixes=("_loan", "_acc"))
    status = loan["status"].map({"A": 0, "C": 0, "B": 1, "D": 1})
    if status.isna().any():
        raise ValueError(
            f"loan.asc: unknown status values {sorted(set(loan['status']) - set('ABCD'))}"
        )
    loan["status"] = status.astype(np.int64)
    days = pd.to_datetime(loan["date_loan"].astype(str), format="%y%m%d") - pd.to_datetime(
        loan["date_acc"].astype(str), format="%y%m%d"
    )
    loan["date_between"] = days.dt.days
    district = tables["district"].rename(
        columns={
            "A1": "district_id",
            "A4": "num_inhabitants",
            "A11": "average_salary",
            "A14": "entrepreneur_rate",
        }
    )
    pairs = {"average_unemployment_rate": ("A12", "A13"), "average_crime_rate": ("A15", "A16")}
    for new, (a, b) in pairs.items():
        if district_mean == "code":
            cols = [c for c in (a, b) if not district[c].isna().any()]
        else:
            cols = [a, b]
        district[new] = district[cols].astype(float).mean(axis=1)
    keep = ["district_id", "A3", "num_inhabitants", "average_salary", "entrepreneur_rate"]
    merged = loan.merge(district[keep + list(pairs)], on="district_id", how="left")
    order = tables["order"].groupby("account_id")["amount"].mean().rename("average_order_amount")
    merged = merged.merge(order, left_on="account_id", right_index=True, how="left")
    trans = (
        tables["trans"]
        .groupby("account_id")
        .agg(
            num_trans=("amount", "count"),
            average_trans_amount=("amount", "mean"),
            average_trans_balance=("balance", "mean"),
        )
    )
    merged = merged.merge(trans, left_on="account_id", right_index=True, how="inner")
    freq = merged["frequency"].map(FREQUENCY)
    if freq.isna().any():
        raise ValueError(f"account.asc: unknown frequency values {set(merged['frequency'])}")
    merged["frequency_1"] = (freq == 1).astype(float)
    merged["frequency_2"] = (freq == 2).astype(float)
    return merged, list(FEATURES)


def standardise_per_client(x: np.ndarray, groups: np.ndarray, columns: int) -> np.ndarray:
    """z-score the first `columns` features within each client (population std, 0 -> 1)."""
    x = x.copy()
    for g in np.unique(groups):
        rows = groups == g
        block = x[rows, :columns]
        std = block.std(axis=0)
        x[rows, :columns] = (block - block.mean(axis=0)) / np.where(std > 0, std, 1.0)
    return x


class Berka(CheckedSource):
    """PKDD'99 Berka: 621 loans of 7 regions, 15 features, binary default (2 logits).

    The release (AAggFF `berka.py`) merges loan, account, district, order and trans (not client,
    disp, card, although the thesis says all 8 tables), and cites an MD5 for the zip; no SHA-256
    is published, so fetch checks that the zip holds the five tables. Accounts without permanent
    orders get average_order_amount 0 (the release leaves NaN there). The release fits a
    StandardScaler on each client's 80 % training split; here `standardise: client` z-scores each
    client's 13 numeric columns over all its loans (the split is made later by the partition),
    `none` keeps raw values.
    """

    name = "berka"
    input_shape = (15,)
    num_classes = 2
    params = {
        "standardise": "client",
        "district_mean": "code",
        "max_clients": None,
    }
    files = [
        RemoteFile(
            BERKA_ZIP,
            (
                "http://sorry.vse.cz/~berka/challenge/pkdd1999/" + BERKA_ZIP,
                "https://sorry.vse.cz/~berka/challenge/pkdd1999/" + BERKA_ZIP,
            ),
        )
    ]
    cited_md5 = {BERKA_ZIP: ("88d001738478c5e348a0896878f2433c", "AAggFF release, berka.py")}
    hand_hints = {
        BERKA_ZIP: "http://sorry.vse.cz/~berka/challenge/pkdd1999/data_berka.zip (PKDD'99 "
        "discovery challenge; if the page is gone, any mirror of data_berka.zip with the 8 .asc "
        "tables, e.g. the CTU relational dataset repository's 'financial' export as .asc files)"
    }

    def _params(self, params: dict[str, Any]) -> dict[str, Any]:
        params = self.check_params(params)
        if params["standardise"] not in ("client", "none"):
            raise ValueError(
                f"berka: standardise must be client|none, got {params['standardise']!r}"
            )
        if params["district_mean"] not in ("code", "thesis"):
            raise ValueError(
                f"berka: district_mean must be code|thesis, got {params['district_mean']!r}"
            )
        return params

    def check_file(self, filename: str, path: Path) -> None:
        """The zip must hold the five tables the features use."""
        check_zip_members(path, [f"{t}.asc" for t in TABLES])

    def load(self, raw_dir: str | os.PathLike, **params: Any) -> ArrayDataset:
        """Loans as 15 features, label = default, groups = region (north Bohemia left out)."""
        params = self._params(params)
        path = self._path(raw_dir, BERKA_ZIP)
        try:
            tables = read_tables(path)
        except (zipfile.BadZipFile, OSError, ValueError) as err:
            raise ValueError(f"berka: cannot read {path} ({err})") from None
        merged, cols = berka_features(tables, params["district_mean"])
        merged = merged[merged["A3"] != EXCLUDED_REGION]
        regions = sorted(merged["A3"].unique())
        if params["max_clients"] is not None:
            regions = regions[: params["max_clients"]]
            merged = merged[merged["A3"].isin(regions)]
        groups = merged["A3"].map({r: i for i, r in enumerate(regions)}).to_numpy(np.int64)
        x = merged[cols].fillna({"average_order_amount": 0.0}).to_numpy(np.float64)
        if params["standardise"] == "client":
            x = standardise_per_client(x, groups, len(cols) - 2)
        return natural_dataset(
            self.name,
            x,
            merged["status"].to_numpy(np.int64),
            groups,
            self.num_classes,
            f"berka: {path}; {len(merged)} loans, regions {regions} (clients in this order), "
            f"{EXCLUDED_REGION} excluded; features {cols}; params={params}",
        )

    def standin(
        self, rng: np.random.Generator, *, n_train: int = 2000, n_test: int = 500, **params: Any
    ) -> ArrayDataset:
        """15 standardised features, binary label, 7 regions sized like Table 3.5's."""
        params = self._params(params)
        return natural_standin(
            self.name,
            rng,
            n_train,
            STATS,
            params["max_clients"],
            tabular_draw(15, 2),
            self.num_classes,
            "15 Gaussian features with a class direction and region offsets",
        )

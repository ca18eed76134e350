"""A cell may read one client's own value (stat `client<k>`, DQN-Fed's Table 9 per-class
columns): from the run's per-client values, checked like the pack stats."""

from __future__ import annotations

import pytest

from fedbench.metrics.distribution import client_stat
from fedbench.report.collect import RunDataError, load_run, run_series
from fedbench.report.layout import LayoutError
from fedbench.report.tables import TableSpec, build_table

OFFSETS = (-0.05, 0.0, 0.05)  # conftest.OFFSETS: client k = the client mean + OFFSETS[k]


def test_client_stat_names():
    assert client_stat("client0") == 0 and client_stat("client12") == 12
    assert client_stat("mean") is None and client_stat("client") is None
    assert client_stat("xclient1") is None and client_stat("client1x") is None


def test_run_series_reads_one_clients_value(make):
    run = load_run(make(seed=0))
    # conftest: client k's top1 = the round's client mean + OFFSETS[k] (ids 0, 1, 2)
    mean = run_series(run, "global", "top1", "mean")
    for k in range(3):
        got = run_series(run, "global", "top1", f"client{k}")
        assert list(got.index) == list(mean.index)
        assert got.round(6).tolist() == (mean + OFFSETS[k]).round(6).tolist()
    with pytest.raises(RunDataError, match="client 7"):
        run_series(run, "global", "top1", "client7")


def _spec(cells, columns, **kw):
    return TableSpec(
        paper="demo",
        name="t",
        caption="demo",
        metric="top1",
        protocol="global",
        stat="mean",
        round="final",
        percent=True,
        rows=[{"id": "fedavg", "label": "FedAvg"}],
        columns=columns,
        cells=cells,
        scale="quick",
        **kw,
    )


def test_a_table_column_of_one_client(make):
    dirs = [make(seed=0), make(seed=1)]
    columns = [{"id": "mean", "label": "ā"}, {"id": "c2", "label": "client 2", "stat": "client2"}]
    cells = {("fedavg", "mean"): dirs, ("fedavg", "c2"): dirs}
    df = build_table(_spec(cells, columns))
    means = df.set_index("column")["ours_mean"]
    assert means["c2"] == pytest.approx(means["mean"] + 100 * OFFSETS[2])
    assert df.set_index("column")["stat"]["c2"] == "client2"
    with pytest.raises(LayoutError, match="client<k>"):
        _spec(cells, [{"id": "mean", "label": "ā", "stat": "clientx"}])

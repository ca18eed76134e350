"""collect_runs / collect_clients: row counts, values, and clear errors on bad files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedbench.report.collect import RunDataError, collect_clients, collect_runs, load_run

PER_ROUND = 3 * 10 + 3 + 1  # 3 metrics × 10 pack stats, 3 global-test metrics, 1 train loss


def test_row_counts(runs):
    df = collect_runs([runs["avg0"], runs["prox0_div"], runs["avg0_personal"]])
    counts = df.groupby("algorithm").size().to_dict()
    assert counts["fedavg"] == 4 * PER_ROUND
    assert counts["fedprox"] == 2 * PER_ROUND + 1  # rounds 5, 10 then the diverged marker
    assert counts["ditto"] == 4 * (PER_ROUND + 3 * 10)
    assert set(df["protocol"].dropna()) == {"global", "personal", "global_test", "train"}


def test_values(runs):
    df = collect_runs([runs["avg0"], runs["avg1"]])
    pick = df[(df.seed == 1) & (df["round"] == 20) & (df.protocol == "global")]
    top1 = pick[pick.metric == "top1"].set_index("stat")["value"]
    clients = np.array([0.74 - 0.05, 0.74, 0.74 + 0.05])  # seed 1, round 20 (conftest)
    assert top1["mean"] == pytest.approx(clients.mean())
    assert top1["wmean"] == pytest.approx(np.average(clients, weights=[10, 20, 30]))
    assert top1["min"] == pytest.approx(clients.min())
    gt = df[(df.protocol == "global_test") & (df.seed == 0) & (df["round"] == 10)]
    assert gt[gt.metric == "top1"]["value"].item() == pytest.approx(0.76)
    assert set(gt["stat"]) == {"value"}
    train = df[(df.protocol == "train") & (df.seed == 0) & (df["round"] == 5)]
    assert train["value"].item() == pytest.approx(0.4)
    assert list(df.columns[:13]) == [
        "scale",
        "dataset",
        "partition",
        "model",
        "algorithm",
        "seed",
        "round",
        "status",
        "protocol",
        "metric",
        "stat",
        "value",
        "standin",
    ]


def test_diverged_marker_and_standin(runs):
    df = collect_runs([runs["prox0_div"], runs["avg0_standin"]])
    marker = df[df.status == "diverged"]
    assert len(marker) == 1 and marker["round"].item() == 12 and np.isnan(marker["value"].item())
    assert df[df.dataset == "synthetic"]["standin"].all()
    assert not df[df.dataset == "mnist"]["standin"].any()


def test_collect_clients(runs):
    df = collect_clients([runs["avg0"], runs["avg0_personal"]])
    assert len(df[df.algorithm == "fedavg"]) == 4 * 3 * 3  # rounds × clients × metrics
    assert len(df[df.algorithm == "ditto"]) == 4 * 2 * 3 * 3
    row = df[(df.algorithm == "fedavg") & (df["round"] == 15) & (df.client == 2)]
    assert row[row.metric == "top1"]["value"].item() == pytest.approx(0.75)
    assert row[row.metric == "top1"]["n"].item() == 30


def test_missing_metrics_file_named(runs):
    (runs["avg0"] / "metrics.jsonl").unlink()
    with pytest.raises(RunDataError, match="metrics.jsonl is missing") as err:
        collect_runs([runs["avg0"]])
    assert str(runs["avg0"]) in str(err.value)


def test_missing_run_yaml_named(runs):
    (runs["avg1"] / "run.yaml").unlink()
    with pytest.raises(RunDataError, match=r"seed1/run.yaml: run.yaml is missing"):
        collect_clients([runs["avg1"]])


def test_corrupt_files_named(runs):
    path = runs["avg0"] / "metrics.jsonl"
    path.write_text(path.read_text() + "{not json\n")
    with pytest.raises(RunDataError, match="cannot parse metrics.jsonl") as err:
        load_run(runs["avg0"])
    assert str(path) in str(err.value)
    # the advice is the command that writes it again (its train rule), as written
    assert str(err.value).endswith(f"snakemake --cores all {path} --forcerun {path}")
    assert err.value.advice.endswith(f"--forcerun {path}")  # what a job's log ends with
    (runs["avg1"] / "run.yaml").write_text("run: [unclosed\n")
    with pytest.raises(RunDataError, match="cannot parse run.yaml"):
        load_run(runs["avg1"])


def test_truncated_run_rejected(runs):
    path = runs["avg0"] / "metrics.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(RunDataError, match="incomplete run"):
        load_run(runs["avg0"])


def test_status_mismatch_rejected(runs):
    path = runs["prox0_div"] / "metrics.jsonl"
    lines = path.read_text().splitlines()
    assert json.loads(lines[-1])["status"] == "diverged"
    path.write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(RunDataError, match="says diverged at round 12"):
        load_run(runs["prox0_div"])

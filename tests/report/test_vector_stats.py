"""Stats read from a run's per-client values at read time (DQN-Fed's worst / best p % as the
q-FFL code counts them, Angle and KL(a‖u) of Table 5, spec §B.6): by hand on the fake runs'
three clients, scale-free stats left unscaled in a percent table, Angle and KL lower-is-better."""

from __future__ import annotations

import json
import math

import pytest

from fedbench.metrics.distribution import VECTOR_STATS, vector_stat
from fedbench.report.collect import load_run, run_series
from fedbench.report.layout import LayoutError
from fedbench.report.tables import TableSpec, build_table, maximises

# conftest: seed 0's client-mean top1 at round 20 is 0.68, clients at offsets -0.05, 0, +0.05
FINAL = (0.63, 0.68, 0.73)


def _by_hand() -> dict[str, float]:
    a = FINAL
    total, norm = sum(a), math.sqrt(sum(x * x for x in a))
    p = [x / total for x in a]
    return {
        # K = 3: max(1, int(0.05 * 3)) = max(1, int(0.1 * 3)) = 1 client
        "worst5_qffl": 0.63,
        "best5_qffl": 0.73,
        "worst10_qffl": 0.63,
        "best10_qffl": 0.73,
        "angle": math.degrees(math.acos(total / (math.sqrt(3) * norm))),
        "kl": sum(q * math.log(3 * q) for q in p),
    }


def test_each_stat_by_hand_on_the_final_round(make):
    run = load_run(make(seed=0))
    for stat, want in _by_hand().items():
        assert run_series(run, "global", "top1", stat)[20] == pytest.approx(want, abs=1e-6), stat
    # the angle is atan(σ_a / ā) with the population σ (0.05·√(2/3) here)
    assert _by_hand()["angle"] == pytest.approx(
        math.degrees(math.atan(0.05 * (2 / 3) ** 0.5 / 0.68))
    )


def test_tails_count_clients_as_the_qffl_code():
    a = [float(x) for x in range(31)]  # K = 31: int(3.1) = 3 clients at 10 %, 1 at 5 %
    assert vector_stat("worst10_qffl", a) == pytest.approx(1.0)
    assert vector_stat("best10_qffl", a) == pytest.approx(29.0)
    assert vector_stat("worst5_qffl", a) == 0.0 and vector_stat("best5_qffl", a) == 30.0
    # NaN clients (no value) are left out; none left, or KL of all zeros: NaN, not an error
    assert vector_stat("worst10_qffl", [None, 0.5, float("nan")]) == 0.5
    assert math.isnan(vector_stat("kl", [0.0, 0.0])) and math.isnan(vector_stat("angle", [None]))
    with pytest.raises(ValueError, match="valid"):
        vector_stat("worst20", a)
    assert set(VECTOR_STATS) == set(_by_hand())


def _spec(cells, columns):
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
        decimals=3,
    )


def test_a_percent_table_scales_the_tails_but_not_angle_or_kl(make):
    dirs = [make(seed=0)]
    columns = [{"id": s, "label": s, "stat": s} for s in VECTOR_STATS]
    df = build_table(_spec({("fedavg", s): dirs for s in VECTOR_STATS}, columns))
    got = df.set_index("column")["ours_mean"]
    want = _by_hand()
    for stat in ("worst5_qffl", "best5_qffl", "worst10_qffl", "best10_qffl"):
        assert got[stat] == pytest.approx(100 * want[stat], abs=1e-4)
    for stat in ("angle", "kl"):
        assert got[stat] == pytest.approx(want[stat], abs=1e-6)
    assert not maximises("top1", "angle") and not maximises("top1", "kl")
    assert maximises("top1", "worst10_qffl")
    with pytest.raises(LayoutError, match="worst10_qffl"):
        _spec({}, [{"id": "x", "label": "x", "stat": "worst11_qffl"}])


def test_rho_t_is_read_as_protocol_train(make):
    """DQN-Fed's ρ_t (training.improved_clients): each record's own round's share."""
    run_dir = make(seed=0)
    path = run_dir / "metrics.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    for i, rec in enumerate(lines):
        rec["improved_clients"] = 0.1 * (i + 1)
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    got = run_series(load_run(run_dir), "train", "improved_clients", "value")
    assert got.round(6).tolist() == [0.1, 0.2, 0.3, 0.4]
    assert list(got.index) == [r["round"] for r in lines]

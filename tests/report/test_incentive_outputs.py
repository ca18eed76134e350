"""The incentive-game outputs (fedbench.outputs.incentive, fedbench.outputs.incentive): the numbers
the `incentive` rule writes are those of fedbench.incentive_game and of Theorem 1's formula
(specs/qffl-dqnfed.md A.6, A.7), and the figure and table render from such a file alone."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from fedbench.config import ConfigError
from fedbench.incentive_game import (
    IncentiveGame,
    best_response_iteration,
    equilibrium,
    follower_utilities,
    leader_utility,
    optimal_payment,
    participation_set,
)
from fedbench.outputs.incentive import (
    ILLUSTRATIVE,
    IncentiveSpec,
    compute_game,
    game_settings,
    jain,
    thm1_bound,
    write_game,
    write_incentive_figure,
    write_incentive_table,
)

GAME = {"costs": [1.0, 1.2, 0.8, 2.5], "gaps": [0.1, 0.0, 0.2, 0.05], "lam": 20}


def _settings(show, **extra):
    key = "bound" if show == "bound" else "game"
    block = dict(extra) if show == "bound" else {**GAME, **extra}
    return game_settings(f"test.{show}", show, {key: block})


def _game(beta, s):
    return IncentiveGame(costs=s["costs"], gaps=s["gaps"], beta=beta, lam=s["lam"])


def test_follower_ne_is_the_equilibrium_at_every_tau():
    s = _settings("follower_ne", betas=[0, 2], points=7, tau_max=10)
    data = compute_game(s)
    assert data["tau"] == pytest.approx(np.linspace(0, 10, 7).tolist())
    for panel, beta in zip(data["panels"], [0, 2], strict=True):
        game = _game(beta, s)
        for tau, x, total in zip(data["tau"], panel["x"], panel["total"], strict=True):
            np.testing.assert_allclose(x, equilibrium(game, tau).x, rtol=1e-12)
            assert total == pytest.approx(sum(x))
        p = participation_set(game)
        assert panel["active"] == p.tolist()
        # uncapped: X*(τ) = (|P| - 1) τ / S_P, linear in τ (A.7.2)
        kappa = (p.sum() - 1) / game.effective_costs[p].sum()
        assert panel["slope"] == pytest.approx(kappa)
        np.testing.assert_allclose(panel["total"], kappa * np.asarray(data["tau"]), rtol=1e-12)
        assert panel["tau_star"] == pytest.approx(optimal_payment(game).tau)


def test_leader_utility_and_tau_star_match_the_closed_form():
    s = _settings("leader_utility", betas=[0, 1], points=11)
    data = compute_game(s)
    for panel, beta in zip(data["panels"], [0, 1], strict=True):
        game = _game(beta, s)
        np.testing.assert_allclose(panel["utility"], leader_utility(game, np.asarray(data["tau"])))
        assert panel["utility"][0] == 0.0  # U(0) = 0
        opt = optimal_payment(game)
        # g = log(1 + X): τ* = λ - S_P / (|P| - 1) (A.7.2 [DERIVED])
        p = participation_set(game)
        assert panel["tau_star"] == pytest.approx(
            s["lam"] - game.effective_costs[p].sum() / (p.sum() - 1)
        )
        assert panel["utility_star"] == pytest.approx(opt.utility)
        assert panel["max_second_difference"] <= 1e-9  # concave on the grid


def test_fairness_sweep_shares_rewards_and_jain():
    s = _settings("fairness", beta_range=[0, 4], points=5)
    rows = compute_game(s)["rows"]
    assert [r["beta"] for r in rows] == pytest.approx([0, 1, 2, 3, 4])
    for r in rows:
        game = _game(r["beta"], s)
        opt = optimal_payment(game)
        x = opt.equilibrium.x
        np.testing.assert_allclose(r["share"], x / x.sum(), rtol=1e-12)
        np.testing.assert_allclose(r["reward"], np.exp(game.gamma) * x / x.sum() * opt.tau)
        assert r["jain_share"] == pytest.approx(x.sum() ** 2 / (len(x) * (x**2).sum()))
        assert r["active"] == int((x > 0).sum())
    # β = 0: every γ_n = 0, so the rewards share out exactly τ*
    assert sum(rows[0]["reward"]) == pytest.approx(rows[0]["tau_star"])


def test_jain_index_limits():
    assert jain(np.ones(4)) == pytest.approx(1.0)
    assert jain(np.array([1.0, 0, 0, 0])) == pytest.approx(0.25)
    assert math.isnan(jain(np.zeros(3)))


def test_equilibrium_table_numbers_and_best_response_check():
    s = _settings("equilibrium", betas=[0, 3])
    data = compute_game(s)
    for panel, beta in zip(data["panels"], [0, 3], strict=True):
        game = _game(beta, s)
        opt = optimal_payment(game)
        br = best_response_iteration(game, opt.tau)
        assert panel["tau_star"] == pytest.approx(opt.tau)
        assert panel["max_abs_diff"] < 1e-6  # QF-2
        u = follower_utilities(game, opt.equilibrium.x, opt.tau)
        for n, c in enumerate(panel["clients"]):
            assert c["x"] == pytest.approx(opt.equilibrium.x[n])
            assert c["x_br"] == pytest.approx(br.x[n])
            assert c["gamma"] == pytest.approx(-beta * abs(GAME["gaps"][n]))  # A-Q5
            assert c["utility"] == pytest.approx(u[n])
            assert c["active"] == bool(opt.equilibrium.x[n] > 0)


def test_bound_is_theorem_1_with_corollary_1s_step():
    s = _settings("bound", clients=4, loss_bound=3.0, qs=[0, 1], T_range=[16, 1e4], points=5)
    data = compute_game(s)
    for i, T in enumerate(data["T"]):
        step = math.sqrt(4) / (1.0 * math.sqrt(T))
        K = max(1.0, math.floor(T**0.25 / 4**0.75))
        assert data["step"][i] == pytest.approx(step) and data["K"][i] == K
        for curve in data["curves"]:
            q = curve["q"]
            # by hand: 2 gap / (s T) + 4 s² K² G² L² M^(4q) + L s σ² M^(2q) / N
            hand = 2 / (step * T) + 4 * step**2 * K**2 * 3 ** (4 * q) + step * 3 ** (2 * q) / 4
            assert curve["theorem"][i] == pytest.approx(hand)
            printed = hand - 4 * step**2 * K**2 * (3 ** (4 * q) - 3 ** (2 * q))
            assert curve["corollary"][i] == pytest.approx(printed)
    assert thm1_bound(10, 0.1, 1, 1, 1, 1, 0, 1, 1, 1) == pytest.approx(2 + 0.04 + 0.1)


@pytest.mark.parametrize(
    "show, out, message",
    [
        ("follower_ne", {"game": {"costs": [1, 2]}}, "missing key 'gaps'"),
        ("follower_ne", {"game": {**GAME, "costs": [1, -1, 1, 1]}}, r"costs\[1\]: must be > 0"),
        ("follower_ne", {"game": {**GAME, "g": "cubic"}}, "g must be one of"),
        ("bound", {"game": GAME}, "takes a `bound` block"),
        ("bound", {"bound": {"qs": [-1]}}, r"qs\[0\]: must be >= 0"),
        ("leader_utility", {"game": {**GAME, "points": 2}}, "points: expected an integer"),
    ],
)
def test_bad_settings_name_the_key(show, out, message):
    with pytest.raises(ConfigError, match=message):
        game_settings("g.figure1", show, out)


def test_write_game_then_render_from_the_file(tmp_path):
    for show, name in (("equilibrium", "table2"), ("fairness", "figure4")):
        s = _settings(show, betas=[0, 1]) if show == "equilibrium" else _settings(show, points=4)
        path = tmp_path / "incentive" / f"{name}.json"
        write_game(s, path)
        assert json.loads(path.read_text())["settings"] == s
        assert not list(path.parent.glob("*.tmp"))  # written via a temp file, then renamed
        spec = IncentiveSpec("qffl", name, "A caption", "smoke", show, path)
        if show == "equilibrium":
            paths = write_incentive_table(spec, tmp_path / "out" / name)
            assert [p.suffix for p in paths] == [".md", ".tex", ".csv", ".html", ".json"]
            md = paths[0].read_text()
            assert ILLUSTRATIVE in md and "τ* = " in md
            at_beta_1 = re.findall(r"^\| 1 \| \d+ \|", md, re.M)
            assert len(at_beta_1) == len(GAME["costs"])  # one row per client at β = 1
            csv = paths[2].read_text().splitlines()
            assert sum(not line.startswith("#") for line in csv) == 1 + 2 * len(GAME["costs"])
        else:
            paths = write_incentive_figure(spec, tmp_path / "out" / name)
            assert [p.suffix for p in paths] == [".png", ".pdf"]
            assert all(p.stat().st_size > 1000 for p in paths)


def test_a_damaged_file_says_to_rerun(tmp_path):
    path = tmp_path / "figure1.json"
    path.write_text("{not json")
    spec = IncentiveSpec("qffl", "figure1", "", "smoke", "follower_ne", path)
    with pytest.raises(ValueError, match="rerun the rule `incentive`"):
        write_incentive_figure(spec, tmp_path / "figure1")

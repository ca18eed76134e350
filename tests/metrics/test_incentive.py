"""003's Stackelberg incentive game (specs/qffl-dqnfed.md §A.7, A.9 QF-1..QF-3, B.12 item 5).

003 reports no numbers, so every expected value here is derived in the test: best-response dynamics,
a direct check that no follower gains by deviating, grid searches, and the first-order conditions of
U(τ) = λ g(κ τ) - τ worked out by hand for each g.
"""

import math

import numpy as np
import pytest

from fedbench.incentive_game import (
    IncentiveGame,
    best_response,
    best_response_iteration,
    closed_form_equilibrium,
    equilibrium,
    fairfed_weights,
    follower_utilities,
    leader_utility,
    optimal_payment,
    participation_set,
)

INTERIOR = dict(costs=[1.0, 1.1, 0.9, 1.05, 0.95, 1.0], gaps=[0.0, 0.1, 0.2, 0.05, 0.3, 0.15])
EXCLUSION = dict(costs=[1.0, 1.0, 1.0, 5.0, 10.0], gaps=[0.0] * 5)
CAPPED = dict(
    costs=[1.0, 1.2, 1.5, 3.0, 4.0], gaps=[0.1, 0.2, 0.0, 0.3, 0.05], caps=[1, 2, 5, 5, 5]
)


def _no_profitable_deviation(game, x, tau, points=401):
    """No follower gains by moving its own amount anywhere on a grid of [0, d_n] (or [0, 3X])."""
    u = follower_utilities(game, x, tau)
    for n in range(game.n_players):
        top = min(game.upper[n], 3 * x.sum())
        for v in np.linspace(0.0, top, points):
            y = x.copy()
            y[n] = v
            assert follower_utilities(game, y, tau)[n] <= u[n] + 1e-9 * max(1.0, tau)


@pytest.mark.parametrize("sign", [-1, 1])
@pytest.mark.parametrize("beta", [0.0, 0.5, 1.0])
def test_interior_closed_form_is_the_best_response_fixed_point(beta, sign):
    game = IncentiveGame(**INTERIOR, beta=beta, fairness_sign=sign)
    tau = 7.0
    cf = closed_form_equilibrium(game, tau)
    assert cf.active.all() and cf.method == "closed_form"
    br = best_response_iteration(game, tau, start="ones")  # Gauss-Seidel from x = 1 (QF-2)
    assert br.ok and br.sweeps > 0
    np.testing.assert_allclose(br.x, cf.x, rtol=0, atol=1e-6)
    np.testing.assert_allclose(best_response(game, cf.x, tau), cf.x, rtol=0, atol=1e-12)
    # 003's formula with all M players: x_m = a (1 - (M-1) c_m / S), a = (M-1) τ / S
    c = np.asarray(INTERIOR["costs"]) * np.exp(-sign * beta * np.abs(INTERIOR["gaps"]))
    m, s = len(c), c.sum()
    np.testing.assert_allclose(cf.x, (m - 1) * tau / s * (1 - (m - 1) * c / s), rtol=1e-12)
    _no_profitable_deviation(game, cf.x, tau)


def test_exclusion_closed_form_is_the_best_response_fixed_point():
    game = IncentiveGame(**EXCLUSION, beta=0.0)
    tau = 10.0
    cf = closed_form_equilibrium(game, tau)
    assert cf.inactive.tolist() == [3, 4]
    assert participation_set(game).tolist() == [True, True, True, False, False]
    # on P = the three cheap players: X = 2τ/3 and x = X (1 - 2/3) each
    np.testing.assert_allclose(cf.x, [20 / 9, 20 / 9, 20 / 9, 0, 0], rtol=1e-12)
    br = best_response_iteration(game, tau, start="ones")
    assert br.ok and br.sweeps > 0
    np.testing.assert_allclose(br.x, cf.x, rtol=0, atol=1e-6)
    # the excluded players are below the participation threshold τ e^γ <= X_{-n} C_n
    others = cf.total - cf.x
    assert (tau <= others[3:] * np.asarray(EXCLUSION["costs"][3:])).all()
    # 003's all-M formula would hand them negative amounts
    c = np.asarray(EXCLUSION["costs"])
    assert ((4 * tau / c.sum()) * (1 - 4 * c / c.sum()))[3:].max() < 0
    _no_profitable_deviation(game, cf.x, tau)


def test_best_response_formula_and_its_clipping():
    game = IncentiveGame([1.0, 1.0], [0.0, 0.0], caps=[0.5, 10.0])
    # τ = 4, c = 1, X_{-n} = 1: sqrt(4) - 1 = 1, clipped to the cap 0.5 for player 0
    np.testing.assert_allclose(best_response(game, [1.0, 1.0], 4.0), [0.5, 1.0])
    # X_{-n} = 5 >= τ/c_n = 4: below the threshold, no participation
    np.testing.assert_allclose(best_response(game, [5.0, 5.0], 4.0), [0.0, 0.0])


@pytest.mark.parametrize("params", [INTERIOR, EXCLUSION])
def test_equilibrium_total_is_linear_in_tau(params):
    game = IncentiveGame(**params, beta=1.0)
    p = participation_set(game)
    kappa = (p.sum() - 1) / game.effective_costs[p].sum()
    base = equilibrium(game, 1.0).x
    for tau in [0.0, 0.3, 2.0, 17.0, 250.0]:
        eq = equilibrium(game, tau)
        assert eq.method == "closed_form"
        assert eq.total == pytest.approx(kappa * tau, rel=1e-12, abs=1e-15)
        np.testing.assert_allclose(eq.x, tau * base, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("lam", [0.5, 3.0, 50.0])
@pytest.mark.parametrize("params", [INTERIOR, EXCLUSION])
def test_log_payment_closed_form_matches_a_grid_search(params, lam):
    game = IncentiveGame(**params, beta=1.0, g="log1p", lam=lam)
    opt = optimal_payment(game)
    assert opt.method == "closed_form"
    grid = np.linspace(0.0, 1.5 * lam, 150_001)
    u = leader_utility(game, grid)
    step = grid[1] - grid[0]
    assert abs(opt.tau - grid[np.argmax(u)]) <= step
    assert opt.utility >= u.max() - 1e-12
    assert opt.utility == pytest.approx(leader_utility(game, opt.tau))
    if params is INTERIOR:  # all M players active: τ* = max(0, λ - S/(M-1))
        s = game.effective_costs.sum()
        assert opt.tau == pytest.approx(max(0.0, lam - s / (game.n_players - 1)), abs=1e-12)


@pytest.mark.parametrize("g", ["log1p", "sqrt", "one_minus_exp"])
def test_leader_utility_is_concave_and_zero_at_zero_without_caps(g):
    game = IncentiveGame(**EXCLUSION, beta=1.0, g=g, lam=20.0)
    assert leader_utility(game, 0.0) == 0.0
    grid = np.linspace(0.0, 60.0, 6001)
    u = leader_utility(game, grid)
    assert u[0] == 0.0
    assert np.diff(u, 2).max() <= 1e-9
    # the array path equals solving the equilibrium at each τ
    for i in [1, 700, 6000]:
        assert u[i] == pytest.approx(leader_utility(game, float(grid[i])), rel=1e-12)


@pytest.mark.parametrize("lam", [0.5, 4.0, 50.0])
def test_searched_payment_matches_the_first_order_condition(lam):
    # U = λ g(κ τ) - τ; sqrt: λ sqrt(κ) / (2 sqrt τ) = 1 -> τ* = λ² κ / 4;
    # 1 - e^{-X}: λ κ e^{-κ τ} = 1 -> τ* = max(0, log(λ κ) / κ)
    base = IncentiveGame(**INTERIOR, beta=1.0)
    kappa = (base.n_players - 1) / base.effective_costs.sum()
    sqrt = optimal_payment(IncentiveGame(**INTERIOR, beta=1.0, g="sqrt", lam=lam))
    assert sqrt.method == "search"
    assert sqrt.tau == pytest.approx(lam**2 * kappa / 4, rel=1e-6)
    sat = optimal_payment(IncentiveGame(**INTERIOR, beta=1.0, g="one_minus_exp", lam=lam))
    assert sat.tau == pytest.approx(max(0.0, math.log(lam * kappa) / kappa), abs=1e-6)


def test_binding_caps_are_respected_by_the_constrained_iteration():
    game = IncentiveGame(**CAPPED, beta=1.0)
    tau = 20.0
    free = closed_form_equilibrium(game, tau)
    assert (free.x > game.upper).any()  # the uncapped closed form breaks a cap
    eq = equilibrium(game, tau)
    assert eq.method == "aggregate" and eq.ok
    assert (eq.x <= game.upper).all() and eq.capped.any()
    # the same fixed point by best responses from x = 1 and from the clipped closed form, and
    # each amount is its own best response
    for start in ("ones", "closed_form"):
        br = best_response_iteration(game, tau, start=start)
        assert br.ok and br.sweeps > 0
        np.testing.assert_allclose(br.x, eq.x, rtol=0, atol=1e-9)
    np.testing.assert_allclose(best_response(game, eq.x, tau), eq.x, rtol=0, atol=1e-12)
    # KKT of u_n: marginal τ e^γ X_{-n} / X² - C_n is <= 0 at 0, = 0 inside, >= 0 at the cap
    X = eq.total
    marginal = tau * np.exp(game.gamma) * (X - eq.x) / X**2 - np.asarray(game.costs)
    inside = eq.active & ~eq.capped
    assert np.abs(marginal[inside]).max() <= 1e-9
    assert (marginal[eq.capped] >= -1e-9).all() and (marginal[~eq.active] <= 1e-9).all()
    _no_profitable_deviation(game, eq.x, tau)
    # caps only lower the total: X* <= κ τ
    assert eq.total <= free.total


@pytest.mark.parametrize("g", ["log1p", "sqrt", "one_minus_exp"])
def test_payment_with_binding_caps_matches_a_grid_search(g):
    game = IncentiveGame(**CAPPED, beta=1.0, g=g, lam=50.0)
    opt = optimal_payment(game)
    assert opt.method == "search" and opt.equilibrium.capped.any()
    grid = np.linspace(0.0, 100.0, 1001)
    u = leader_utility(game, grid)
    assert abs(opt.tau - grid[np.argmax(u)]) <= grid[1] - grid[0]
    assert opt.utility >= u.max() - 1e-9


def test_caps_can_bend_the_leader_utility_upwards():
    # once the three active clients sit at their caps, X* is flat until client 3 enters;
    # this is why `optimal_payment` scans instead of trusting concavity when caps bind
    game = IncentiveGame(**CAPPED, beta=1.0)
    grid = np.linspace(30.0, 36.0, 61)
    x = np.array([equilibrium(game, t).total for t in grid])
    assert np.diff(x, 2).max() > 1e-4


def test_sign_switch_flips_which_clients_are_favoured():
    costs, gaps = [1.0, 1.0, 1.0], [0.0, 0.1, 0.4]
    minus = equilibrium(IncentiveGame(costs, gaps, beta=2.0, fairness_sign=-1), 10.0)
    plus = equilibrium(IncentiveGame(costs, gaps, beta=2.0, fairness_sign=1), 10.0)
    # -1 (default): a larger fairness gap raises the effective cost, so that client gives less
    assert minus.x[0] > minus.x[1] > minus.x[2]
    assert plus.x[0] < plus.x[1] < plus.x[2]
    ff_minus, ff_plus = (fairfed_weights([1, 1, 1], gaps, 2.0, fairness_sign=s) for s in (-1, 1))
    assert np.argmax(ff_minus) == 0 and np.argmax(ff_plus) == 2
    # β = 0: no fairness term, the sign does not matter
    a = equilibrium(IncentiveGame(costs, gaps, beta=0.0, fairness_sign=-1), 10.0).x
    b = equilibrium(IncentiveGame(costs, gaps, beta=0.0, fairness_sign=1), 10.0).x
    np.testing.assert_array_equal(a, b)


def test_fairfed_weights_by_hand():
    n, gaps = [10, 30, 60], [0.0, -0.1, 0.3]  # F_k - F_global; |.| is taken
    w = fairfed_weights(n, gaps, beta=2.0)
    expected = [0.1, math.exp(-0.2) * 0.3, math.exp(-0.6) * 0.6]
    np.testing.assert_allclose(w, expected, rtol=1e-15)
    np.testing.assert_allclose(
        fairfed_weights(n, gaps, 2.0, normalise=True), np.array(expected) / sum(expected)
    )
    np.testing.assert_allclose(fairfed_weights(n, gaps, 0.0), [0.1, 0.3, 0.6])  # FedAvg


def test_zero_payment_gives_no_data_and_zero_utility():
    game = IncentiveGame(**CAPPED, beta=1.0)
    eq = equilibrium(game, 0.0)
    assert eq.total == 0.0 and not eq.active.any()
    assert leader_utility(game, 0.0) == 0.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(costs=[1.0], gaps=[0.0]), "costs: the game needs M >= 2"),
        (dict(costs=[1.0, 0.0], gaps=[0.0, 0.0]), "costs must all be > 0"),
        (dict(costs=[1.0, math.nan], gaps=[0.0, 0.0]), "costs must be finite"),
        (dict(costs=[[1.0, 2.0]], gaps=[0.0, 0.0]), "costs must be a non-empty 1-D"),
        (dict(costs=[1.0, 2.0], gaps=[0.0]), "gaps must have one entry per player"),
        (dict(costs=[1.0, 2.0], gaps=[0.0, 0.0], beta=-1.0), "beta must be a finite number >= 0"),
        (dict(costs=[1.0, 2.0], gaps=[0.0, 0.0], fairness_sign=0), r"fairness_sign .*\(-1, 1\)"),
        (dict(costs=[1.0, 2.0], gaps=[0.0, 0.0], fairness_sign=True), "fairness_sign"),
        (dict(costs=[1.0, 2.0], gaps=[0.0, 0.0], caps=[1.0, 0.0]), "caps must all be > 0"),
        (dict(costs=[1.0, 2.0], gaps=[0.0, 0.0], caps=[1.0]), "caps must have one entry"),
        (dict(costs=[1.0, 2.0], gaps=[0.0, 0.0], g="log"), r"g must be one of \('log1p'"),
        (dict(costs=[1.0, 2.0], gaps=[0.0, 0.0], lam=0.0), "lam must be a finite number > 0"),
    ],
)
def test_bad_game_parameters_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        IncentiveGame(**kwargs)


def test_bad_call_arguments_are_named():
    game = IncentiveGame(**INTERIOR)
    with pytest.raises(ValueError, match="tau must be a finite number >= 0"):
        equilibrium(game, -1.0)
    with pytest.raises(ValueError, match="tau must be a number"):
        leader_utility(game, "a lot")
    with pytest.raises(ValueError, match="x must have one entry per player"):
        best_response(game, [1.0, 1.0], 1.0)
    with pytest.raises(ValueError, match="x0 must all be >= 0"):
        best_response_iteration(game, 1.0, x0=[-1.0] * 6)
    with pytest.raises(ValueError, match="max_sweeps must be an int >= 1"):
        best_response_iteration(game, 1.0, max_sweeps=0)
    with pytest.raises(ValueError, match="n_samples must not all be 0"):
        fairfed_weights([0, 0], [0.0, 0.0], 1.0)
    with pytest.raises(ValueError, match="gaps must have one entry per client"):
        fairfed_weights([1, 2], [0.0], 1.0)
    with pytest.raises(ValueError, match="fairness_sign"):
        fairfed_weights([1, 2], [0.0, 0.0], 1.0, fairness_sign=2)

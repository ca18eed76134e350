"""DQN-Fed's maths (specs/qffl-dqnfed.md §B.3, B.12 tests 1-2): the server's Gram-Schmidt route
equals the closed form Gᵀ(GGᵀ)⁻¹d̃ and is order-invariant; the inverse-BFGS decrement by the
two-loop recursion equals its one-pair closed form and satisfies the secant condition."""

import itertools
import math

import pytest
import torch

from fedbench.algorithms.dqnfed_math import (
    decrement,
    direct_bfgs_product,
    gram_schmidt_step,
    initial_scale,
    min_norm_step,
    two_loop,
)


def _problem(m=6, dim=50, correlated=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    G = torch.randn(m, dim, generator=g, dtype=torch.float64)
    if correlated:  # a shared component, as clients of one model have
        G = G + 3.0 * torch.randn(1, dim, generator=g, dtype=torch.float64)
    d = torch.rand(m, generator=g, dtype=torch.float64) + 0.1
    return G, d


@pytest.mark.parametrize("correlated", [False, True])
def test_the_gram_schmidt_route_is_the_closed_form_and_every_client_order_gives_it(correlated):
    G, d = _problem(correlated=correlated)
    literal = gram_schmidt_step(G, d)
    closed = G.T @ torch.linalg.solve(G @ G.T, d)
    torch.testing.assert_close(literal.u, closed, rtol=0, atol=1e-8)
    fast = min_norm_step(G, d)
    torch.testing.assert_close(fast.u, closed, rtol=0, atol=1e-8)
    torch.testing.assert_close(G @ fast.u, d, rtol=0, atol=1e-8)  # Thm 4.1: G u = d̃
    assert (literal.lambdas > 0).all()
    torch.testing.assert_close(fast.lambdas, literal.lambdas, rtol=1e-8, atol=0)
    # η = Σ 1/‖g̃_k‖² and ‖𝖉‖² = 1/η, i.e. η = ‖u‖².
    assert literal.eta == pytest.approx(float(literal.u @ literal.u), rel=1e-10)
    assert fast.eta == pytest.approx(literal.eta, rel=1e-10)
    for perm in itertools.islice(itertools.permutations(range(len(G))), 0, 720, 97):
        p = list(perm)
        torch.testing.assert_close(gram_schmidt_step(G[p], d[p]).u, closed, rtol=0, atol=1e-8)


def test_one_client_steps_by_its_decrement_along_its_gradient():
    G, d = _problem(m=1)
    step = min_norm_step(G, d)
    torch.testing.assert_close(step.u, d[0] * G[0] / (G[0] @ G[0]))
    assert step.lambdas.tolist() == [1.0]


def test_identical_gradients_take_the_ridge_fallback():
    G, d = _problem(m=3)
    G[2] = G[1]
    step = min_norm_step(G, d)
    assert step.ridge > 0 and torch.isfinite(step.u).all()
    assert step.gram_condition > 1e12


def test_zero_gradients_take_no_step():
    step = min_norm_step(torch.zeros(3, 5), torch.zeros(3))
    assert step.eta == 0.0 and torch.equal(step.u, torch.zeros(5, dtype=torch.float64))


def test_the_two_loop_decrement_equals_the_one_pair_closed_form_and_the_secant_condition():
    gen = torch.Generator().manual_seed(1)
    dim = 20
    s, y = (torch.randn(dim, generator=gen, dtype=torch.float64) for _ in range(2))
    y = y + 2 * s  # sᵀy > 0
    g = torch.randn(dim, generator=gen, dtype=torch.float64)
    h0 = initial_scale([(s, y)])
    assert h0 == pytest.approx(float(s @ y) / float(y @ y))
    rho = 1.0 / float(y @ s)
    closed = h0 * float((g - rho * float(s @ g) * y).norm() ** 2) + rho * float(s @ g) ** 2
    assert decrement(g, [(s, y)]) == pytest.approx(closed, rel=1e-12)
    torch.testing.assert_close(two_loop(y, [(s, y)], h0), s)  # H₁ y = s


def test_on_a_quadratic_the_decrement_of_a_secant_direction_is_exact():
    gen = torch.Generator().manual_seed(2)
    dim = 12
    M = torch.randn(dim, dim, generator=gen, dtype=torch.float64)
    A = M @ M.T + dim * torch.eye(dim, dtype=torch.float64)  # SPD Hessian
    pairs = []
    for _ in range(4):
        s = torch.randn(dim, generator=gen, dtype=torch.float64)
        pairs.append((s, A @ s))
    y = pairs[-1][1]
    want = float(y @ torch.linalg.solve(A, y))  # yᵀA⁻¹y = sᵀA s
    assert decrement(y, pairs) == pytest.approx(want, rel=1e-10)
    g = torch.randn(dim, generator=gen, dtype=torch.float64)  # a general g: only approximate
    exact = float(g @ torch.linalg.solve(A, g))
    assert decrement(g, pairs) != pytest.approx(exact, rel=1e-6)


def test_the_literal_direct_form_is_the_dense_bfgs_hessian_update():
    gen = torch.Generator().manual_seed(3)
    dim = 8
    pairs = []
    for _ in range(3):
        s = torch.randn(dim, generator=gen, dtype=torch.float64)
        pairs.append((s, s * 2.0 + 0.1 * torch.randn(dim, generator=gen, dtype=torch.float64)))
    B = torch.eye(dim, dtype=torch.float64) * 0.7
    for s, y in pairs:  # eq. (19), dense
        Bs = B @ s
        B = B - torch.outer(Bs, Bs) / (s @ Bs) + torch.outer(y, y) / (s @ y)
    g = torch.randn(dim, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(direct_bfgs_product(g, pairs, 0.7), B @ g)
    h0 = initial_scale(pairs)
    want = float(g @ direct_bfgs_product(g, pairs, 1.0 / h0))
    assert decrement(g, pairs, "direct_literal") == pytest.approx(want)


def test_without_a_pair_the_decrement_is_the_squared_norm_and_bad_forms_are_named():
    g = torch.tensor([3.0, 4.0])
    assert decrement(g, []) == pytest.approx(25.0)
    with pytest.raises(ValueError, match="bfgs_form"):
        decrement(g, [], "dense")


def test_a_non_finite_gradient_gives_a_nan_step_not_an_error():
    grads = torch.tensor([[1.0, 2.0], [float("inf"), 0.0]])
    step = min_norm_step(grads, torch.tensor([1.0, 1.0], dtype=torch.float64))
    assert torch.isnan(step.u).all() and math.isnan(step.eta)
    step = min_norm_step(grads[:1], torch.tensor([float("nan")], dtype=torch.float64))
    assert torch.isnan(step.u).all()

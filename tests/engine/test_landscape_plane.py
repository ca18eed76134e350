"""Loss landscapes (SuPerFed Fig. 2.4): filter-normalised directions, the loss grid, the subset."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fedbench.engine.functional import make_apply, params_of
from fedbench.engine.landscape import (
    eval_subset,
    filter_normalised,
    loss_grid,
    mean_loss,
    random_directions,
)
from fedbench.landscape_file import LandscapeSettings


def _params() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return {
        "conv.weight": torch.randn(4, 3, 2, 2, generator=gen),
        "fc.weight": torch.randn(5, 7, generator=gen) * 3.0,
        "fc.bias": torch.randn(5, generator=gen),
    }


def test_directions_are_filter_normalised_and_biases_zero():
    params = _params()
    d = filter_normalised(params, torch.Generator().manual_seed(1))
    for name in ("conv.weight", "fc.weight"):
        w = params[name]
        for i in range(w.shape[0]):  # each output filter / row: ‖d_i‖ = ‖w_i‖
            assert float(d[name][i].norm()) == pytest.approx(float(w[i].norm()), rel=1e-5)
        assert d[name].shape == w.shape
        assert not torch.allclose(d[name] / d[name].norm(), w / w.norm())  # random, not w
    assert torch.equal(d["fc.bias"], torch.zeros(5))


def test_directions_seed_stable_and_independent():
    params = _params()
    a1, a2 = random_directions(params, seed=3)
    b1, b2 = random_directions(params, seed=3)
    c1, _ = random_directions(params, seed=4)
    for k in params:
        assert torch.equal(a1[k], b1[k]) and torch.equal(a2[k], b2[k])
    assert not torch.equal(a1["fc.weight"], a2["fc.weight"])
    assert not torch.equal(a1["fc.weight"], c1["fc.weight"])


def test_grid_centre_is_the_unperturbed_loss():
    torch.manual_seed(0)  # only the toy model's init; the code under test takes no global seed
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    gen = torch.Generator().manual_seed(2)
    x, y = torch.randn(11, 6, generator=gen), torch.randint(0, 3, (11,), generator=gen)
    params = params_of(model)
    coords = LandscapeSettings(span=0.5, points=3).coords()
    grid = loss_grid(
        make_apply(model), params, random_directions(params, 0), x, y, coords, coords, 4
    )
    with torch.no_grad():
        direct = float(F.cross_entropy(model(x), y))
    assert grid.shape == (3, 3)
    assert grid[1, 1] == pytest.approx(direct, rel=1e-6)
    assert mean_loss(make_apply(model), params, x, y, 4) == pytest.approx(direct, rel=1e-6)
    assert not np.isclose(grid[0, 0], grid[1, 1])


def test_one_parameter_quadratic_matches_analytic_grid():
    w0, d1, d2 = 0.3, 2.0, -0.5
    x = torch.tensor([1.0, 2.0, -1.0], dtype=torch.float64)
    y = torch.tensor([0.5, 1.0, -2.0], dtype=torch.float64)
    alphas, betas = np.array([-1.0, 0.0, 0.5, 1.0]), np.array([-0.2, 0.0, 0.7])
    grid = loss_grid(
        lambda p, xb: p["w"] * xb,
        {"w": torch.tensor(w0, dtype=torch.float64)},
        [
            {"w": torch.tensor(d1, dtype=torch.float64)},
            {"w": torch.tensor(d2, dtype=torch.float64)},
        ],
        x,
        y,
        alphas,
        betas,
        batch_size=2,  # an uneven last batch must not change the mean
        loss_fn=lambda out, xb, yb: (out - yb) ** 2,
    )
    xs, ys = x.numpy(), y.numpy()
    for j, b in enumerate(betas):
        for i, a in enumerate(alphas):
            w = w0 + a * d1 + b * d2
            assert grid[j, i] == pytest.approx(np.mean((w * xs - ys) ** 2), rel=1e-12)


def test_eval_subset_seeded_sorted_and_optional():
    a = eval_subset(100, 10, seed=0)
    assert len(a) == len(set(a)) == 10 and list(a) == sorted(a) and a.max() < 100
    np.testing.assert_array_equal(a, eval_subset(100, 10, seed=0))
    assert not np.array_equal(a, eval_subset(100, 10, seed=1))
    assert eval_subset(100, None, seed=0) is None and eval_subset(100, 100, seed=0) is None

"""The loss-landscape settings (per scale, checked) and file (.npz) the engine writes."""

from __future__ import annotations

import numpy as np
import pytest

from fedbench.landscape_file import (
    LandscapeError,
    LandscapeSettings,
    load_landscape,
    save_landscape,
)


def test_settings_per_scale_and_checks():
    raw = {"span": 2.0, "points": 41, "scales": {"smoke": {"points": 5}}}
    s = LandscapeSettings.for_scale(raw, "smoke")
    assert (s.span, s.points) == (2.0, 5)
    assert LandscapeSettings.for_scale(raw, "paper").points == 41
    np.testing.assert_array_equal(s.coords(), [-2.0, -1.0, 0.0, 1.0, 2.0])
    assert LandscapeSettings(points=41).coords()[20] == 0.0
    with pytest.raises(LandscapeError, match="odd"):
        LandscapeSettings(points=4)
    with pytest.raises(LandscapeError, match=r"unknown key\(s\) \['pts'\]"):
        LandscapeSettings.for_scale({"pts": 3}, "smoke")
    with pytest.raises(LandscapeError, match="span"):
        LandscapeSettings(span=0.0)


def test_file_round_trips_and_names_a_foreign_file(tmp_path):
    coords = LandscapeSettings(points=3).coords()
    loss = np.arange(9.0).reshape(3, 3)
    save_landscape(
        tmp_path / "l.npz", {"alphas": coords, "betas": coords, "loss": loss}, {"seed": 4}
    )
    got = load_landscape(tmp_path / "l.npz")
    np.testing.assert_array_equal(got["loss"], loss)
    assert got["seed"] == 4
    np.savez(tmp_path / "other.npz", x=np.zeros(2))
    with pytest.raises(LandscapeError, match="not a landscape file"):
        load_landscape(tmp_path / "other.npz")

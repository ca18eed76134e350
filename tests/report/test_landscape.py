"""Loss-landscape figures (SuPerFed Fig. 2.4): surface over contours, drawn from .npz files."""

from __future__ import annotations

import numpy as np

from fedbench.landscape_file import LandscapeSettings, load_landscape, save_landscape
from fedbench.outputs.landscape import (
    LandscapeFigureSpec,
    make_landscape_figure,
    write_landscape_figure,
)


def _bowls(tmp_path, standin: bool):
    coords = LandscapeSettings(points=5).coords()
    a, b = np.meshgrid(coords, coords)
    panels = []
    for i, (label, width) in enumerate((("FedAvg", 1.0), ("SuPerFed-MM", 2.0), ("LM", 3.0))):
        loss = 0.5 + (a**2 + b**2) / width
        if i == 2:
            loss[0, 0] = np.nan  # a non-finite corner is masked, not fatal
        path = tmp_path / f"l{i}.npz"
        meta = {"seed": 0, "status": "ok", "standin": standin, "n_test": 200}
        save_landscape(path, {"alphas": coords, "betas": coords, "loss": loss}, meta)
        panels.append((label, path))
    return LandscapeFigureSpec("superfed", "figure2_4", "toy", "smoke", panels, LandscapeSettings())


def test_figure_writes_png_and_pdf(tmp_path):
    spec = _bowls(tmp_path, standin=True)
    assert load_landscape(spec.panels[0][1])["standin"] is True
    paths = write_landscape_figure(spec, tmp_path / "out" / "figure2_4")
    assert [p.name for p in paths] == ["figure2_4.png", "figure2_4.pdf"]
    assert paths[0].read_bytes()[:4] == b"\x89PNG" and paths[1].read_bytes()[:4] == b"%PDF"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "figure2_4.pdf",
        "figure2_4.png",
    ]


def test_figure_labels_scale_and_standin(tmp_path):
    text = make_landscape_figure(_bowls(tmp_path, standin=True))._suptitle.get_text()
    assert "scale smoke" in text and "STAND-IN" in text and "5×5" in text
    text = make_landscape_figure(_bowls(tmp_path, standin=False))._suptitle.get_text()
    assert "STAND-IN" not in text


def test_figure_names_the_objective(tmp_path):
    spec = _bowls(tmp_path, standin=False)
    assert "loss = mean cross-entropy" in make_landscape_figure(spec)._suptitle.get_text()
    for _, path in spec.panels:
        d = load_landscape(path)
        meta = {k: d[k] for k in ("seed", "status", "standin", "n_test")}
        arrays = {k: d[k] for k in ("alphas", "betas", "loss")}
        save_landscape(path, arrays, {**meta, "objective": "bce_logit"})
    assert "loss = mean BCE on one logit" in make_landscape_figure(spec)._suptitle.get_text()

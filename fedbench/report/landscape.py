"""Loss landscapes of a final global model (SuPerFed Figure 2.4, "following [62]").

The thesis names no method; this follows superfed.md §12.17 and Li et al. (NeurIPS 2018,
"Visualizing the Loss Landscape of Neural Nets"): a 2-D plane θ + α·d₁ + β·d₂ through the final
global model θ along two random directions, each filter-normalised (every output filter, i.e.
every row along dim 0, of a weight rescaled to that filter's norm in θ), with 1-D parameters
(biases, norm scales) given zero direction, as Li et al.'s default `ignore='biasbn'` does. The
loss is the mean per-sample cross-entropy on the official test set at each grid point.
"""

from __future__ import annotations

import logging
import math
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from matplotlib import colors as mcolors
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from fedbench.io import atomic_path
from fedbench.report.figures import save_figure
from fedbench.report.layout import warning_lines
from fedbench.rng import Streams
from fedbench.tree import Apply, Params

log = logging.getLogger("fedbench.landscape")
# Directions come from the run's `eval` stream under this key (then the direction's index), so
# every run of one seed draws the same raw Gaussians and differs only by its own filter norms.
DIRECTION_KEY = 24
PerSampleLoss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
NPZ_ARRAYS = ("alphas", "betas", "loss")


class LandscapeError(ValueError):
    """Bad landscape settings or a landscape file that does not fit its figure."""


@dataclass(frozen=True)
class LandscapeSettings:
    """How one landscape is computed (span, points, batch_size) and drawn (clip, levels)."""

    span: float = 1.0  # the grid covers [-span, span]² in units of the directions
    points: int = 41  # per axis; odd, so the unperturbed model is the centre point
    batch_size: int | None = None  # None: the run's eval_batch_size (BN-free models ignore it)
    test_samples: int | None = None  # None: the whole test set; else a seeded random subset
    clip: float | None = None  # draw losses above this at this value (None: no clipping)
    levels: int = 20  # contour levels, shared by every panel

    def __post_init__(self) -> None:
        """Reject a non-positive span, an even or tiny grid, a bad batch size, clip or levels."""
        if not (isinstance(self.span, (int, float)) and math.isfinite(self.span) and self.span > 0):
            raise LandscapeError(f"landscape.span must be a positive number, got {self.span!r}")
        if not isinstance(self.points, int) or self.points < 3 or self.points % 2 == 0:
            raise LandscapeError(
                f"landscape.points must be an odd integer >= 3 (the centre is the unperturbed "
                f"model), got {self.points!r}"
            )
        if self.batch_size is not None and (
            not isinstance(self.batch_size, int) or self.batch_size < 1
        ):
            raise LandscapeError(
                f"landscape.batch_size must be a positive integer, got {self.batch_size!r}"
            )
        if self.test_samples is not None and (
            not isinstance(self.test_samples, int) or self.test_samples < 1
        ):
            raise LandscapeError(
                f"landscape.test_samples must be a positive integer, got {self.test_samples!r}"
            )
        if self.clip is not None and not (isinstance(self.clip, (int, float)) and self.clip > 0):
            raise LandscapeError(f"landscape.clip must be a positive number, got {self.clip!r}")
        if not isinstance(self.levels, int) or self.levels < 2:
            raise LandscapeError(f"landscape.levels must be an integer >= 2, got {self.levels!r}")

    @classmethod
    def for_scale(cls, raw: dict[str, Any] | None, scale: str) -> LandscapeSettings:
        """A figure's `landscape:` block, with its `scales: {scale: {...}}` override applied."""
        raw = dict(raw or {})
        per_scale = raw.pop("scales", {}) or {}
        valid = [f.name for f in fields(cls)]
        for where, block in (
            ("landscape", raw),
            *((f"scales.{s}", b) for s, b in per_scale.items()),
        ):
            if not isinstance(block, dict):
                raise LandscapeError(f"landscape.{where}: expected a mapping, got {block!r}")
            unknown = sorted(set(block) - set(valid))
            if unknown:
                raise LandscapeError(f"{where}: unknown key(s) {unknown}; valid: {valid}")
        return cls(**{**raw, **(per_scale.get(scale) or {})})

    def coords(self) -> np.ndarray:
        """The grid's coordinates along each axis; the centre one is exactly 0."""
        half = (self.points - 1) // 2
        return self.span * np.arange(-half, half + 1, dtype=np.float64) / half

    def compute_fields(self) -> dict[str, Any]:
        """The fields that change the computed grid (what the landscape rule's params hold)."""
        keys = ("span", "points", "batch_size", "test_samples")
        return {k: getattr(self, k) for k in keys}


def filter_normalised(params: Params, generator: torch.Generator) -> Params:
    """One random direction: Gaussian per weight, each filter (row along dim 0) rescaled to the
    norm of the same filter in `params`; 1-D parameters (biases, norm scales) get zeros."""
    out = {}
    for name, w in params.items():
        if w.dim() <= 1:
            out[name] = torch.zeros_like(w)
            continue
        d = torch.randn(w.shape, generator=generator, dtype=torch.float32)
        d = d.to(device=w.device, dtype=w.dtype)
        dims = tuple(range(1, w.dim()))
        w_norm = torch.linalg.vector_norm(w, dim=dims, keepdim=True)
        d_norm = torch.linalg.vector_norm(d, dim=dims, keepdim=True)
        out[name] = d * (w_norm / d_norm.clamp_min(torch.finfo(d.dtype).tiny))
    return out


def random_directions(params: Params, seed: int, n: int = 2) -> list[Params]:
    """`n` filter-normalised directions from the `eval` stream of run seed `seed`."""
    streams = Streams(seed)
    return [
        filter_normalised(params, streams.torch_generator("eval", DIRECTION_KEY, i))
        for i in range(n)
    ]


def eval_subset(n: int, size: int | None, seed: int) -> np.ndarray | None:
    """Sorted indices of a seeded random subset of `size` of n samples (None: use all)."""
    if size is None or size >= n:
        return None
    rng = Streams(seed).generator("eval", DIRECTION_KEY, 2)  # 0 and 1 are the directions
    return np.sort(rng.choice(n, size=size, replace=False))


def per_sample_cross_entropy(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The engine's evaluation loss, per sample."""
    return F.cross_entropy(logits, y, reduction="none")


@torch.no_grad()
def mean_loss(
    apply: Apply,
    params: Params,
    x: torch.Tensor,
    y: torch.Tensor,
    batch_size: int,
    loss_fn: PerSampleLoss = per_sample_cross_entropy,
) -> float:
    """Mean per-sample loss of `params` on (x, y), forwarded in batches (float64 sum)."""
    if len(y) == 0:
        raise LandscapeError("landscape: empty evaluation set")
    total = torch.zeros((), dtype=torch.float64, device=y.device)
    for start in range(0, len(y), batch_size):
        out = apply(params, x[start : start + batch_size])
        total += loss_fn(out, y[start : start + batch_size]).to(torch.float64).sum()
    return float(total) / len(y)


def loss_grid(
    apply: Apply,
    params: Params,
    directions: Sequence[Params],
    x: torch.Tensor,
    y: torch.Tensor,
    alphas: np.ndarray,
    betas: np.ndarray,
    batch_size: int,
    loss_fn: PerSampleLoss = per_sample_cross_entropy,
) -> np.ndarray:
    """loss[j, i] = mean loss of params + alphas[i]·d₁ + betas[j]·d₂ (rows follow β, as
    np.meshgrid(alphas, betas) lays out a surface)."""
    d1, d2 = directions
    out = np.empty((len(betas), len(alphas)), dtype=np.float64)
    for j, b in enumerate(betas):
        for i, a in enumerate(alphas):
            point = {k: v + float(a) * d1[k] + float(b) * d2[k] for k, v in params.items()}
            out[j, i] = mean_loss(apply, point, x, y, batch_size, loss_fn)
    return out


def save_landscape(path: str | Path, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
    """Write a landscape .npz atomically: the arrays plus scalar metadata under `meta_*`."""
    payload = {k: np.asarray(arrays[k]) for k in NPZ_ARRAYS}
    payload.update({f"meta_{k}": np.asarray(v) for k, v in meta.items()})
    with atomic_path(path, suffix=".npz") as tmp, open(tmp, "wb") as f:
        np.savez(f, **payload)


def load_landscape(path: str | Path) -> dict[str, Any]:
    """The arrays and metadata of a landscape .npz, naming the file when it is not one."""
    with np.load(path, allow_pickle=False) as z:
        missing = [k for k in NPZ_ARRAYS if k not in z.files]
        if missing:
            raise LandscapeError(f"{path}: not a landscape file (missing {missing})")
        out: dict[str, Any] = {k: z[k] for k in NPZ_ARRAYS}
        for k in z.files:
            if k.startswith("meta_"):
                out[k[5:]] = z[k].item()
    return out


def compute_run_landscape(
    run_yaml: str | Path,
    params_path: str | Path,
    dataset_path: str | Path,
    out_path: str | Path,
    settings: LandscapeSettings,
    threads: int = 1,
    device: str = "auto",
) -> dict[str, Any]:
    """The landscape of one run's final global model on the official test set, written as .npz."""
    import yaml

    from fedbench.data.base import load_dataset
    from fedbench.engine.config import TrainConfig
    from fedbench.engine.functional import make_apply
    from fedbench.engine.run import pick_device
    from fedbench.models import build_model

    torch.set_num_threads(threads)
    dev = pick_device(device)
    info = yaml.safe_load(Path(run_yaml).read_text())
    spec = info["spec"]
    ds = load_dataset(dataset_path)
    cfg = TrainConfig.from_dict(spec["training"])
    model = build_model(
        spec["model"]["arch"],
        input_shape=tuple(ds.x_train.shape[1:]),
        num_classes=ds.num_classes,
        init_seed=0,  # replaced by the saved parameters
        extras=ds.extras,
        **spec["model"]["params"],
    ).to(dev)
    params = torch.load(params_path, map_location=dev, weights_only=True)
    expected = {n for n, _ in model.named_parameters()}
    if set(params) != expected:
        raise LandscapeError(
            f"{params_path}: parameter names {sorted(params)} do not match model "
            f"{spec['model']['arch']!r} ({sorted(expected)})"
        )
    x = torch.as_tensor(ds.x_test, device=dev)
    y = torch.as_tensor(ds.y_test, device=dev, dtype=torch.long)
    if len(y) == 0:
        raise LandscapeError(f"{dataset_path}: no global test set to compute a landscape on")
    if cfg.augment is not None:  # the pool the run evaluated on
        x = cfg.augment.normalise_pool(x)
    n_total = len(y)
    subset = eval_subset(n_total, settings.test_samples, spec["seed"])
    if subset is not None:
        index = torch.as_tensor(subset, device=dev)
        x, y = x[index], y[index]
    coords = settings.coords()
    apply = make_apply(model)
    log.info(
        "%d x %d grid over [-%g, %g]^2, %d test samples, device %s, %d threads",
        len(coords),
        len(coords),
        settings.span,
        settings.span,
        len(y),
        dev,
        threads,
    )
    started = time.perf_counter()
    loss = loss_grid(
        apply,
        params,
        random_directions(params, spec["seed"]),
        x,
        y,
        coords,
        coords,
        settings.batch_size or cfg.eval_batch_size,
    )
    run = info["run"]
    meta = {
        "run": "/".join(str(run[k]) for k in ("dataset", "partition", "model", "algorithm")),
        "seed": int(spec["seed"]),
        "status": str(info["status"]),
        "standin": bool(info["standin"]),
        "n_test": len(y),
        "n_test_total": n_total,
        "span": settings.span,
        "points": settings.points,
        "directions": "filter-normalised random (Li et al. 2018), 1-D parameters zeroed",
    }
    save_landscape(out_path, {"alphas": coords, "betas": coords, "loss": loss}, meta)
    centre = loss[len(coords) // 2, len(coords) // 2]
    log.info("centre loss %.6g, done in %.1fs", centre, time.perf_counter() - started)
    return meta


@dataclass(frozen=True)
class LandscapeFigureSpec:
    """A kind='landscape' figure: one panel (surface over contour) per (label, landscape file)."""

    paper: str
    name: str
    caption: str
    scale: str
    panels: list[tuple[str, Path]]
    settings: LandscapeSettings

    def __post_init__(self) -> None:
        """Reject a figure without panels."""
        if not self.panels:
            raise LandscapeError(f"{self.paper}/{self.name}: a landscape figure needs panels")


def _shown(loss: np.ndarray, clip: float | None) -> np.ndarray:
    """The loss as drawn: non-finite values masked, values above `clip` drawn at `clip`."""
    z = np.ma.masked_invalid(loss)
    return z if clip is None else np.ma.minimum(z, clip)


def _test_set(d: dict[str, Any]) -> str:
    """How much of the global test set a landscape used."""
    n, total = d.get("n_test"), d.get("n_test_total", d.get("n_test"))
    if n == total:
        return f"the global test set (n = {n})"
    return f"a seeded random {n} of the {total} global test samples"


def make_landscape_figure(spec: LandscapeFigureSpec) -> Figure:
    """The matplotlib figure (not saved): 3-D surface above, contours below, shared colour scale."""
    data = [(label, load_landscape(path)) for label, path in spec.panels]
    shown = [_shown(d["loss"], spec.settings.clip) for _, d in data]
    finite = [z.compressed() for z in shown if z.count()]
    lo = min((float(v.min()) for v in finite), default=0.0)
    hi = max((float(v.max()) for v in finite), default=1.0)
    hi = hi if hi > lo else lo + 1.0
    levels = MaxNLocator(spec.settings.levels).tick_values(lo, hi)  # round numbers around lo, hi
    lo, hi = float(levels[0]), float(levels[-1])
    norm = mcolors.Normalize(vmin=lo, vmax=hi)
    n = len(data)
    width = max(6.0, 4.0 * n + 1.0)
    fig = Figure(figsize=(width, 8.6))
    grid = fig.add_gridspec(
        2, n + 1, width_ratios=[1.0] * n + [0.05], top=0.8, bottom=0.07, wspace=0.3
    )
    mappable = None
    for i, ((label, d), z) in enumerate(zip(data, shown, strict=True)):
        a, b = np.meshgrid(d["alphas"], d["betas"])
        top = fig.add_subplot(grid[0, i], projection="3d")
        bottom = fig.add_subplot(grid[1, i])
        title = f"({chr(65 + i)}) {label}"
        if d.get("status", "ok") != "ok":
            title += f" [run {d['status']}]"
        centre = d["loss"][len(d["betas"]) // 2, len(d["alphas"]) // 2]
        top.set_title(f"{title}\ncentre loss {centre:.4g}", fontsize="medium")
        if not z.count():
            bottom.text(0.5, 0.5, "no finite loss", ha="center", va="center")
            continue
        top.plot_surface(
            a,
            b,
            z.filled(np.nan),
            cmap="viridis",
            norm=norm,
            lw=0,
            rstride=1,
            cstride=1,
            antialiased=False,
        )
        top.set_zlim(lo, hi)
        top.set_xlabel("α (d₁)", fontsize="small")
        top.set_ylabel("β (d₂)", fontsize="small")
        mappable = bottom.contourf(a, b, z, levels=levels, cmap="viridis", norm=norm)
        bottom.contour(a, b, z, levels=levels, colors="k", linewidths=0.4, alpha=0.5)
        bottom.plot([0.0], [0.0], "r*", ms=9, label="final global model")
        bottom.set_xlabel("α (direction d₁)")
        if i == 0:
            bottom.set_ylabel("β (direction d₂)")
        bottom.set_aspect("equal")
        bottom.legend(loc="upper right", fontsize="x-small")
    if mappable is not None:
        fig.colorbar(mappable, cax=fig.add_subplot(grid[1, n]), label="test loss (mean CE)")
    first = data[0][1]
    c = spec.settings.clip
    clip = "" if c is None else f"; losses above {c:g} drawn at {c:g}"
    standin = any(bool(d.get("standin", False)) for _, d in data)
    title = [
        f"{spec.paper} {spec.name}: {spec.caption}",
        f"scale {spec.scale}; final global model θ of each run (seed {first.get('seed')}); "
        f"plane θ + α·d₁ + β·d₂ with random filter-normalised directions (Li et al. 2018; 1-D "
        f"parameters zeroed), {len(first['alphas'])}×{len(first['betas'])} grid over "
        f"[−{first['alphas'].max():g}, {first['alphas'].max():g}]²; loss = mean cross-entropy on "
        f"{_test_set(first)}; one colour scale for all panels{clip}",
        *(f"WARNING: {w}" for w in warning_lines(spec.scale, standin)),
    ]
    fig.suptitle("\n".join(textwrap.fill(t, int(width * 11)) for t in title), fontsize="medium")
    return fig


def write_landscape_figure(spec: LandscapeFigureSpec, out_prefix: str | Path) -> list[Path]:
    """Write out_prefix.png and .pdf atomically; return their paths."""
    return save_figure(make_landscape_figure(spec), out_prefix)

"""Loss landscapes of a final global model (SuPerFed Figure 2.4, "following [62]").

The thesis names no method; this follows superfed.md §12.17 and Li et al. (NeurIPS 2018,
"Visualizing the Loss Landscape of Neural Nets"): a 2-D plane θ + α·d₁ + β·d₂ through the final
global model θ along two random directions, each filter-normalised (every output filter, i.e.
every row along dim 0, of a weight rescaled to that filter's norm in θ), with 1-D parameters
(biases, norm scales) given zero direction, as Li et al.'s default `ignore='biasbn'` does. The
loss is the run's objective (the mean per-sample cross-entropy unless the run trains another,
e.g. BCE on one logit under `bce_logit`) on the official test set at each grid point.
"""

from __future__ import annotations

import logging
import pickle
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from fedbench.data.base import load_dataset
from fedbench.engine.build import build_run
from fedbench.engine.run import pick_device
from fedbench.io import DamagedFile, MissingFile
from fedbench.landscape_file import LandscapeError, LandscapeSettings, save_landscape
from fedbench.objectives import CROSS_ENTROPY
from fedbench.rng import Streams
from fedbench.tree import Apply, Params

log = logging.getLogger("fedbench.landscape")
# Directions come from the run's `eval` stream under this key (then the direction's index), so
# every run of one seed draws the same raw Gaussians and differs only by its own filter norms.
DIRECTION_KEY = 24
# Per-sample loss of (outputs, inputs, labels): an objective's `sample_loss`.
PerSampleLoss = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


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


@torch.no_grad()
def mean_loss(
    apply: Apply,
    params: Params,
    x: torch.Tensor,
    y: torch.Tensor,
    batch_size: int,
    loss_fn: PerSampleLoss = CROSS_ENTROPY.sample_loss,
) -> float:
    """Mean per-sample loss of `params` on (x, y), forwarded in batches (float64 sum)."""
    if len(y) == 0:
        raise LandscapeError("landscape: empty evaluation set")
    total = torch.zeros((), dtype=torch.float64, device=y.device)
    for start in range(0, len(y), batch_size):
        xb, yb = x[start : start + batch_size], y[start : start + batch_size]
        total += loss_fn(apply(params, xb), xb, yb).to(torch.float64).sum()
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
    loss_fn: PerSampleLoss = CROSS_ENTROPY.sample_loss,
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


def compute_run_landscape(
    run_yaml: str | Path,
    params_path: str | Path,
    dataset_path: str | Path,
    out_path: str | Path,
    settings: LandscapeSettings,
    threads: int = 1,
    device: str = "auto",
) -> dict[str, Any]:
    """The landscape of one run's final global model on the official test set, written as .npz:
    the run's network (`build_run`, so its head is the one it trained) scored by its objective."""
    torch.set_num_threads(threads)
    dev = pick_device(device)
    info = yaml.safe_load(Path(run_yaml).read_text())
    spec = info["spec"]
    ds = load_dataset(dataset_path)
    # The network only: its initial weights are replaced by the saved ones.
    built = build_run(spec, ds, dev, train=False)
    model, cfg = built.model, built.config
    try:
        params = torch.load(params_path, map_location=dev, weights_only=True)
    except FileNotFoundError:
        raise MissingFile(params_path, "parameter", "train") from None
    except (RuntimeError, EOFError, OSError, pickle.UnpicklingError) as err:
        problem = f"parameter file {params_path} is damaged ({type(err).__name__}: {err})"
        raise DamagedFile(params_path, problem, "train") from err
    expected = {n: p.shape for n, p in model.named_parameters()}
    if {k: v.shape for k, v in params.items()} != expected:
        raise LandscapeError(
            f"{params_path}: parameters {_shapes(params)} do not match model "
            f"{spec['model']['arch']!r} under objective {built.objective.name!r} "
            f"({_shapes(expected)})"
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
    log.info(
        "%d x %d grid over [-%g, %g]^2, %d test samples, objective %s, device %s, %d threads",
        len(coords),
        len(coords),
        settings.span,
        settings.span,
        len(y),
        built.objective.name,
        dev,
        threads,
    )
    started = time.perf_counter()
    loss = loss_grid(
        built.apply,
        params,
        random_directions(params, spec["seed"]),
        x,
        y,
        coords,
        coords,
        settings.batch_size or cfg.eval_batch_size,
        built.objective.sample_loss,
    )
    run = info["run"]
    meta = {
        "run": "/".join(str(run[k]) for k in ("dataset", "partition", "model", "algorithm")),
        "seed": int(spec["seed"]),
        "status": str(info["status"]),
        "standin": bool(info["standin"]),
        "objective": built.objective.name,
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


def _shapes(params: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in sorted(params.items())}

"""Image-grid figures (FedEvg's Figures 4.1-4.4, specs/fedevg.md §5.3): for one dataset /
partition / model cell and one seed, spc seeded random training images per class of the prepared
dataset, a red vertical bar, then one panel per method (grid row) made from its run's final
synthetic set (`synthetic_x` in the run's artifacts.pt, named in run.yaml's `artifacts`). Each
panel is `torchvision.utils.make_grid(x, nrow=spc, padding=2)` with row r = class r."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.cells import (
    Grid,
    RunKey,
    check_names,
    check_seeds,
    choose_dataset,
    column_labels,
    dataset_label,
    merge_cell,
    spec_header,
)
from fedbench.config import ConfigError
from fedbench.outputs.base import OutputKind, check_axes
from fedbench.report.collect import RunDataError

ROW_KEYS = ("id", "label", "algorithm", "model", "range")  # a row is a method
COLUMN_KEYS = ("id", "label", "dataset", "partition", "model")  # the one cell's data
# Pixel ranges a method's images may come in (FedEvg: [0, 1]; a tanh generator: [-1, 1]).
RANGES = ((0.0, 1.0), (-1.0, 1.0))
PADDING = 2  # make_grid's padding inside each panel (black, its default pad value)
BAR_PX = 6  # width of the red bar after the real panel
GAP_PX = 6  # white columns between two method panels
RED = (1.0, 0.0, 0.0)
SYNTHETIC = "synthetic_x"  # the artifact drawn; `synthetic_y` (labels) orders its rows if present


@dataclass(frozen=True)
class MethodPanel:
    """One method's panel: its label, its run and the range its images come in."""

    label: str
    run_dir: Path
    range: tuple[float, float] = (0.0, 1.0)


@dataclass(frozen=True)
class ImageGridSpec:
    paper: str
    name: str
    caption: str
    scale: str
    seed: int  # the runs' seed, and the seed of the real panel's draw
    data: Path  # the prepared dataset (.npz) the runs trained on
    data_label: str  # e.g. "Fashion-MNIST K=10 α=0.01"
    dataset: str  # the dataset's display name
    methods: tuple[MethodPanel, ...]
    spc: int | None = None  # images per class and panel; None: the synthetic sets' own
    real_range: tuple[float, float] = (0.0, 1.0)


class ImageGridKind(OutputKind):
    name = "image_grid"
    section = "figures"
    keys = ("caption", "kind", "seeds", "rows", "columns", "spc", "real_range")
    about = "an image grid (real images | red bar | each method's synthetic set)"

    def check(self, where: str, out: dict[str, Any], catalog: dict) -> None:
        """One seed; rows = methods whose algorithm keeps artifacts; one column = the cell."""
        seeds = out.get("seeds")
        check_seeds(f"{where}.seeds", seeds)
        if len(seeds) != 1:
            raise ConfigError(f"{where}.seeds: an image grid draws one run per method: give one")
        spc = out.get("spc")
        if spc is not None and (isinstance(spc, bool) or not isinstance(spc, int) or spc < 1):
            raise ConfigError(f"{where}.spc: expected an integer >= 1 (images per class)")
        parse_range(f"{where}.real_range", out.get("real_range", [0, 1]))
        check_axes(where, out)
        if len(out["columns"]) != 1:
            raise ConfigError(
                f"{where}.columns: an image grid draws one dataset/partition/model cell: give "
                f"one column (got {len(out['columns'])}); make one figure per cell"
            )
        for axis, valid in (("rows", ROW_KEYS), ("columns", COLUMN_KEYS)):
            for e in out[axis]:
                bad = sorted(set(e) - set(valid))
                if bad:
                    raise ConfigError(
                        f"{where} {axis[:-1]} {e['id']!r}: unknown key(s) {bad}; "
                        f"valid: {list(valid)}"
                    )
        col = out["columns"][0]
        for row in out["rows"]:
            place = f"{where} row {row['id']!r}"
            parse_range(f"{place}.range", row.get("range", [0, 1]))
            cell = merge_cell(row, col, place)
            check_names(place, cell, catalog)
            _check_keeps_artifacts(place, cell["algorithm"], catalog)

    def inputs(self, grid: Grid, name: str, catalog: dict, scale: str) -> list[str]:
        """The prepared dataset the real panel draws from."""
        return [_dataset_file(grid, name, catalog, scale)]

    def spec(self, grid: Grid, name: str, catalog: dict, scale: str) -> ImageGridSpec:
        out = grid.output(self.section, name)
        runs: dict[tuple[str, str], list[RunKey]] = self.runs(grid, name, catalog, scale)
        col = out["columns"][0]
        where = f"{grid.name}.{name}"
        return ImageGridSpec(
            **spec_header(grid, self.section, name, scale),
            seed=int(out["seeds"][0]),
            data=Path(_dataset_file(grid, name, catalog, scale)),
            data_label=column_labels(grid, self.section, name, catalog, scale)[0]["label"],
            dataset=dataset_label(catalog, choose_dataset(col["dataset"], catalog, scale)),
            methods=tuple(
                MethodPanel(
                    str(row.get("label", row["id"])),
                    Path(runs[(row["id"], col["id"])][0].folder(scale)),
                    parse_range(f"{where}.rows.{row['id']}.range", row.get("range", [0, 1])),
                )
                for row in out["rows"]
            ),
            spc=out.get("spc"),
            real_range=parse_range(f"{where}.real_range", out.get("real_range", [0, 1])),
        )

    def render(self, spec: ImageGridSpec, out_prefix: Path) -> list[Path]:
        return write_image_grid(spec, out_prefix)


def parse_range(where: str, raw: Any) -> tuple[float, float]:
    """[0, 1] or [-1, 1]: the pixel range a panel's images come in."""
    ok = isinstance(raw, list) and len(raw) == 2
    ok = ok and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in raw)
    if not ok or (float(raw[0]), float(raw[1])) not in RANGES:
        raise ConfigError(f"{where}: expected [0, 1] or [-1, 1], got {raw!r}")
    return float(raw[0]), float(raw[1])


def _check_keeps_artifacts(place: str, algorithm: str, catalog: dict) -> None:
    """A method's algorithm must keep tensors beside its model (ServerOutputs.artifacts)."""
    from fedbench.algorithms import ALGORITHMS
    from fedbench.algorithms.opt_in import overrides

    cls = ALGORITHMS[catalog["algorithms"][algorithm]["algorithm"]]
    if not overrides(cls, "artifacts"):
        raise ConfigError(
            f"{place}: algorithm {algorithm!r} ({cls.name}) keeps no artifacts (no synthetic "
            f"set to draw); list only methods that keep one, e.g. fedevg"
        )


def _dataset_file(grid: Grid, name: str, catalog: dict, scale: str) -> str:
    col = grid.output("figures", name)["columns"][0]
    return f"results/{scale}/data/{choose_dataset(col['dataset'], catalog, scale)}.npz"


# -- reading -------------------------------------------------------------------------------------


def run_info(run_dir: Path) -> dict[str, Any]:
    """A run's run.yaml as a mapping; a missing or damaged one is named with the fix."""
    import yaml

    from fedbench.io import rewrite_advice

    path = Path(run_dir) / "run.yaml"
    try:
        info = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        advice = rewrite_advice(path, "train")
        raise RunDataError(f"{path}: cannot read run.yaml ({err}); {advice}") from None
    if not isinstance(info, dict):
        raise RunDataError(f"{path}: run.yaml is not a mapping; {rewrite_advice(path, 'train')}")
    return info


def synthetic_set(run_dir: Path) -> tuple[Any, Any, dict[str, Any]]:
    """(synthetic_x, synthetic_y or None, run.yaml) of one run, from the artifacts.pt that its
    run.yaml names; a run without artifacts is named with the fix."""
    import torch

    from fedbench.io import rewrite_advice

    run_dir = Path(run_dir)
    info = run_info(run_dir)
    name = info.get("artifacts")
    algo = (info.get("run") or {}).get("algorithm", "?")
    if not name:
        raise RunDataError(
            f"{run_dir}: run.yaml names no artifacts, so there is no synthetic set to draw. "
            f"Either algorithm {algo!r} keeps none (drop this method from the figure's rows: only "
            f"algorithms that keep artifacts, e.g. fedevg, can be drawn) or the run predates "
            f"artifacts.pt; then {rewrite_advice(run_dir / 'run.yaml', 'train')}"
        )
    path = run_dir / str(name)
    try:
        arts = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, EOFError) as err:
        raise RunDataError(
            f"{path}: cannot read the run's artifacts ({err}); "
            f"{rewrite_advice(run_dir / 'run.yaml', 'train')}"
        ) from None
    if not isinstance(arts, dict) or SYNTHETIC not in arts:
        keys = sorted(arts) if isinstance(arts, dict) else type(arts).__name__
        raise RunDataError(
            f"{path}: no {SYNTHETIC!r} among the artifacts of algorithm {algo!r} (has {keys}); "
            f"an image grid draws a synthetic set [M, C, H, W]"
        )
    return arts[SYNTHETIC], arts.get("synthetic_y"), info


def to_unit(x: Any, value_range: tuple[float, float]) -> Any:
    """Images in `value_range` mapped to [0, 1] (clamped; NaN -> 0), float32."""
    import torch

    lo, hi = value_range
    x = (torch.as_tensor(x, dtype=torch.float32) - lo) / (hi - lo)
    return torch.nan_to_num(x, nan=0.0).clamp(0.0, 1.0)


def class_rows(x: Any, y: Any, num_classes: int, spc: int | None, where: str) -> tuple[Any, int]:
    """The images in class order, `spc` per class (class r's images are rows r*spc...), and spc.

    With labels, each class's first spc images; without, the set must be class-sorted with
    M = L·spc. spc None: the set's own M / L."""
    import torch

    x = torch.as_tensor(x)
    if x.ndim != 4 or x.shape[1] not in (1, 3):
        raise RunDataError(
            f"{where}: {SYNTHETIC} must be [M, C, H, W] with C 1 or 3, got {tuple(x.shape)}"
        )
    if y is None:
        own, rest = divmod(len(x), num_classes)
        if rest:
            raise RunDataError(
                f"{where}: {len(x)} unlabelled synthetic images are not {num_classes} classes x spc"
            )
        y = torch.arange(num_classes).repeat_interleave(own)
    y = torch.as_tensor(y).long().reshape(-1)
    counts = torch.bincount(y, minlength=num_classes)[:num_classes]
    own = int(counts.min())
    want = own if spc is None else spc
    if own < want or want < 1:
        raise RunDataError(
            f"{where}: the synthetic set has {counts.tolist()} images per class, fewer than the "
            f"figure's spc {want}; set the figure's `spc` to at most {own}"
        )
    idx = torch.cat([torch.nonzero(y == c).flatten()[:want] for c in range(num_classes)])
    return x[idx], want


def real_rows(
    x: np.ndarray, y: np.ndarray, num_classes: int, spc: int, seed: int, where: str = "dataset"
) -> np.ndarray:
    """`spc` random training images per class, class r's in rows r*spc..., a draw of `seed`."""
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    picks = []
    for c in range(num_classes):
        idx = np.flatnonzero(y == c)
        if len(idx) < spc:
            raise RunDataError(
                f"{where}: class {c} has {len(idx)} training images, fewer than spc {spc}; set the "
                f"figure's `spc` to at most {len(idx)}"
            )
        picks.append(rng.choice(idx, size=spc, replace=False))
    return x[np.concatenate(picks)]


def panel(x: Any, spc: int) -> Any:
    """One panel [3, H', W']: `torchvision.utils.make_grid(x, nrow=spc, padding=2)`, grey images
    repeated to 3 channels."""
    import torch
    from torchvision.utils import make_grid

    x = torch.as_tensor(x, dtype=torch.float32)
    if x.shape[1] == 1:
        x = x.repeat(1, 3, 1, 1)
    return make_grid(x, nrow=spc, padding=PADDING)


def compose(real: Any, methods: list[Any]) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """[real | red bar | method 1 | white gap | method 2 ...] as one H x W x 3 array in [0, 1],
    and each panel's (first, last + 1) column."""
    import torch

    height = real.shape[1]
    bad = [i for i, p in enumerate(methods) if p.shape[1] != height]
    if bad:
        raise RunDataError(
            f"panel heights differ from the real panel's {height} px at method(s) {bad}: the "
            f"synthetic images must have the dataset's size and classes"
        )
    parts, spans, at = [real], [(0, real.shape[2])], real.shape[2]
    parts.append(torch.tensor(RED).view(3, 1, 1).expand(3, height, BAR_PX))
    at += BAR_PX
    for i, p in enumerate(methods):
        if i:
            parts.append(torch.ones(3, height, GAP_PX))
            at += GAP_PX
        parts.append(p)
        spans.append((at, at + p.shape[2]))
        at += p.shape[2]
    return torch.cat(parts, dim=2).permute(1, 2, 0).numpy(), spans


@dataclass(frozen=True)
class ImageGrid:
    """What the figure shows: the composed array, panel spans and titles, and its notes."""

    array: np.ndarray
    spans: list[tuple[int, int]]
    titles: list[str]
    num_classes: int
    image_height: int
    spc: int
    real_standin: bool  # the prepared dataset is generated stand-ins
    standin: bool  # it or any run is


def build_image_grid(spec: ImageGridSpec) -> ImageGrid:
    """Read the dataset and every method's synthetic set and compose the figure's array."""
    from fedbench.data.base import load_dataset

    ds = load_dataset(spec.data)
    sets = []
    for m in spec.methods:
        x, y, info = synthetic_set(m.run_dir)
        if tuple(x.shape[2:]) != tuple(ds.x_train.shape[2:]):
            raise RunDataError(
                f"{m.run_dir}: synthetic images of {tuple(x.shape[2:])} px, the dataset "
                f"{spec.data}'s are {tuple(ds.x_train.shape[2:])}"
            )
        rows, spc = class_rows(x, y, ds.num_classes, spec.spc, str(m.run_dir))
        if info.get("status", "ok") != "ok":
            label = f"{m.label} [diverged, round {info.get('diverged_round')}]"
        else:
            label = m.label
        sets.append((label, to_unit(rows, m.range), spc, bool(info.get("standin"))))
    spcs = sorted({s for _, _, s, _ in sets})
    if len(spcs) > 1:
        raise RunDataError(
            f"the methods' synthetic sets hold {spcs} images per class: set the figure's `spc` "
            f"(at most {spcs[0]}) so every panel has as many columns"
        )
    spc = spcs[0]
    real = real_rows(ds.x_train, ds.y_train, ds.num_classes, spc, spec.seed, str(spec.data))
    array, spans = compose(
        panel(to_unit(real, spec.real_range), spc), [panel(x, spc) for _, x, _, _ in sets]
    )
    kind = "stand-in" if ds.standin else "real"
    return ImageGrid(
        array=array,
        spans=spans,
        titles=[f"{kind} ({spec.dataset})", *(label for label, *_ in sets)],
        num_classes=ds.num_classes,
        image_height=int(ds.x_train.shape[2]),
        spc=spc,
        real_standin=bool(ds.standin),
        standin=bool(ds.standin) or any(s for *_, s in sets),
    )


def write_image_grid(spec: ImageGridSpec, out_prefix: str | Path) -> list[Path]:
    """The composed grid with a title over each panel and class indices down the side; .png and
    .pdf, each written atomically."""
    from matplotlib.figure import Figure

    from fedbench.report.figures import save_figure
    from fedbench.report.layout import warning_lines

    g = build_image_grid(spec)
    height, width = g.array.shape[:2]
    fig_w = max(6.0, width / 90 + 0.8)
    real = "random GENERATED STAND-IN" if g.real_standin else "random"
    lines = [
        f"{spec.paper} {spec.name}" + (f": {spec.caption}" if spec.caption else ""),
        f"{spec.data_label}. Left of the red bar: {g.spc} {real} training images per class of "
        f"{spec.dataset} (the prepared dataset, seeded draw, seed {spec.seed}); right: each "
        f"method's final synthetic set (its run's artifacts.pt, run seed {spec.seed}); "
        f"row r = class r",
        *(f"WARNING: {w}" for w in warning_lines(spec.scale, g.standin)),
    ]
    title = "\n".join(textwrap.fill(t, int(fig_w * 10)) for t in lines)
    # The image at ~90 px an inch, a line of panel titles and the suptitle's lines above it.
    fig_h = height / 90 + 0.6 + 0.2 * (title.count("\n") + 1)
    fig = Figure(figsize=(fig_w, fig_h), layout="constrained")
    fig.suptitle(title, fontsize="medium")
    ax = fig.subplots()
    ax.imshow(g.array, interpolation="nearest")
    for (a, b), text in zip(g.spans, g.titles, strict=True):
        ax.text((a + b - 1) / 2, -3, text, ha="center", va="bottom", fontsize=9)
    step = g.image_height + PADDING
    ax.set_yticks([PADDING + r * step + g.image_height / 2 - 0.5 for r in range(g.num_classes)])
    ax.set_yticklabels([str(r) for r in range(g.num_classes)], fontsize=7)
    ax.set_ylabel("class", fontsize=8)
    ax.set_xticks([])
    for side in ax.spines.values():
        side.set_visible(False)
    return save_figure(fig, out_prefix)

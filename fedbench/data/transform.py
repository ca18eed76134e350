"""Dataset-level transforms a paper's data scripts apply before partitioning.

`pool: merged` joins the official training and test sets into one pool (no global test set), as
pFedBreD's generators do before their per-client 75/25 split; the pool marks which rows came
from the official test split (`ArrayDataset.official_test`), so a partition may keep them as the
clients' test splits (`test_split: official`, the q-FFL Fashion-MNIST protocol). `standardise`
rescales the pixels over every image the scripts saw (the merged 70k on MNIST / Fashion-MNIST):
`global` one mean and std, `per_pixel` one per input position (both with the scripts' +0.001 in
the denominator), `half` (x - 0.5) / 0.5 (torchvision's Normalize((0.5,), (0.5,))), `none`.

`resize_images` is the image sources' load-time `resize` parameter (CIFAR, the MNIST family):
it runs inside `Source.load`, before any of the above, so a prepared dataset holds the resized
pixels; `check_resize` validates the parameter.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from fedbench.data.base import ArrayDataset

TRANSFORM_CHOICES: dict[str, tuple[str, ...]] = {
    "pool": ("split", "merged"),
    "standardise": ("none", "global", "per_pixel", "half"),
}
EPS = 0.001  # the scripts' (x - mean) / (std + 0.001)


def check_resize(source: str, resize: Any, native: tuple[int, int]) -> None:
    """ValueError naming the key and its valid values unless `resize` is a positive int or None."""
    if resize is not None and (
        not isinstance(resize, int) or isinstance(resize, bool) or resize < 1
    ):
        raise ValueError(
            f"{source}: resize must be a positive integer (the output side in pixels) or null "
            f"(keep {native[0]}x{native[1]}), got {resize!r}"
        )


def resize_images(x: np.ndarray, size: int, chunk: int = 4096) -> np.ndarray:
    """Bilinear, antialiased resize of (N, C, H, W) float32 images to size x size (SuPerFed's
    CIFAR at 28, FedEvg's MNIST family at 32).

    torch's `interpolate(bilinear, antialias=True, align_corners=False)` on the float pixels,
    clamped to [0, 1]. The releases resize with torchvision's `Resize((s, s))` on PIL images
    (bilinear; PIL always antialiases), which is PIL's `Image.resize(BILINEAR)` on the uint8
    pixels: the same filter, but PIL rounds its result to 8 bits. The two agree to within one
    grey level (1/255); on Fashion-MNIST 28 -> 32 the mean difference is 0.17 of a level
    (tests/data/test_resize.py checks the bound against PIL).
    """
    import torch
    import torch.nn.functional as F

    out = np.empty((len(x), x.shape[1], size, size), dtype=np.float32)
    for start in range(0, len(x), chunk):
        t = torch.from_numpy(x[start : start + chunk])
        r = F.interpolate(
            t, size=(size, size), mode="bilinear", antialias=True, align_corners=False
        )
        out[start : start + chunk] = r.clamp_(0.0, 1.0).numpy()
    return out


def check_transform(name: str, transform: dict[str, Any] | None) -> dict[str, str]:
    """The transform with defaults filled in; ValueError naming the dataset and the bad key."""
    transform = dict(transform or {})
    unknown = sorted(set(transform) - set(TRANSFORM_CHOICES))
    if unknown:
        valid = sorted(TRANSFORM_CHOICES)
        raise ValueError(f"dataset {name}: unknown transform key(s) {unknown}; valid: {valid}")
    out = {}
    for key, choices in TRANSFORM_CHOICES.items():
        value = transform.get(key, choices[0])
        if value not in choices:
            raise ValueError(
                f"dataset {name}: transform {key} must be one of {list(choices)}, got {value!r}"
            )
        out[key] = value
    return out


def apply_transform(ds: ArrayDataset, transform: dict[str, Any] | None) -> ArrayDataset:
    """`ds` with the transform applied (a new dataset; `ds` is not modified)."""
    t = check_transform(ds.name, transform)
    if t == {k: c[0] for k, c in TRANSFORM_CHOICES.items()}:
        return ds
    x_train, y_train, x_test, y_test = ds.x_train, ds.y_train, ds.x_test, ds.y_test
    groups, official_test = ds.groups, ds.official_test
    if t["pool"] == "merged":
        if groups is not None and len(y_test):
            raise ValueError(f"dataset {ds.name}: pool merged needs a dataset without groups")
        official_test = np.concatenate(
            [
                np.zeros(len(y_train), dtype=bool) if official_test is None else official_test,
                np.ones(len(y_test), dtype=bool),
            ]
        )
        x_train = np.concatenate([x_train, x_test])
        y_train = np.concatenate([y_train, y_test])
        x_test, y_test = x_test[:0], y_test[:0]
    seen = np.concatenate([x_train, x_test]).astype(np.float64)
    if t["standardise"] == "global":
        mean, std = seen.mean(), seen.std()
    elif t["standardise"] == "per_pixel":
        mean, std = seen.mean(axis=0), seen.std(axis=0)
    elif t["standardise"] == "half":
        mean, std = 0.5, 0.5 - EPS
    else:
        mean, std = 0.0, 1.0 - EPS

    def scale(x: np.ndarray) -> np.ndarray:
        return ((x - mean) / (std + EPS)).astype(np.float32)

    what = ", ".join(f"{k} {v}" for k, v in t.items())
    return dataclasses.replace(
        ds,
        x_train=scale(x_train),
        y_train=y_train,
        x_test=scale(x_test),
        y_test=y_test,
        groups=groups,
        official_test=official_test,
        provenance=f"{ds.provenance}; transform: {what}",
    )

"""Training-time image augmentation on device batches, with draws from a seeded stream.

SuPerFed's TinyImageNet pipeline (spec superfed.md §4.6) is RandomRotation(20),
RandomHorizontalFlip(0.5), ToTensor, Normalize(ImageNet). Here the pool is normalised once when
the federation is built, and each training batch is rotated and flipped on the device. The draws
for a client's whole round ([steps, B] angles and flips) come from its `augment` stream keyed by
(round, client) before its first step, so both executors see the same images.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

NORMALISATIONS = {
    "imagenet": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
}


@dataclass(frozen=True)
class Augment:
    """Random rotation by U(-rotate, rotate) degrees (nearest pixel, black fill), horizontal flip
    with probability `hflip`, and a fixed per-channel normalisation of the pool.

    `test`: also transform the clients' test splits at every evaluation, with fresh draws (the
    SuPerFed release's TinyImageNet, whose client test splits are carved from the augmented
    training set, spec superfed.md §4.6); the global test set is never transformed."""

    rotate: float = 0.0
    hflip: float = 0.0
    normalize: str | None = None
    test: bool = False

    def __post_init__(self):
        if not 0 <= self.rotate <= 180:
            raise ValueError(f"training.augment.rotate: must be in [0, 180] (got {self.rotate!r})")
        if not 0 <= self.hflip <= 1:
            raise ValueError(f"training.augment.hflip: must be in [0, 1] (got {self.hflip!r})")
        if not isinstance(self.test, bool):
            raise ValueError(f"training.augment.test: must be true or false (got {self.test!r})")
        if self.normalize is not None and self.normalize not in NORMALISATIONS:
            raise ValueError(
                f"training.augment.normalize: unknown {self.normalize!r}; "
                f"valid: {sorted(NORMALISATIONS)} or null"
            )

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> Augment | None:
        """Build from the `training.augment` mapping; unknown keys name the valid ones."""
        if d is None:
            return None
        if not isinstance(d, dict):
            raise ValueError(f"training.augment: expected a mapping or null (got {d!r})")
        valid = ("rotate", "hflip", "normalize", "test")
        unknown = sorted(set(d) - set(valid))
        if unknown:
            raise ValueError(f"training.augment: unknown key(s) {unknown}; valid: {list(valid)}")
        return cls(**d)

    @property
    def random(self) -> bool:
        """True when batches get random transforms (else only the pool's normalisation)."""
        return self.rotate > 0 or self.hflip > 0

    def stats(self, channels: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(mean, std) shaped [C, 1, 1], or None without normalisation."""
        if self.normalize is None:
            return None
        mean, std = NORMALISATIONS[self.normalize]
        if len(mean) != channels:
            raise ValueError(
                f"training.augment.normalize: {self.normalize} has {len(mean)} channels, "
                f"the data has {channels}"
            )
        return torch.tensor(mean).view(-1, 1, 1), torch.tensor(std).view(-1, 1, 1)

    def normalise_pool(self, x: torch.Tensor) -> torch.Tensor:
        """Images [N, C, H, W] in [0, 1], normalised (a new tensor; x itself is left alone)."""
        s = self.stats(x.shape[1])
        if s is None:
            return x
        mean, std = (t.to(x.device, x.dtype) for t in s)
        return (x - mean) / std

    def draw(self, gen: torch.Generator, shape: tuple[int, ...]) -> dict[str, torch.Tensor]:
        """Angles (radians) and flip flags for a [steps, B] grid of samples."""
        angle = (torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1) * self.rotate
        flip = torch.rand(shape, generator=gen, dtype=torch.float64) < self.hflip
        return {"angle": (angle * math.pi / 180).float(), "flip": flip}

    def apply(self, x: torch.Tensor, draws: dict[str, torch.Tensor]) -> torch.Tensor:
        """Rotate then flip a batch x [..., C, H, W] (leading axes = the draws' shape)."""
        lead = draws["angle"].shape
        flat = x.reshape(-1, *x.shape[-3:])
        angle = draws["angle"].reshape(-1).to(x.device)
        flip = draws["flip"].reshape(-1).to(x.device)
        if self.rotate > 0:
            flat = self._rotate(flat, angle)
        if self.hflip > 0:
            flat = torch.where(flip.view(-1, 1, 1, 1), flat.flip(-1), flat)
        return flat.reshape(*lead, *x.shape[-3:])

    def _rotate(self, x: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
        """Rotate each image about its centre; pixels from outside the image are black (0 before
        normalisation, i.e. -mean/std after it), as torchvision fills PIL images."""
        cos, sin = torch.cos(angle), torch.sin(angle)
        zero = torch.zeros_like(cos)
        theta = torch.stack(
            [torch.stack([cos, -sin, zero], 1), torch.stack([sin, cos, zero], 1)], 1
        )
        grid = F.affine_grid(theta.to(x.dtype), list(x.shape), align_corners=False)
        out = F.grid_sample(x, grid, mode="nearest", padding_mode="zeros", align_corners=False)
        s = self.stats(x.shape[1])
        if s is None:
            return out
        inside = (grid.abs() <= 1).all(-1).unsqueeze(1)  # [N, 1, H, W]
        mean, std = (t.to(x.device, x.dtype) for t in s)
        return torch.where(inside, out, -mean / std)

"""Fréchet Inception Distance (Heusel et al. 2017) of synthetic images against a real test set.

FID = ||mu_s - mu_r||^2 + Tr(S_s + S_r - 2 (S_s S_r)^(1/2)) on feature means and covariances.
Two protocols (specs/fedevg.md §5.1 and §7 item 20), chosen by `fid.mode`:

- "code" reproduces the FedEvg release (src/metrics/metricszoo.py `Fid`, src/server/fedevgserver.py
  `_central_evaluate`): every synthetic image (M of them) against the first test images in order,
  as many as the release's zip of two batch-64 loaders pairs up (128 for every M in 65..128, i.e.
  all of the paper's M = 70..110). The release maps the real images to [-1, 1] and leaves the
  synthetic ones in [0, 1]; that asymmetry moves the values in Tables 4.4/4.5, so it is kept here.
- "standard" scales both sets the same way (x*2-1, the range these Inception weights expect) and
  uses every real image given. With N_syn = M <= 110 it is still biased upwards (small-N bias).

Features come from a `FeatureExtractor`: the release's torchvision Inception-v3 (IMAGENET1K_V1,
read from a local file, never downloaded) or a fixed-seed random CNN for tests and CI, whose every
value is labelled "FID-proxy, not comparable to Tables 4.4/4.5".
"""

from __future__ import annotations

import hashlib
import math
import re
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable
from urllib.parse import urlparse

import numpy as np
import scipy.linalg
import torch
import torch.nn.functional as F

MODES = ("code", "standard")
# The release zips a synthetic loader with a test loader, both at the scripts' `--B 64`.
CODE_BATCH = 64
PROXY_LABEL = "FID-proxy, not comparable to Tables 4.4/4.5"
WEIGHTS_KEY = "fid.weights"
DOWNLOAD_COMMAND = (
    "python -c \"import torchvision; torchvision.models.inception_v3(weights='IMAGENET1K_V1')\""
)
# The release's feature trunk: torchvision Inception3 up to Mixed_7c, then global average pooling.
INCEPTION_TRUNK = (
    "Conv2d_1a_3x3",
    "Conv2d_2a_3x3",
    "Conv2d_2b_3x3",
    "maxpool1",
    "Conv2d_3b_1x1",
    "Conv2d_4a_3x3",
    "maxpool2",
    "Mixed_5b",
    "Mixed_5c",
    "Mixed_5d",
    "Mixed_6a",
    "Mixed_6b",
    "Mixed_6c",
    "Mixed_6d",
    "Mixed_6e",
    "Mixed_7a",
    "Mixed_7b",
    "Mixed_7c",
    "avgpool",
)


@runtime_checkable
class FeatureExtractor(Protocol):
    """images [N, C, H, W] (already scaled by `fid`) -> features [N, d].

    `reference` is True only for the paper's extractor (torchvision IMAGENET1K_V1 weights,
    checked by hash); a plain callable without these attributes counts as a proxy.
    """

    name: str
    reference: bool

    def __call__(self, images: torch.Tensor) -> torch.Tensor: ...


@dataclass(frozen=True)
class FIDResult:
    """One FID value with the protocol and extractor that produced it."""

    value: float
    mode: str
    extractor: str
    n_real: int
    n_synthetic: int
    comparable: bool  # to the paper's Tables 4.4/4.5
    label: str
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        """A JSON-ready dict (notes as a list)."""
        d = asdict(self)
        d["notes"] = list(self.notes)
        return d


def feature_stats(features: np.ndarray | torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Mean (d,) and covariance (d, d) of features [N, d] in float64 (np.cov, rowvar=False)."""
    if isinstance(features, torch.Tensor):
        features = features.detach().cpu().double().numpy()
    x = np.asarray(features, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"features must be [N, d], got shape {x.shape}")
    if x.shape[0] < 2:
        raise ValueError(f"a covariance needs at least 2 feature rows, got {x.shape[0]}")
    return x.mean(axis=0), np.atleast_2d(np.cov(x, rowvar=False))


def frechet_distance(
    mu1: np.ndarray,
    sigma1: np.ndarray,
    mu2: np.ndarray,
    sigma2: np.ndarray,
    eps: float = 1e-6,
    imag_atol: float = 1e-3,
) -> float:
    """Fréchet distance between N(mu1, sigma1) and N(mu2, sigma2), in float64 with scipy's sqrtm.

    As the release does: if sqrtm(sigma1 @ sigma2) is not finite, retry with eps*I added to both
    covariances (with a RuntimeWarning). A complex square root (rounding on a near-singular
    product) keeps its real part when every diagonal imaginary part is within `imag_atol`;
    otherwise a ValueError is raised naming the largest imaginary component.
    """
    mu1 = np.atleast_1d(np.asarray(mu1, dtype=np.float64))
    mu2 = np.atleast_1d(np.asarray(mu2, dtype=np.float64))
    sigma1 = np.atleast_2d(np.asarray(sigma1, dtype=np.float64))
    sigma2 = np.atleast_2d(np.asarray(sigma2, dtype=np.float64))
    if mu1.shape != mu2.shape:
        raise ValueError(f"mean vectors differ in shape: {mu1.shape} vs {mu2.shape}")
    d = mu1.shape[0]
    if sigma1.shape != (d, d) or sigma2.shape != (d, d):
        raise ValueError(
            f"covariances must be ({d}, {d}) for means of length {d}, "
            f"got {sigma1.shape} and {sigma2.shape}"
        )
    covmean = scipy.linalg.sqrtm(sigma1 @ sigma2)
    if not np.isfinite(covmean).all():
        warnings.warn(
            f"FID: sqrtm of the covariance product is not finite; adding {eps:g}*I to both",
            RuntimeWarning,
            stacklevel=2,
        )
        offset = eps * np.eye(d)
        covmean = scipy.linalg.sqrtm((sigma1 + offset) @ (sigma2 + offset))
    if np.iscomplexobj(covmean):
        if not np.allclose(np.diagonal(covmean).imag, 0.0, atol=imag_atol):
            worst = float(np.max(np.abs(covmean.imag)))
            raise ValueError(f"FID: sqrtm has an imaginary component of {worst:g}")
        covmean = covmean.real
    diff = mu1 - mu2
    return float(diff @ diff + np.trace(sigma1) + np.trace(sigma2) - 2.0 * np.trace(covmean))


def _to_rgb(images: torch.Tensor) -> torch.Tensor:
    """Gray images repeated to 3 channels; 3-channel images unchanged."""
    if images.shape[1] == 1:
        return images.repeat(1, 3, 1, 1)
    if images.shape[1] != 3:
        raise ValueError(f"expected 1 or 3 image channels, got {images.shape[1]}")
    return images


def _batched(
    net, images: torch.Tensor, batch_size: int, device: torch.device | str
) -> torch.Tensor:
    """Run `net` over `images` in batches without gradients; features [N, d] on the CPU."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    out = []
    with torch.no_grad():
        for start in range(0, images.shape[0], batch_size):
            x = images[start : start + batch_size].to(device=device, dtype=torch.float32)
            out.append(net(x).flatten(1).cpu())
    return torch.cat(out)


def default_inception_weights_path() -> Path:
    """Where torchvision caches Inception_V3_Weights.IMAGENET1K_V1 (torch hub dir/checkpoints)."""
    return Path(torch.hub.get_dir()) / "checkpoints" / _inception_file_name()


def _inception_file_name() -> str:
    from torchvision.models import Inception_V3_Weights

    return Path(urlparse(Inception_V3_Weights.IMAGENET1K_V1.url).path).name


class InceptionFeatures:
    """The release's 2048-d Inception-v3 pool features from torchvision weights in a local file.

    Input: bilinear resize to 299x299 (align_corners=False), gray repeated to RGB, no ImageNet
    normalisation and no transform_input (release: normalize_input=False); eval mode, no grad.
    """

    def __init__(
        self,
        weights_path: str | Path | None = None,
        device: torch.device | str = "cpu",
        batch_size: int = 32,
    ):
        from torchvision.models import inception_v3

        path = Path(weights_path) if weights_path is not None else default_inception_weights_path()
        file_name = _inception_file_name()
        if not path.is_file():
            raise FileNotFoundError(
                f"Inception-v3 weights for FID not found at {path}. FID never downloads. "
                f"On a machine with internet, run once:\n  {DOWNLOAD_COMMAND}\n"
                f"which saves {file_name} to <torch hub dir>/checkpoints/ "
                f"(torch.hub.get_dir()); copy that file to {path}, or set the config key "
                f"{WEIGHTS_KEY} to the file's path."
            )
        model = inception_v3(weights=None, aux_logits=True, init_weights=False)
        model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
        self.net = torch.nn.Sequential(*(getattr(model, n) for n in INCEPTION_TRUNK))
        self.net.requires_grad_(False)
        self.net.to(device).eval()
        self.device = device
        self.batch_size = batch_size
        self.weights_path = path
        self.weights_sha256 = hashlib.sha256(path.read_bytes()).hexdigest()
        # torch.hub names checkpoints "<name>-<sha256 prefix>.pth" and checks that prefix.
        expected = re.search(r"-([a-f0-9]+)\.", file_name)
        self.reference = bool(expected) and self.weights_sha256.startswith(expected.group(1))
        which = "IMAGENET1K_V1" if self.reference else "weights NOT IMAGENET1K_V1 (hash differs)"
        self.name = f"inception_v3 pool3 2048-d, {which}, {path}"

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        """features [N, 2048] (float32, CPU) of images [N, 1|3, H, W]."""

        def forward(x: torch.Tensor) -> torch.Tensor:
            x = F.interpolate(x, size=(299, 299), mode="bilinear", align_corners=False)
            return self.net(x)

        return _batched(forward, _to_rgb(images), self.batch_size, self.device)


def inception_features(
    weights_path: str | Path | None = None,
    device: torch.device | str = "cpu",
    batch_size: int = 32,
) -> InceptionFeatures:
    """The release's Inception-v3 extractor; weights from `weights_path` or torchvision's cache."""
    return InceptionFeatures(weights_path, device=device, batch_size=batch_size)


class ProxyFeatures:
    """A fixed-seed random 3-layer CNN (64-d pooled features) for tests and CI only."""

    reference = False

    def __init__(self, seed: int = 0, batch_size: int = 256):
        g = torch.Generator().manual_seed(int(seed))
        shapes = [(16, 3, 3, 3), (32, 16, 3, 3), (64, 32, 3, 3)]
        # He-scaled Gaussian weights so activations stay O(1) through the ReLUs.
        self.weights = [
            torch.randn(s, generator=g) * math.sqrt(2.0 / (s[1] * s[2] * s[3])) for s in shapes
        ]
        self.batch_size = batch_size
        self.name = f"proxy random CNN (seed {seed}, 64-d)"

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        """features [N, 64] (float32, CPU) of images [N, 1|3, H, W]."""

        def forward(x: torch.Tensor) -> torch.Tensor:
            for w in self.weights:
                x = F.relu(F.conv2d(x, w, stride=2, padding=1))
            return x.mean(dim=(2, 3))

        return _batched(forward, _to_rgb(images), self.batch_size, "cpu")


def proxy_features(seed: int = 0) -> ProxyFeatures:
    """A small fixed-seed random CNN extractor; its FIDs are labelled as proxies."""
    return ProxyFeatures(seed)


def _check_images(images, what: str) -> torch.Tensor:
    x = torch.as_tensor(images).detach().cpu().float()
    if x.ndim != 4:
        raise ValueError(f"{what} images must be [N, C, H, W], got shape {tuple(x.shape)}")
    if x.shape[0] < 2:
        raise ValueError(f"{what} set needs at least 2 images for a covariance, got {x.shape[0]}")
    lo, hi = float(x.min()), float(x.max())
    if lo < -1e-6 or hi > 1 + 1e-6:
        raise ValueError(f"{what} images must lie in [0, 1], got values in [{lo:g}, {hi:g}]")
    return x


def code_sample_sizes(n_synthetic: int, n_real: int, batch: int = CODE_BATCH) -> tuple[int, int]:
    """(synthetic, real) counts the release's zip of two unshuffled batch-`batch` loaders sees."""
    pairs = min(math.ceil(n_synthetic / batch), math.ceil(n_real / batch))
    return min(n_synthetic, pairs * batch), min(n_real, pairs * batch)


def fid(
    synthetic: torch.Tensor | np.ndarray,
    real: torch.Tensor | np.ndarray,
    mode: str = "code",
    *,
    extractor: FeatureExtractor,
) -> FIDResult:
    """FID of `synthetic` against `real` (both [N, C, H, W] in [0, 1]) under protocol `mode`.

    The extractor sees the scaled synthetic set first, then the scaled real set.
    """
    if mode not in MODES:
        raise ValueError(f"fid.mode must be one of {', '.join(map(repr, MODES))}; got {mode!r}")
    syn = _check_images(synthetic, "synthetic")
    ref = _check_images(real, "real")
    if syn.shape[1] != ref.shape[1]:
        raise ValueError(
            f"synthetic and real images differ in channels: {syn.shape[1]} vs {ref.shape[1]}"
        )
    is_reference = bool(getattr(extractor, "reference", False))
    name = str(getattr(extractor, "name", type(extractor).__name__))
    notes: list[str] = []
    if mode == "code":
        n_syn, n_real = code_sample_sizes(syn.shape[0], ref.shape[0])
        syn, ref = syn[:n_syn], ref[:n_real] * 2 - 1
        notes.append(
            f"release protocol: all {n_syn} synthetic images vs the first {n_real} real images "
            "in order; real mapped to [-1, 1], synthetic left in [0, 1] (the release's asymmetry)"
        )
    else:
        syn, ref = syn * 2 - 1, ref * 2 - 1
        notes.append(
            f"standard protocol: both sets mapped to [-1, 1]; biased upwards at "
            f"N_syn = {syn.shape[0]} (the paper's M <= 110)"
        )
    mu_s, sigma_s = feature_stats(extractor(syn))
    mu_r, sigma_r = feature_stats(extractor(ref))
    value = frechet_distance(mu_s, sigma_s, mu_r, sigma_r)
    comparable = is_reference and mode == "code"
    if not is_reference:
        label = PROXY_LABEL
    elif comparable:
        label = "FID (code-compat: torchvision Inception-v3 IMAGENET1K_V1, release protocol)"
    else:
        label = "FID (standard protocol), not comparable to Tables 4.4/4.5"
    return FIDResult(
        value=value,
        mode=mode,
        extractor=name,
        n_real=int(ref.shape[0]),
        n_synthetic=int(syn.shape[0]),
        comparable=comparable,
        label=label,
        notes=tuple(notes),
    )

"""FedEvg's networks (fedevg.md §2, §4; the release vaseline555/FedEvg, commit 24251ca).

`FedEvgResNet10` is the release's ResNet-10 (src/models/resnet.py, model_utils.py:381-403): the
FedEvg classifier/EBM (SiLU, spectral norm on the last layer) and the baselines' server classifier
(ReLU). `FedEvgACGAN` and `FedEvgCVAE` are FedCGAN's and FedCVAE's generative models
(src/models/acgan.py, src/models/cvae.py). Every parameter lives under `body.*` or `head.*`.

Initialisation follows the release's `init_weights` (src/utils.py:125-162), applied after the
modules are built as the release does: Conv*/ConvTranspose*/Linear weights xavier-normal (`init`
"xavier") or normal(0, gain) (`init` "normal"), their biases 0; BatchNorm2d weights normal(1,
gain) and biases 0 whatever `init` is; GroupNorm keeps torch's defaults (weight 1, bias 0).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

ACTIVATIONS = {"silu": nn.SiLU, "relu": nn.ReLU}
SPECTRAL_NORMS = ("none", "exact")
INITS = ("xavier", "normal")
GAN_SIDES = (32, 64)  # the release builds the AC-GAN for `resize` 32 or 64 only
LEAKY_SLOPE = 0.2  # the AC-GAN's LeakyReLU
DROPOUT = 0.5  # the AC-GAN discriminator's Dropout
STD_FLOOR = 1e-8  # the CVAE's std = softplus(.) + 1e-8


def _image_shape(arch: str, input_shape: tuple[int, ...]) -> tuple[int, int]:
    """(channels, side) of a square (C, H, W) input; a clear error otherwise."""
    if len(input_shape) != 3 or input_shape[1] != input_shape[2]:
        raise ValueError(f"{arch} needs a square (C, H, W) input, got input_shape {input_shape}")
    return int(input_shape[0]), int(input_shape[1])


def _choice(arch: str, key: str, value: object, valid: tuple[str, ...]) -> None:
    if value not in valid:
        raise ValueError(f"{arch}: {key} must be one of {list(valid)}, got {value!r}")


def _check_hidden(arch: str, hidden: object, multiple: int = 1) -> None:
    ok = isinstance(hidden, int) and not isinstance(hidden, bool) and hidden >= multiple
    if not (ok and hidden % multiple == 0):
        what = f"a positive multiple of {multiple}" if multiple > 1 else "a positive integer"
        raise ValueError(f"{arch}: hidden must be {what}, got {hidden!r}")


def release_init(module: nn.Module, init: str, gain: float) -> None:
    """The release's `init_weights(model, init_type, init_gain)` for `init` in INITS, in place.

    Visits modules in `Module.apply` order as the release does. The release picks layers by
    class name (prefix "Linear"/"Conv", "BatchNorm2d"); these isinstance checks pick the same
    layers of these models.
    """
    name = type(module).__name__
    _choice(name, "init", init, INITS)
    ok = isinstance(gain, (int, float)) and not isinstance(gain, bool) and gain > 0
    if not (ok and gain < float("inf")):
        raise ValueError(f"{name}: init_gain must be a finite number > 0, got {gain!r}")

    def visit(m: nn.Module) -> None:
        if isinstance(m, nn.BatchNorm2d):
            if m.weight is not None:
                nn.init.normal_(m.weight, mean=1.0, std=gain)
                nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.Linear, nn.Conv2d, nn.ConvTranspose2d)):
            if init == "xavier":
                nn.init.xavier_normal_(m.weight, gain=gain)
            else:
                nn.init.normal_(m.weight, mean=0.0, std=gain)
            if m.bias is not None:
                nn.init.zeros_(m.bias)

    with torch.no_grad():
        module.apply(visit)


def one_hot(labels: torch.Tensor, num_classes: int, dtype: torch.dtype) -> torch.Tensor:
    """Integer labels (B,) as (B, num_classes) one-hot rows (a comparison: vmap-friendly)."""
    classes = torch.arange(num_classes, device=labels.device)
    return (labels.long()[:, None] == classes).to(dtype)


class SpectralLinear(nn.Linear):
    """nn.Linear whose weight is divided by its spectral norm in forward, computed exactly.

    "exact": W / sigma_max(W) with sigma_max = torch.linalg.matrix_norm(W, 2), recomputed in
    every forward from the weight passed in, so nothing is stored or mutated and the layer works
    under torch.func.functional_call and vmap. The release instead applies torch's
    `parametrizations.spectral_norm` (src/client/fedevgclient.py:106-107): a persistent power
    iteration (15 at registration, then one per training forward) estimating sigma_max, which
    the FedEvg algorithm reproduces on its clients' `head.weight` (`spectral_norm: power`,
    fedbench/algorithms/fedevg.py), keeping this layer plain. "none": a plain Linear.
    """

    def __init__(self, in_features: int, out_features: int, spectral_norm: str = "none"):
        _choice("SpectralLinear", "spectral_norm", spectral_norm, SPECTRAL_NORMS)
        super().__init__(in_features, out_features, bias=True)
        self.spectral_norm = spectral_norm

    def normalised_weight(self) -> torch.Tensor:
        """The weight the forward pass multiplies by."""
        if self.spectral_norm == "exact":
            return self.weight / torch.linalg.matrix_norm(self.weight, ord=2)
        return self.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.normalised_weight(), self.bias)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, spectral_norm={self.spectral_norm}"


class ResidualBlock(nn.Module):
    """conv3x3(s)-GN(out/2)-act-conv3x3-GN(out/2) + shortcut (identity, or conv1x1(s)-GN(out/2)
    when the shape changes); no activation after the sum (model_utils.py:400-403)."""

    def __init__(self, cin: int, cout: int, stride: int, activation: str):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
            nn.GroupNorm(cout // 2, cout),
            ACTIVATIONS[activation](),
            nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False),
            nn.GroupNorm(cout // 2, cout),
        )
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.GroupNorm(cout // 2, cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.main(x) + self.shortcut(x)


class FedEvgResNet10(nn.Module):
    """The release's ResNet-10 (fedevg.md §4): stem conv3x3-GN(h/4)-act, one ResidualBlock per
    stage (widths h, 2h, 4h, 8h; strides 1, 2, 2, 2), GN(h groups)-act-Flatten (no pooling) as
    `body`, and `head` = Linear(side'^2 * 8h -> C), side' = the final feature-map side
    (side/8 for the release's 32 and 64 px inputs; the release writes (resize // 8)^2).

    activation: "silu" (FedEvg, the release's `--penult_spectral_norm`) or "relu" (the baselines'
    server classifier). spectral_norm: on `head` only, "none" or "exact" (see SpectralLinear).
    init/init_gain: the release's `--init_type`/`--init_gain` (xavier, 1.0 for FedEvg/FedCVAE;
    the FedCGAN scripts pass normal, 0.02, which the release also applies to this classifier).
    """

    def __init__(
        self,
        input_shape: tuple[int, ...],
        num_classes: int,
        hidden: int = 64,
        activation: str = "silu",
        spectral_norm: str = "none",
        init: str = "xavier",
        init_gain: float = 1.0,
    ):
        super().__init__()
        arch = "fedevg_resnet10"
        channels, side = _image_shape(arch, input_shape)
        _check_hidden(arch, hidden, multiple=4)  # GroupNorm(h/4 groups) in the stem
        _choice(arch, "activation", activation, tuple(ACTIVATIONS))
        _choice(arch, "spectral_norm", spectral_norm, SPECTRAL_NORMS)
        widths = (hidden, 2 * hidden, 4 * hidden, 8 * hidden)
        strides = (1, 2, 2, 2)
        blocks, cin = [], hidden
        for cout, stride in zip(widths, strides, strict=True):
            blocks.append(ResidualBlock(cin, cout, stride, activation))
            cin = cout
            side = (side - 1) // stride + 1  # conv3x3, padding 1
        self.body = nn.Sequential(
            nn.Conv2d(channels, hidden, 3, stride=1, padding=1, bias=False),
            nn.GroupNorm(hidden // 4, hidden),
            ACTIVATIONS[activation](),
            *blocks,
            nn.GroupNorm(hidden, cin),
            ACTIVATIONS[activation](),
            nn.Flatten(),
        )
        self.head = SpectralLinear(side * side * cin, num_classes, spectral_norm)
        release_init(self, init, init_gain)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class ACGANGenerator(nn.Module):
    """z in R^{2h} and a label -> image in [-1, 1] (acgan.py:14-36): [z, onehot(y)] as a 1x1
    map, ConvT(4h, k4 s1 p0)-BN-LReLU, ConvT(2h)-BN-LReLU, [64 px: ConvT(2h)-BN-LReLU],
    ConvT(h)-BN-LReLU, ConvT(C)-Tanh; every ConvT k4 s2 p1 after the first, none with a bias."""

    def __init__(
        self, channels: int, side: int, hidden: int, num_classes: int, running_stats: bool
    ):
        super().__init__()
        self.noise_dim = 2 * hidden
        self.num_classes = num_classes
        widths = [4 * hidden, 2 * hidden] + ([2 * hidden] if side == 64 else []) + [hidden]
        layers: list[nn.Module] = []
        cin = self.noise_dim + num_classes
        for i, cout in enumerate(widths):
            stride, padding = (1, 0) if i == 0 else (2, 1)
            layers += [
                nn.ConvTranspose2d(cin, cout, 4, stride, padding, bias=False),
                nn.BatchNorm2d(cout, track_running_stats=running_stats),
                nn.LeakyReLU(LEAKY_SLOPE),
            ]
            cin = cout
        layers += [nn.ConvTranspose2d(cin, channels, 4, 2, 1, bias=False), nn.Tanh()]
        self.net = nn.Sequential(*layers)

    def forward(self, noise: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        z = torch.cat([noise, one_hot(labels, self.num_classes, noise.dtype)], dim=1)
        return self.net(z[:, :, None, None])


class ACGANDiscriminator(nn.Module):
    """image -> (real/fake logit (B, 1), class logits (B, C)) (acgan.py:38-67): Conv(h)-LReLU-
    Drop, Conv(2h)-BN-LReLU-Drop, Conv(4h)-BN-LReLU-Drop, [64 px: Conv(4h)-BN-LReLU-Drop] (k4 s2
    p1), Conv(4h, k4 s1 p0)-Drop, Flatten, Linear(4h -> 1 + C); convs without bias."""

    def __init__(
        self, channels: int, side: int, hidden: int, num_classes: int, running_stats: bool
    ):
        super().__init__()
        widths = [hidden, 2 * hidden, 4 * hidden] + ([4 * hidden] if side == 64 else [])
        layers: list[nn.Module] = []
        cin = channels
        for i, cout in enumerate(widths):
            layers.append(nn.Conv2d(cin, cout, 4, 2, 1, bias=False))
            if i > 0:
                layers.append(nn.BatchNorm2d(cout, track_running_stats=running_stats))
            layers += [nn.LeakyReLU(LEAKY_SLOPE), nn.Dropout(DROPOUT)]
            cin = cout
        layers += [
            nn.Conv2d(cin, 4 * hidden, 4, 1, 0, bias=False),
            nn.Dropout(DROPOUT),
            nn.Flatten(),
            nn.Linear(4 * hidden, 1 + num_classes),
        ]
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.net(x)
        return out[:, :1], out[:, 1:]


class FedEvgACGAN(nn.Module):
    """FedCGAN's AC-GAN (fedevg.md §2): generator `body`, discriminator `head`, in one module
    because FedCGAN averages G and D together as one parameter set.

    forward(x) is the discriminator's auxiliary classifier (class logits, (B, C)); `discriminate`
    adds the real/fake logit, `generate(noise, labels)` runs G on noise in R^{2h} (the release
    draws U(-1, 1)), `sample(labels)` draws that noise. Under torch.func, call the part itself:
    functional_call(model.body, {k[5:]: v for k, v in params.items() if k.startswith("body.")},
    (noise, labels)). BatchNorm keeps running statistics as the release does; running_stats=False
    uses batch statistics in evaluation too (pure forward passes).
    Init (release scripts): normal(0, 0.02) weights, BatchNorm weights normal(1, 0.02).
    """

    def __init__(
        self,
        input_shape: tuple[int, ...],
        num_classes: int,
        hidden: int = 64,
        init: str = "normal",
        init_gain: float = 0.02,
        running_stats: bool = True,
    ):
        super().__init__()
        arch = "fedevg_acgan"
        channels, side = _image_shape(arch, input_shape)
        if side not in GAN_SIDES:
            raise ValueError(
                f"{arch}: input side must be one of {list(GAN_SIDES)} (the release's 32 and 64 "
                f"px AC-GANs), got input_shape {input_shape}; resize the dataset"
            )
        _check_hidden(arch, hidden)
        self.body = ACGANGenerator(channels, side, hidden, num_classes, running_stats)
        self.head = ACGANDiscriminator(channels, side, hidden, num_classes, running_stats)
        release_init(self, init, init_gain)

    @property
    def generator(self) -> ACGANGenerator:
        return self.body

    @property
    def discriminator(self) -> ACGANDiscriminator:
        return self.head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(x)[1]

    def discriminate(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.head(x)

    def generate(self, noise: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.body(noise, labels)

    def sample(
        self, labels: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Images for `labels` from noise ~ U(-1, 1)^{2h} (fedcganserver.py:171)."""
        shape = (len(labels), self.body.noise_dim)
        noise = torch.rand(shape, generator=generator, device=labels.device) * 2.0 - 1.0
        return self.body(noise, labels)


class CVAEEncoder(nn.Module):
    """image -> (mu, std) (cvae.py:13-34): four Conv(k4 s2 p1)-BN-ReLU (widths h, h, 2h, 4h),
    Flatten, Linear(4h * (side/16)^2 -> 2 * latent); std = softplus(second half) + 1e-8."""

    def __init__(self, channels: int, side: int, hidden: int, latent: int, running_stats: bool):
        super().__init__()
        layers: list[nn.Module] = []
        cin = channels
        for cout in (hidden, hidden, 2 * hidden, 4 * hidden):
            layers += [
                nn.Conv2d(cin, cout, 4, 2, 1),
                nn.BatchNorm2d(cout, track_running_stats=running_stats),
                nn.ReLU(),
            ]
            cin = cout
        layers += [nn.Flatten(), nn.Linear(cin * (side // 16) ** 2, 2 * latent)]
        self.net = nn.Sequential(*layers)
        self.latent = latent

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.net(x)
        mu, raw = out[:, : self.latent], out[:, self.latent :]
        return mu, F.softplus(raw) + STD_FLOOR


class CVAEDecoder(nn.Module):
    """(z, label) -> image in [0, 1] (cvae.py:36-57): Linear(latent + C -> 4h * (side/16)^2),
    reshape, ReLU, ConvT(2h)-BN-ReLU, ConvT(h)-BN-ReLU, ConvT(h)-BN-ReLU, ConvT(C)-Sigmoid
    (all k4 s2 p1, with biases)."""

    def __init__(
        self,
        channels: int,
        side: int,
        hidden: int,
        num_classes: int,
        latent: int,
        running_stats: bool,
    ):
        super().__init__()
        self.num_classes = num_classes
        s = side // 16
        layers: list[nn.Module] = [
            nn.Linear(latent + num_classes, 4 * hidden * s * s),
            nn.Unflatten(1, (4 * hidden, s, s)),
            nn.ReLU(),
        ]
        cin = 4 * hidden
        for cout in (2 * hidden, hidden, hidden):
            layers += [
                nn.ConvTranspose2d(cin, cout, 4, 2, 1),
                nn.BatchNorm2d(cout, track_running_stats=running_stats),
                nn.ReLU(),
            ]
            cin = cout
        layers += [nn.ConvTranspose2d(cin, channels, 4, 2, 1), nn.Sigmoid()]
        self.net = nn.Sequential(*layers)

    def forward(self, z: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([z, one_hot(labels, self.num_classes, z.dtype)], dim=1))


class FedEvgCVAE(nn.Module):
    """FedCVAE's conditional VAE (fedevg.md §2): encoder `body` (image only, not
    label-conditioned), decoder `head` ([z, onehot(y)] -> image), latent size 2h.

    forward(x, labels, eps=None) -> (reconstruction, mu, std) with z = mu + std * eps
    (eps ~ N(0, I) drawn from torch's global generator when not given). `encode`, `decode` and
    `sample(labels)` (z ~ N(0, I), fedcvaeserver.py:171) run the parts. Input sides must be
    multiples of 16. Init: the release's defaults (its FedCVAE scripts pass no --init_type):
    xavier-normal gain 1 and, as `init_weights` does for any BatchNorm2d, BN weights normal(1, 1).
    """

    def __init__(
        self,
        input_shape: tuple[int, ...],
        num_classes: int,
        hidden: int = 64,
        init: str = "xavier",
        init_gain: float = 1.0,
        running_stats: bool = True,
    ):
        super().__init__()
        arch = "fedevg_cvae"
        channels, side = _image_shape(arch, input_shape)
        if side < 16 or side % 16:
            raise ValueError(
                f"{arch}: input side must be a multiple of 16 (four stride-2 convolutions), "
                f"got input_shape {input_shape}; resize the dataset (the release uses 32 or 64)"
            )
        _check_hidden(arch, hidden)
        self.latent = 2 * hidden
        self.body = CVAEEncoder(channels, side, hidden, self.latent, running_stats)
        self.head = CVAEDecoder(channels, side, hidden, num_classes, self.latent, running_stats)
        release_init(self, init, init_gain)

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.body(x)

    def decode(self, z: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.head(z, labels)

    def forward(
        self, x: torch.Tensor, labels: torch.Tensor, eps: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        mu, std = self.body(x)
        eps = torch.randn_like(mu) if eps is None else eps
        return self.head(mu + std * eps, labels), mu, std

    def sample(
        self, labels: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Images for `labels` decoded from z ~ N(0, I)."""
        z = torch.randn((len(labels), self.latent), generator=generator, device=labels.device)
        return self.head(z, labels)

"""AAggFF's networks (aaggff.md §9.5, cross-checked with the release's src/models).

Berka and Heart use the registry's `linear` (logistic regression with a bias). The training
objective (`training.objective`, fedbench/objectives.py) sets the head's width: binary
tasks end in the release's one logit under `bce_logit` (the catalog's default for Berka, Heart,
MQP, CelebA; spec §13.9, §15.12), or in the thesis's 2 softmax logits under `cross_entropy` (the
`-softmax` catalog entries). ISIC trains `class_weighted_ce` (§13.10), Reddit `token_ce` over
every position with StackedLSTM's `output: all` (§15.11).
Dropout defaults to 0 in every model here: the engine has no train/eval mode switch and no
per-client dropout randomness under vmap, so the release's Dropout(0.1) layers are off and the
catalog says so (`dropout: 0.0`). BatchNorm layers use batch statistics (no running buffers), as
in the SuPerFed models, so the forward pass stays pure.

Pre-trained weights (DistilBERT, EfficientNet-B0) are read from local files only, never
downloaded while building a model: with `pretrained: true` and no file the build fails, naming the
file and where to get it; `pretrained: false` (random initialisation) must be asked for.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from fedbench.models.recurrent import LSTM_IMPLS, unrolled_lstm

DISTILBERT_URL = "https://huggingface.co/distilbert-base-uncased/resolve/main/pytorch_model.bin"
DISTILBERT_FILE = "resources/pretrained/distilbert-base-uncased/pytorch_model.bin"


def _no_running_stats(module: nn.Module) -> nn.Module:
    """Every BatchNorm in `module` switched to batch statistics (running buffers dropped)."""
    for m in module.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.track_running_stats = False
            m.running_mean = m.running_var = m.num_batches_tracked = None
    return module


def xavier_reinit(module: nn.Module, gain: float = 1.0) -> None:
    """The release's init_weights('xavier', 1.0): Xavier-normal Linear/Conv weights, zero biases,
    BatchNorm weights ~ N(1, gain), zero BatchNorm biases (spec §9.5)."""
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d)):
            nn.init.xavier_normal_(m.weight, gain)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.modules.batchnorm._BatchNorm) and m.affine:
            nn.init.normal_(m.weight, 1.0, gain)
            nn.init.zeros_(m.bias)


def _weights_file(path: str | Path, what: str, url: str) -> Path:
    path = Path(path)
    if not path.is_file():
        raise ValueError(
            f"{what}: pretrained weights {path} are missing. Download {url} and place it at "
            f"{path}, or set the model parameter `pretrained: false` for a random initialisation"
        )
    return path


class LeafCNN(nn.Module):
    """LEAF's CelebA ConvNet as the release builds it: 4 x [Conv3x3(32, no bias, pad 1) ->
    GroupNorm -> MaxPool(2, pad 1) -> ReLU], AdaptiveAvgPool(5, 5), Linear(32 * 25 -> C)."""

    def __init__(
        self,
        input_shape: tuple[int, ...],
        num_classes: int,
        channels: int = 32,
        groups: tuple[int, ...] = (32, 16, 8, 4),
    ):
        super().__init__()
        if len(input_shape) != 3:
            raise ValueError(f"leaf_cnn needs (C, H, W) input, got {input_shape}")
        layers: list[nn.Module] = []
        c = input_shape[0]
        for g in groups:
            layers += [
                nn.Conv2d(c, channels, 3, padding=1, bias=False),
                nn.GroupNorm(g, channels),
                nn.MaxPool2d(2, padding=1),
                nn.ReLU(),
            ]
            c = channels
        layers += [nn.AdaptiveAvgPool2d((5, 5)), nn.Flatten()]
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(channels * 25, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class M5(nn.Module):
    """M5 (Dai et al. 2017) on raw 16 kHz audio: Conv1d(80, stride 4) and three Conv1d(3), each
    with BatchNorm, ReLU and MaxPool(4); global average pool; Linear(256 -> C)."""

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, width: int = 64):
        super().__init__()
        if len(input_shape) != 2:
            raise ValueError(f"m5 needs (channels, samples) input, got {input_shape}")
        c = input_shape[0]
        plan = [(c, width, 80, 4, 0), (width, width, 3, 1, 1)]
        plan += [(width, 2 * width, 3, 1, 1), (2 * width, 4 * width, 3, 1, 1)]
        layers: list[nn.Module] = []
        for cin, cout, k, s, p in plan:
            layers += [
                nn.Conv1d(cin, cout, k, stride=s, padding=p),
                nn.BatchNorm1d(cout, track_running_stats=False),
                nn.ReLU(),
                nn.MaxPool1d(4),
            ]
        layers += [nn.AdaptiveAvgPool1d(1), nn.Flatten()]
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(4 * width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class StackedLSTM(nn.Module):
    """The release's Reddit model: Embedding(10000, 200) -> LSTM(200 -> 256, 2 layers) ->
    Linear(256 -> 10000) at every step (spec §9.5, §15.11).

    Input (N, 2, L) from the `leaf_reddit` source: row 0 input ids, row 1 target ids.
    `output: last_word` (default) returns (N, V) logits at each sequence's last position whose
    target is a word (id >= 4), which is the label the source stores; `all` returns (N, V, L)
    for the `token_ce` objective (the release's loss, the catalog's Reddit default). `lstm_impl`
    as NextCharLSTM's.
    """

    def __init__(
        self,
        input_shape: tuple[int, ...],
        num_classes: int,
        vocab_size: int = 10000,
        embed_dim: int = 200,
        hidden: int = 256,
        layers: int = 2,
        output: str = "last_word",
        lstm_impl: str = "auto",
    ):
        super().__init__()
        if len(input_shape) != 2 or input_shape[0] != 2:
            raise ValueError(f"stacked_lstm needs (2, seq_len) input, got {input_shape}")
        if output not in ("last_word", "all"):
            raise ValueError(f"stacked_lstm: output must be last_word|all, got {output!r}")
        if lstm_impl not in LSTM_IMPLS:
            raise ValueError(f"stacked_lstm: lstm_impl must be one of {LSTM_IMPLS}")
        self.output, self.lstm_impl = output, lstm_impl
        self.body = nn.Module()
        self.body.embedding = nn.Embedding(vocab_size, embed_dim)
        self.body.lstm = nn.LSTM(embed_dim, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ids, targets = x[:, 0].long(), x[:, 1].long()
        e = self.body.embedding(ids)
        if self.lstm_impl == "native":
            states = self.body.lstm(e)[0]
        else:
            states = unrolled_lstm(self.body.lstm, e)[0]
        if self.output == "all":
            return self.head(states).transpose(1, 2)
        word = targets >= 4
        steps = torch.arange(word.shape[1], device=x.device)
        last = torch.where(word, steps, torch.zeros_like(steps)).amax(dim=1)
        picked = torch.gather(states, 1, last[:, None, None].expand(-1, 1, states.shape[2]))
        return self.head(picked[:, 0])


class EfficientNetISIC(nn.Module):
    """ISIC's EfficientNet-B0 (torchvision): features -> AdaptiveAvgPool(7, 7) -> flatten ->
    Dropout -> Linear(1280 * 49 -> C) (spec §9.5).

    `pretrained: true` loads torchvision's ImageNet weights (IMAGENET1K_V1) from torch hub's
    checkpoint folder, never downloading them here; BatchNorm then uses batch statistics (the
    pre-trained running statistics are dropped, see the module note). Stochastic depth is off.
    `reinit_after_load` applies the release's Xavier re-initialisation after loading (spec §15.4).
    `feature_blocks` < 9 keeps only the first blocks of torchvision's 9 (stem, 7 stages, 1x1
    conv): a cheap truncated network for smoke runs, not the thesis's model.
    """

    def __init__(
        self,
        input_shape: tuple[int, ...],
        num_classes: int,
        pretrained: bool = True,
        reinit_after_load: bool = False,
        dropout: float = 0.0,
        feature_blocks: int = 9,
    ):
        super().__init__()
        from torchvision.models import EfficientNet_B0_Weights, efficientnet_b0

        if len(input_shape) != 3 or input_shape[0] != 3:
            raise ValueError(f"efficientnet_isic needs (3, H, W) input, got {input_shape}")
        if not 1 <= feature_blocks <= 9:
            raise ValueError(
                f"efficientnet_isic: feature_blocks must be 1..9, got {feature_blocks}"
            )
        if pretrained:
            weights = EfficientNet_B0_Weights.IMAGENET1K_V1
            path = Path(torch.hub.get_dir(), "checkpoints", Path(weights.url).name)
            path = _weights_file(path, "efficientnet_isic", weights.url)
        net = efficientnet_b0(weights=None, stochastic_depth_prob=0.0)
        if pretrained:
            net.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
        features = net.features[:feature_blocks]
        width = [m for m in features[-1].modules() if isinstance(m, nn.Conv2d)][-1].out_channels
        self.body = nn.Sequential(features, nn.AdaptiveAvgPool2d((7, 7)), nn.Flatten())
        self.head = nn.Sequential(nn.Dropout(dropout), nn.Linear(width * 49, num_classes))
        _no_running_stats(self.body)
        if reinit_after_load:
            xavier_reinit(self)
        self.pretrained = pretrained

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class _Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q_lin, self.k_lin = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.v_lin, self.out_lin = nn.Linear(dim, dim), nn.Linear(dim, dim)

    def forward(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        n, t, d = h.shape

        def split(z: torch.Tensor) -> torch.Tensor:
            return z.view(n, t, self.heads, d // self.heads).transpose(1, 2)

        q, k, v = split(self.q_lin(h)), split(self.k_lin(h)), split(self.v_lin(h))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // self.heads)
        scores = scores.masked_fill(mask[:, None, None, :] == 0, torch.finfo(scores.dtype).min)
        ctx = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(n, t, d)
        return self.out_lin(ctx)


class _FFN(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.lin1, self.lin2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.lin2(F.gelu(self.lin1(h)))


class _Block(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int):
        super().__init__()
        self.attention = _Attention(dim, heads)
        self.sa_layer_norm = nn.LayerNorm(dim, eps=1e-12)
        self.ffn = _FFN(dim, hidden)
        self.output_layer_norm = nn.LayerNorm(dim, eps=1e-12)

    def forward(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.sa_layer_norm(h + self.attention(h, mask))
        return self.output_layer_norm(h + self.ffn(h))


class _Embeddings(nn.Module):
    def __init__(self, vocab: int, dim: int, positions: int):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, dim, padding_idx=0)
        self.position_embeddings = nn.Embedding(positions, dim)
        self.LayerNorm = nn.LayerNorm(dim, eps=1e-12)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device)
        return self.LayerNorm(self.word_embeddings(ids) + self.position_embeddings(pos))


class _Transformer(nn.Module):
    def __init__(self, layers: int, dim: int, heads: int, hidden: int):
        super().__init__()
        self.layer = nn.ModuleList(_Block(dim, heads, hidden) for _ in range(layers))


class _DistilBert(nn.Module):
    """DistilBERT's encoder with the module names of Hugging Face's `distilbert.*` weights."""

    def __init__(self, vocab: int, dim: int, layers: int, heads: int, hidden: int, positions: int):
        super().__init__()
        self.embeddings = _Embeddings(vocab, dim, positions)
        self.transformer = _Transformer(layers, dim, heads, hidden)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.embeddings(ids)
        for block in self.transformer.layer:
            h = block(h, mask)
        return h


class DistilBertClassifier(nn.Module):
    """MQP's DistilBERT (6 layers, 768 wide, 12 heads, FFN 3072, GELU; Sanh et al. 2019) with
    the thesis's head on the [CLS] state: Linear(768, 768) -> ReLU -> Dropout -> Linear(768, C).

    Input (N, 2, L) from the `mqp` source: token ids and attention mask. fedbench's own
    implementation (no `transformers` here); `pretrained: true` loads Hugging Face's
    distilbert-base-uncased `pytorch_model.bin` from `weights` (keys `distilbert.*`; the
    masked-LM head in that file is ignored). All layers train, as in the thesis;
    `reinit_after_load` reproduces the release's Xavier re-initialisation (spec §9.5, §15.4).
    """

    def __init__(
        self,
        input_shape: tuple[int, ...],
        num_classes: int,
        pretrained: bool = True,
        weights: str = DISTILBERT_FILE,
        reinit_after_load: bool = False,
        dropout: float = 0.0,
        vocab_size: int = 30522,
        dim: int = 768,
        layers: int = 6,
        heads: int = 12,
        hidden: int = 3072,
        positions: int = 512,
    ):
        super().__init__()
        if len(input_shape) != 2 or input_shape[0] != 2 or input_shape[1] > positions:
            raise ValueError(
                f"distilbert needs (2, seq_len <= {positions}) input, got {input_shape}"
            )
        self.body = _DistilBert(vocab_size, dim, layers, heads, hidden, positions)
        self.head = nn.Sequential(
            nn.Linear(dim, dim), nn.ReLU(), nn.Dropout(dropout), nn.Linear(dim, num_classes)
        )
        if pretrained:
            self.load_huggingface(_weights_file(weights, "distilbert", DISTILBERT_URL))
        if reinit_after_load:
            xavier_reinit(self)
        self.pretrained = pretrained

    def load_huggingface(self, path: Path) -> None:
        """Copy the `distilbert.*` tensors of a Hugging Face state dict into the body."""
        state = torch.load(path, map_location="cpu", weights_only=True)
        body = {k[len("distilbert.") :]: v for k, v in state.items() if k.startswith("distilbert.")}
        body = {k: v for k, v in body.items() if not k.endswith("position_ids")}
        missing, unexpected = self.body.load_state_dict(body, strict=False)
        if missing or unexpected:
            raise ValueError(
                f"distilbert: {path} does not fit (missing {missing[:5]}, unexpected "
                f"{unexpected[:5]}); is it distilbert-base-uncased's pytorch_model.bin?"
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ids, mask = x[:, 0].long(), x[:, 1]
        return self.head(self.body(ids, mask)[:, 0])


# MobileViT variants (Mehta & Rastegari, ICLR 2022, Table 4 / appendix): stem and stage widths,
# transformer widths d of the three MobileViT blocks, final 1x1 width, MV2 expansion.
MOBILEVIT = {
    "xxs": {"widths": (16, 16, 24, 48, 64, 80), "dims": (64, 80, 96), "last": 320, "expand": 2},
    "xs": {"widths": (16, 32, 48, 64, 80, 96), "dims": (96, 120, 144), "last": 384, "expand": 4},
    "s": {"widths": (16, 32, 64, 96, 128, 160), "dims": (144, 192, 240), "last": 640, "expand": 4},
}


def _conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, act: bool = True):
    layers = [
        nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout, track_running_stats=False),
    ]
    return nn.Sequential(*layers, nn.SiLU()) if act else nn.Sequential(*layers)


class _MV2(nn.Module):
    """MobileNetV2 inverted residual: 1x1 expand, 3x3 depthwise (stride), 1x1 project."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        mid = cin * expand
        self.residual = stride == 1 and cin == cout
        self.block = nn.Sequential(
            _conv_bn(cin, mid, 1),
            _conv_bn(mid, mid, 3, stride, groups=mid),
            _conv_bn(mid, cout, 1, act=False),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x) if self.residual else self.block(x)


class _Encoder(nn.Module):
    """Pre-norm transformer layer: LayerNorm -> multi-head attention, LayerNorm -> FFN (SiLU)."""

    def __init__(self, dim: int, heads: int, ffn: int):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.ffn = nn.Sequential(nn.Linear(dim, ffn), nn.SiLU(), nn.Linear(ffn, dim))
        self.heads = heads

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        *lead, t, d = z.shape
        q, k, v = self.qkv(self.norm1(z)).view(*lead, t, 3, self.heads, d // self.heads).unbind(-3)
        q, k, v = (u.transpose(-2, -3) for u in (q, k, v))  # (..., heads, t, d_head)
        att = (q @ k.transpose(-1, -2) / math.sqrt(d // self.heads)).softmax(dim=-1)
        z = z + self.proj((att @ v).transpose(-2, -3).reshape(*lead, t, d))
        return z + self.ffn(self.norm2(z))


class _MobileViTBlock(nn.Module):
    """Local 3x3 + 1x1 convs, unfold into 2x2 patches, L transformer layers over the patches
    (one sequence per pixel position within a patch), fold, 1x1 back, fuse with the input."""

    def __init__(self, channels: int, dim: int, depth: int, heads: int = 4, patch: int = 2):
        super().__init__()
        self.patch = patch
        self.local = nn.Sequential(
            _conv_bn(channels, channels, 3), nn.Conv2d(channels, dim, 1, bias=False)
        )
        self.encoders = nn.ModuleList(_Encoder(dim, heads, 2 * dim) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.project = _conv_bn(dim, channels, 1)
        self.fuse = _conv_bn(2 * channels, channels, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.local(x)
        n, d, h, w = y.shape
        p = self.patch
        if h % p or w % p:
            raise ValueError(f"mobilevit: feature map {h}x{w} is not divisible by patch {p}")
        z = y.reshape(n, d, h // p, p, w // p, p).permute(0, 3, 5, 2, 4, 1)
        z = z.reshape(n, p * p, (h // p) * (w // p), d)
        for enc in self.encoders:
            z = enc(z)
        z = self.norm(z).reshape(n, p, p, h // p, w // p, d).permute(0, 5, 3, 1, 4, 2)
        y = self.project(z.reshape(n, d, h, w))
        return self.fuse(torch.cat([x, y], dim=1))


class MobileViT(nn.Module):
    """MobileViT (Mehta & Rastegari 2022) for Table 3.10's TinyImageNet (64 x 64 input), the
    model of the AAggFF release (spec §9.5; the thesis names none). The release's variant is not
    known here: `variant` xxs | xs | s (default s, the paper's main model). fedbench's own
    implementation of the paper's architecture: stem conv3x3/2, MV2 stages, three MobileViT
    blocks (depths 2, 4, 3; 2 x 2 patches; 4 heads; FFN 2d), 1x1 conv, global pool, Linear.
    `width_mult` scales every width (to multiples of 8): < 1 is a cheap network for smoke runs.
    """

    def __init__(
        self,
        input_shape: tuple[int, ...],
        num_classes: int,
        variant: str = "s",
        width_mult: float = 1.0,
    ):
        super().__init__()
        if variant not in MOBILEVIT:
            raise ValueError(f"mobilevit: variant must be one of {sorted(MOBILEVIT)}")
        if not width_mult > 0:
            raise ValueError(f"mobilevit: width_mult must be > 0, got {width_mult}")
        if len(input_shape) != 3 or input_shape[1] % 64 or input_shape[2] % 64:
            # stride 32 at the last block, whose 2 x 2 patches need an even map
            raise ValueError(f"mobilevit needs (C, H, W) with H, W multiples of 64: {input_shape}")
        cfg = MOBILEVIT[variant]

        def scaled(w: int) -> int:
            # multiples of 8 keep each transformer width divisible by its 4 heads
            return max(8, 8 * round(w * width_mult / 8))

        c0, c1, c2, c3, c4, c5 = (scaled(w) for w in cfg["widths"])
        d3, d4, d5 = (scaled(d) for d in cfg["dims"])
        last = scaled(cfg["last"])
        e = cfg["expand"]
        self.body = nn.Sequential(
            _conv_bn(input_shape[0], c0, 3, 2),
            _MV2(c0, c1, 1, e),
            _MV2(c1, c2, 2, e),
            _MV2(c2, c2, 1, e),
            _MV2(c2, c2, 1, e),
            _MV2(c2, c3, 2, e),
            _MobileViTBlock(c3, d3, 2),
            _MV2(c3, c4, 2, e),
            _MobileViTBlock(c4, d4, 4),
            _MV2(c4, c5, 2, e),
            _MobileViTBlock(c5, d5, 3),
            _conv_bn(c5, last, 1),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.head = nn.Linear(last, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))

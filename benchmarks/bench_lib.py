"""Workloads shared by the benchmarks and the summary: data, models, FLOP counts, cases."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from fedbench.algorithms import build_algorithm
from fedbench.data.isic import CLASSES as ISIC_CLASSES
from fedbench.data.leaf_aaggff import SEQ_LEN as REDDIT_SEQ_LEN
from fedbench.data.leaf_aaggff import VOCAB_SIZE as REDDIT_VOCAB
from fedbench.data.mqp import VOCAB_SIZE as BERT_VOCAB
from fedbench.data.speechcommands import NUM_WORDS as SPEECH_WORDS
from fedbench.data.speechcommands import RATE as SPEECH_RATE
from fedbench.engine.build import Run
from fedbench.engine.federation import Federation
from fedbench.engine.functional import make_apply, params_of
from fedbench.engine.loop import make_executor, run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.models import GENERATIVE, MODELS, build_model
from fedbench.rng import Streams

# BENCH_DEVICE=cuda runs the round, step and memory benchmarks on that device (README, "On a GPU"):
# data and models live there and every timed call ends with a device synchronise, so its time
# covers the kernels it queued. Default: the CPU.
DEVICE = torch.device(os.environ.get("BENCH_DEVICE", "cpu"))


def synced(fn):
    """`fn`, followed by a synchronise of DEVICE when that is a GPU (kernels run asynchronously)."""
    if DEVICE.type != "cuda":
        return fn

    def call(*args, **kwargs):
        out = fn(*args, **kwargs)
        torch.cuda.synchronize(DEVICE)
        return out

    return call


# The round the targets are stated on: FedAvg, 50 samples per client, E = 1, B = 10.
SAMPLES_PER_CLIENT = 50
BATCH = 10
EPOCHS = 1
LR = 0.01
NUM_CLASSES = 10


@dataclass(frozen=True)
class ModelInput:
    """What one registered model is benchmarked on: the per-sample shape, the kind of values
    (a key of SAMPLERS), the number of classes and the model parameters it is built with."""

    shape: tuple[int, ...]
    values: str = "pixels"
    classes: int = NUM_CLASSES
    params: tuple[tuple[str, object], ...] = ()


def _pixels(shape: tuple[int, ...], n: int, rng: np.random.Generator) -> np.ndarray:
    return rng.random((n, *shape), dtype=np.float32)


def _char_ids(shape: tuple[int, ...], n: int, rng: np.random.Generator) -> np.ndarray:
    return rng.integers(0, 50, (n, *shape)).astype(np.float32)


def _waveform(shape: tuple[int, ...], n: int, rng: np.random.Generator) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, (n, *shape)).astype(np.float32)


def _reddit(shape: tuple[int, ...], n: int, rng: np.random.Generator) -> np.ndarray:
    """leaf_reddit's (2, L) rows: input word ids and the next-word targets (all words, >= 4)."""
    words = rng.integers(4, REDDIT_VOCAB, (n, shape[1] + 1))
    return np.stack([words[:, :-1], words[:, 1:]], axis=1).astype(np.float32)


def _wordpiece_pair(shape: tuple[int, ...], n: int, rng: np.random.Generator) -> np.ndarray:
    """mqp's (2, L) rows: [CLS] WordPiece ids [SEP] then padding, and the attention mask."""
    length = shape[1]
    x = np.zeros((n, *shape), dtype=np.float32)
    for i, used in enumerate(rng.integers(length // 2, length + 1, n)):
        ids = rng.integers(1996, BERT_VOCAB, used)
        ids[0], ids[-1] = 101, 102
        x[i, 0, :used], x[i, 1, :used] = ids, 1.0
    return x


# Values by kind: pixels in [0, 1) (also pre-embedded tokens), character ids (as floats), raw audio
# in [-1, 1), and the two-row token inputs of the leaf_reddit and mqp sources.
SAMPLERS = {
    "pixels": _pixels,
    "char_ids": _char_ids,
    "waveform": _waveform,
    "reddit": _reddit,
    "wordpiece_pair": _wordpiece_pair,
}

# The input of every registered model (test_local_step fails, naming the model, when one is
# missing). Smoke-sized samples of each model's own data at the model's full size: MNIST-sized
# images for the small CNNs/MLPs, 64 px for the ImageNet-style nets, 80 Shakespeare characters,
# 25 GloVe-50 embedded tokens (pFedBreD Sent140 LSTM), one second of 16 kHz audio (M5), Reddit's
# 10-word sequences over its 10,000-word vocabulary (StackedLSTM's default last-word output),
# 32-token question pairs (DistilBERT; the mqp source pads to 200, about 6x this step's time) and
# 64 px skin images (EfficientNet-B0; ISIC crops 200 px, about 6x), 64 px Clothing1M (ResNet-50).
# Pre-trained weights are not loaded (`pretrained: false`): the step costs the same.
INPUTS: dict[str, ModelInput] = {
    "linear": ModelInput((1, 28, 28)),
    "mlp": ModelInput((1, 28, 28)),
    "twonn": ModelInput((1, 28, 28)),
    "twocnn": ModelInput((1, 28, 28)),
    "superfed_twonn": ModelInput((1, 28, 28)),
    "superfed_twocnn": ModelInput((1, 28, 28)),
    "resnet9": ModelInput((1, 28, 28)),
    "mobilenet": ModelInput((3, 64, 64)),
    "vgg9": ModelInput((1, 28, 28)),
    "nextchar_lstm": ModelInput((80,), "char_ids"),
    "pfedbred_dnn": ModelInput((1, 28, 28)),
    "pfedbred_cnn": ModelInput((1, 28, 28)),
    "pfedbred_lstm": ModelInput((25, 50)),
    "leaf_cnn": ModelInput((1, 28, 28)),
    "m5": ModelInput((1, SPEECH_RATE), "waveform", SPEECH_WORDS),
    "stacked_lstm": ModelInput((2, REDDIT_SEQ_LEN), "reddit", REDDIT_VOCAB),
    "efficientnet_isic": ModelInput(
        (3, 64, 64), classes=len(ISIC_CLASSES), params=(("pretrained", False),)
    ),
    "distilbert": ModelInput((2, 32), "wordpiece_pair", 2, (("pretrained", False),)),
    "mobilevit": ModelInput((3, 64, 64)),
    "fedevg_resnet10": ModelInput((1, 32, 32)),
    # DQN-Fed's grid runs the CIFAR stem with 2 groups; the benchmark keeps the network it timed
    # before resnet18_gn was registered (torchvision's ImageNet stem, 32 groups, 32 x 32 inputs),
    # so its precision numbers stay comparable.
    "resnet18_gn": ModelInput((3, 32, 32), params=(("stem", "imagenet"), ("groups", 32))),
    # FedCorr's Clothing1M network (14 classes) at the 64 px the DQN-Fed grid reads (224 in the
    # release: about 12x this step's time).
    "resnet50": ModelInput((3, 64, 64), classes=14, params=(("pretrained", False),)),
}


def sample_inputs(
    shape: tuple[int, ...], n: int, rng: np.random.Generator, values: str = "pixels"
) -> np.ndarray:
    """`n` random inputs of `shape`, float32, of the kind `values` (a key of SAMPLERS)."""
    return SAMPLERS[values](shape, n, rng)


def model_input(arch: str) -> ModelInput:
    """The benchmark input of `arch` (INPUTS)."""
    if arch not in INPUTS:
        raise KeyError(
            f"model {arch!r} has no entry in benchmarks/bench_lib.py INPUTS: add its input "
            "shape, values and build parameters there"
        )
    return INPUTS[arch]


def build_for(arch: str) -> nn.Module:
    """`arch` built for its benchmark input (INPUTS), initialised from seed 0."""
    spec = model_input(arch)
    return build_model(arch, spec.shape, spec.classes, init_seed=0, **dict(spec.params))


def federation(
    num_clients: int,
    per_client: int = SAMPLES_PER_CLIENT,
    shape: tuple[int, ...] = (1, 28, 28),
    device: torch.device | str = DEVICE,
    values: str = "pixels",
    classes: int = NUM_CLASSES,
) -> Federation:
    """Random data, `per_client` training samples per client, no test splits (no evaluation)."""
    rng = np.random.default_rng(0)
    n = num_clients * per_client
    x = sample_inputs(shape, n, rng, values)
    y = rng.integers(0, classes, n)
    idx = np.arange(n).reshape(num_clients, per_client)
    return Federation.from_arrays(
        x, y, list(idx), [i[:0] for i in idx], x[:0], y[:0], classes, torch.device(device)
    )


def forward_flops(model: nn.Module, shape: tuple[int, ...], values: str = "pixels") -> int:
    """Forward FLOPs per sample: 2·in·out per Linear (per position), 2·(Cin/g)·k·Cout·out_size
    per Conv1d/Conv2d (k the kernel's size), 2·4·H·(in + H) per LSTM layer, direction and step;
    activations, pooling, norms, embedding look-ups, attention's score products (lower order at
    the benchmarked sequence lengths) and the loss are not counted. LSTMs are counted through
    nn.LSTM's forward: models with an `lstm_impl` switch run `native` for the count (the same
    arithmetic as the unrolled recurrence), then get their setting back."""
    total = 0

    def linear(mod: nn.Linear, inp, out):
        nonlocal total
        total += 2 * mod.in_features * mod.out_features * (out.numel() // out.shape[-1])

    def conv(mod: nn.Conv1d | nn.Conv2d, inp, out):
        nonlocal total
        total += 2 * (mod.in_channels // mod.groups) * math.prod(mod.kernel_size) * out.numel()

    def lstm(mod: nn.LSTM, inp, out):
        nonlocal total
        steps = inp[0].shape[1] if mod.batch_first else inp[0].shape[0]
        batch = inp[0].shape[0] if mod.batch_first else inp[0].shape[1]
        directions = 2 if mod.bidirectional else 1
        width = mod.input_size
        for _ in range(mod.num_layers):
            per_step = 2 * 4 * mod.hidden_size * (width + mod.hidden_size)
            total += directions * per_step * steps * batch
            width = directions * mod.hidden_size

    hooks = []
    for mod in model.modules():
        for kind, fn in ((nn.Linear, linear), ((nn.Conv1d, nn.Conv2d), conv), (nn.LSTM, lstm)):
            if isinstance(mod, kind):
                hooks.append(mod.register_forward_hook(fn))
    impls = {m: m.lstm_impl for m in model.modules() if getattr(m, "lstm_impl", None)}
    try:
        for m in impls:
            m.lstm_impl = "native"
        with torch.no_grad():
            x = torch.as_tensor(sample_inputs(shape, 1, np.random.default_rng(0), values))
            model(x.to(next(model.parameters()).device))
    finally:
        for m, impl in impls.items():
            m.lstm_impl = impl
        for h in hooks:
            h.remove()
    return total


def train_flops(
    model: nn.Module, shape: tuple[int, ...], samples: int, values: str = "pixels"
) -> int:
    """FLOPs of training on `samples` samples: forward + backward, backward counted as 2x forward
    (input and weight gradients of every layer, the first layer's input gradient included)."""
    return 3 * forward_flops(model, shape, values) * samples


@dataclass
class RoundCase:
    """One FedAvg round: every client of the federation trains once (E = 1, B = 10).

    `per_client` < 50 is for smoke runs (--benchmark-disable) only: the targets are stated at 50.
    """

    arch: str
    clients: int
    per_client: int = SAMPLES_PER_CLIENT

    def build(self):
        """(federation, model, config, flops) of the round."""
        shape = (1, 28, 28)
        return round_parts(build_model(self.arch, shape, NUM_CLASSES, init_seed=0), shape, self)


def round_parts(model: nn.Module, shape: tuple[int, ...], case, precision: str = "fp32"):
    """(federation, model, config, flops) of one round of `case` (its clients and per_client)."""
    fed = federation(case.clients, per_client=case.per_client, shape=shape)
    cfg = TrainConfig(
        rounds=1,
        batch_size=BATCH,
        lr=LR,
        local_epochs=EPOCHS,
        clients_per_round=case.clients,
        eval_every=10**9,
        precision=precision,
    )
    flops = train_flops(model, shape, EPOCHS * case.clients * case.per_client)
    return fed, model.to(DEVICE), cfg, flops


def engine_round(fed: Federation, model: nn.Module, cfg: TrainConfig, executor: str):
    """A callable running one fedbench round (run_rounds with rounds = 1; the test splits are
    empty, so the evaluation at the last round has nothing to evaluate). Every call starts from
    the same weights with the same executor, so after the first (a warm-up round) each times a
    round as a real run's rounds after its first: kernel paths built, buffers kept."""
    algo, apply, p0 = build_algorithm("fedavg"), make_apply(model), params_of(model)
    runner = make_executor(executor, cfg)

    def round_():
        run = Run(algo, apply, cfg, p0, executor=executor)
        return run_rounds(run, fed, Streams(0), runner=runner)

    return synced(round_)


def registered_models() -> list[str]:
    """Every classifier of the registry, in registry order (the generative networks of FedCGAN
    and FedCVAE map noise or images and labels to images: no cross-entropy step to time)."""
    return [m for m in MODELS if m not in GENERATIVE]


def gemm_flops(n: int) -> int:
    """FLOPs of an n x n by n x n matrix product."""
    return 2 * n**3


def fmt_flops(flops: float) -> str:
    """Human units: MFLOP / GFLOP."""
    return f"{flops / 1e9:.2f} GFLOP" if flops >= 1e9 else f"{flops / 1e6:.1f} MFLOP"


def precision_model(arch: str) -> tuple[nn.Module, tuple[int, ...]]:
    """(model initialised from seed 0, per-sample input shape) for the precision benchmark (on
    the CPU; round_parts moves it to DEVICE)."""
    return build_for(arch), model_input(arch).shape


@dataclass
class PrecisionCase:
    """One FedAvg round of `arch` (every client trains once, E = 1, B = 10) in `precision`."""

    arch: str
    clients: int
    per_client: int
    precision: str

    def build(self):
        """(federation, model, config, flops) of the round."""
        model, shape = precision_model(self.arch)
        return round_parts(model, shape, self, self.precision)

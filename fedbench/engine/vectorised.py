"""All clients of a round (or a chunk of them) train in lockstep over stacked parameters.

The same algorithm hooks as the sequential executor run here: `client_begin` / `client_end` once per
client, `local_loss`, `correct_grads` and `update_mask` per step through `torch.func.vmap`. Clients
whose last batch is short are padded and masked (padded samples carry weight 0); clients with fewer
steps are frozen by a per-client step factor, never fed fake data, and keep their carry (an
algorithm's `carry_updates` apply only where the client had a batch). The optimiser (SGD, momentum,
weight decay) updates the stacked tensors in place; they are the executor's own buffers, so the
hooks stay pure.

Fast path: when the algorithm's local objective is the plain data loss (it overrides neither
`local_loss` nor `data_loss`) and the model is a chain of Flatten / Linear / Conv2d / ReLU /
MaxPool2d / Identity layers, `LayerChain` computes the loss and the gradients of all clients with
hand-written batched kernels (bmm, per-client convolutions) instead of vmap(grad(...)); without
momentum, weight decay or gradient hooks the SGD update is fused into the weight-gradient GEMM
(`baddbmm_`). Anything else takes the generic vmap path.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import fx, nn
from torch.func import grad_and_value, vmap
from torch.nn.modules.utils import _pair
from torch.utils._pytree import tree_flatten, tree_unflatten

from fedbench.algorithms.base import Algorithm, Batch
from fedbench.algorithms.opt_in import LocalSteps, opt_in
from fedbench.engine.capabilities import capabilities
from fedbench.engine.executors import (
    DeltaBuffers,
    RoundJob,
    RoundOutput,
    client_context,
    client_draws,
    client_noise,
    fedavg_messages,
    host_plan,
    stack_messages,
)
from fedbench.engine.local import step_of
from fedbench.engine.precision import compute_dtype
from fedbench.engine.step import check_carry_keys, make_step, stacked_state, stacked_step
from fedbench.engine.train_config import CONV_KERNELS
from fedbench.objectives import CROSS_ENTROPY, objective_of
from fedbench.tree import Params, tree_to

log = logging.getLogger("fedbench.engine")

DEFAULT_MEMORY_BUDGET_MB = 2048


def stack_pytrees(trees: list[Any]) -> Any:
    """Stack a list of same-structured pytrees (dicts of tensors, floats) along a new axis 0."""
    stacked, _ = stack_shared(trees, share=False)
    return stacked


def stack_shared(
    trees: list[Any], share: bool = True, device: torch.device | None = None
) -> tuple[Any, Any]:
    """Stack same-structured pytrees along axis 0; return (stacked, vmap in_dims).

    With `share`, a leaf that is the same tensor object in every tree (FedProx's anchor = the global
    model) is passed once, unstacked, with in_dims None instead of being copied per client.
    """
    flat = [tree_flatten(t) for t in trees]
    spec = flat[0][1]
    # Python-number leaves go to `device`, else to the trees' (the CPU where they hold no tensor).
    if device is None:
        device = next((v.device for v in flat[0][0] if isinstance(v, torch.Tensor)), None)
    leaves, dims = [], []
    for i in range(len(flat[0][0])):
        column = [f[0][i] for f in flat]
        if not isinstance(column[0], torch.Tensor):
            leaves.append(torch.tensor(column, dtype=torch.float32, device=device))
            dims.append(0)
        elif share and all(c is column[0] for c in column):
            leaves.append(column[0])
            dims.append(None)
        else:
            leaves.append(torch.stack(column))
            dims.append(0)
    return tree_unflatten(leaves, spec), tree_unflatten(dims, spec)


# ---------------------------------------------------------------------------------------------
# Chunking


def client_bytes(num_params: int, batch_size: int, sample_numel: int) -> int:
    """Working-set estimate of one client in a chunk (float32), a deliberate over-estimate: about
    8 copies of the parameters (params, grads, momentum, their updates, carry) plus a batch of
    inputs with a few activation-sized buffers."""
    return 4 * (8 * num_params + 4 * batch_size * max(sample_numel, 1))


def chunk_size(
    num_params: int, batch_size: int, sample_numel: int, budget_mb: int, override: int | None
) -> int:
    """Clients per chunk: the override, else as many as fit the memory budget (at least 1)."""
    if override is not None:
        return override
    per_client = client_bytes(num_params, batch_size, sample_numel)
    return max(1, int(budget_mb * 2**20 // per_client))


def device_memory_mb(device: torch.device) -> int | None:
    """Free memory of `device` in MiB (cuda: free device memory; cpu: MemAvailable), if known."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free // 2**20)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return None


@cache
def cpu_cache_bytes() -> int | None:
    """Size of the CPU's last-level cache (as Linux reports it for cpu0), if known; read once a
    process (the sysfs reads cost 0.14 ms, 2 % of a 10-client TwoNN round)."""
    best: tuple[int, int] | None = None
    for entry in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            level = int((entry / "level").read_text())
            text = (entry / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit() and (best is None or level > best[0]):
            best = (level, int(digits) * scale)
    return None if best is None else best[1]


def pick_chunk(
    num_params: int,
    batch_size: int,
    sample_numel: int,
    budget_mb: int,
    override: int | None,
    device: torch.device,
) -> tuple[int, str]:
    """Clients per chunk and why: override > budget (capped by free device memory) > CPU cache.

    On a CPU, lockstep over more clients than the last-level cache holds streams every client's
    weights from memory at every step; chunks whose weights fit the cache run each client's steps
    out of cache, so the default caps the chunk there (at least 4 clients).
    """
    if override is not None:
        return override, "chunk_size override"
    free = device_memory_mb(device)
    budget = budget_mb if free is None else max(1, min(budget_mb, free // 2))
    size = chunk_size(num_params, batch_size, sample_numel, budget, None)
    why = f"memory budget {budget} MiB"
    cache = cpu_cache_bytes() if device.type == "cpu" else None
    if cache:
        fits = max(4, cache // (3 * 4 * max(num_params, 1)))
        if fits < size:
            size, why = fits, f"{why}, CPU cache {cache >> 20} MiB"
    return size, why


# ---------------------------------------------------------------------------------------------
# Executor resolution


def has_batch_stats(model: nn.Module) -> bool:
    """True when the model has layers whose output depends on other samples (BatchNorm)."""
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())


def resolve_executor(requested: str, model: nn.Module) -> tuple[str, str]:
    """`auto` -> vectorised where it is exact for this model; returns (name, reason)."""
    if requested != "auto":
        return requested, "requested"
    if has_batch_stats(model):
        return "sequential", "model has BatchNorm: per-client batch statistics under vmap untested"
    if any(isinstance(m, nn.RNNBase) for m in model.modules()):
        # Measured on the SuPerFed next-character LSTM (batch 50, 80 steps, 5 clients, CPU): the
        # step-by-step recurrence under vmap took 2.7x the time of one client at a time.
        return "sequential", "recurrent model: vmap over the unrolled recurrence is slower here"
    return "vectorised", "auto: model has no cross-sample layers, vmap is exact"


# ---------------------------------------------------------------------------------------------
# Batched kernels for layer chains


class _Sink:
    """Where `LayerChain.backward` puts gradients: collected, or fused into an SGD update."""

    def __init__(self, params: Params, lr: float | None):
        self.params, self.lr, self.grads = params, lr, {}

    def outer(self, key: str, a: torch.Tensor, b: torch.Tensor) -> None:
        """Gradient of `key` = a @ b per client (a: [C, out, B], b: [C, B, in]; the parameter
        [C, out, in] or any shape of that many elements, e.g. a convolution's weight)."""
        param = self.params[key]
        if a.dtype != param.dtype:  # bf16 operands: the gradient, then float32
            self.tensor(key, torch.bmm(a, b).view(param.shape))
        elif self.lr is None:
            self.grads[key] = torch.bmm(a, b).view(param.shape)
        else:
            param.view(a.shape[0], a.shape[1], b.shape[2]).baddbmm_(a, b, alpha=-self.lr)

    def tensor(self, key: str, g: torch.Tensor) -> None:
        """Gradient of `key` given as a tensor."""
        g = g.to(self.params[key].dtype)
        if self.lr is None:
            self.grads[key] = g
        else:
            self.params[key].add_(g, alpha=-self.lr)


class _Flatten:
    def __init__(self, name: str, mod: nn.Flatten):
        self.keys: tuple[str, ...] = ()

    def forward(self, p: Params, x: torch.Tensor):
        return x.reshape(x.shape[0], x.shape[1], -1), x.shape

    def backward(self, p: Params, shape, dy: torch.Tensor, need_dx: bool, sink: _Sink):
        return dy.reshape(shape)


class _Identity(_Flatten):
    def forward(self, p: Params, x: torch.Tensor):
        return x, None

    def backward(self, p: Params, saved, dy: torch.Tensor, need_dx: bool, sink: _Sink):
        return dy


class _ReLU(_Identity):
    def forward(self, p: Params, x: torch.Tensor):
        y = torch.relu(x)
        return y, y

    def backward(self, p: Params, y, dy: torch.Tensor, need_dx: bool, sink: _Sink):
        return torch.ops.aten.threshold_backward(dy, y, 0)


class _Linear:
    def __init__(self, name: str, mod: nn.Linear):
        self.w = f"{name}.weight"
        self.b = None if mod.bias is None else f"{name}.bias"
        self.keys = (self.w,) if self.b is None else (self.w, self.b)

    def forward(self, p: Params, x: torch.Tensor):
        wt = p[self.w].transpose(1, 2)
        y = torch.bmm(x, wt) if self.b is None else torch.baddbmm(p[self.b].unsqueeze(1), x, wt)
        return y, x

    def backward(self, p: Params, x, dy: torch.Tensor, need_dx: bool, sink: _Sink):
        dx = torch.bmm(dy, p[self.w]) if need_dx else None  # before the fused update of w
        sink.outer(self.w, dy.transpose(1, 2), x)
        if self.b is not None:
            sink.tensor(self.b, dy.sum(1))
        return dx


def _channels_last(x: torch.Tensor) -> bool:
    """Whether a chain runs its convolutions and pooling channels-last: on bf16 operands, whose
    oneDNN kernels (and bf16 max-pooling) are vectorised for that layout on CPUs; float32 keeps
    NCHW, so every float32 run keeps its bits."""
    return x.dtype == torch.bfloat16


def _stack_channels_last(per_client: list[torch.Tensor]) -> torch.Tensor:
    """[C, B, Ch, H, W] from per-client [B, Ch, H, W] tensors, stored so that each client's slice
    (and the [C * B, Ch, H, W] view max-pooling takes) is channels-last."""
    return torch.stack([t.permute(0, 2, 3, 1) for t in per_client]).permute(0, 1, 4, 2, 3)


# How the layer chain runs a chunk's convolutions (training.conv_kernel): `per_client`, one
# oneDNN convolution per client (autograd's kernels; NCHW in float32, channels-last in bf16; the
# default, whose float32 bits every record has); `channels_last`, the same calls with channels-
# last operands in every dtype; `gemm`, im2col (unfold) of the chunk's batches and one batched
# GEMM over the clients per product (forward, weight gradient, input gradient + col2im);
# `fastest`, whichever of the three a timed probe finds faster for each layer shape, once per
# run (run.yaml's vectorised_conv says which). All but per_client may differ from its float32
# bits by rounding.
PROBE_REPEATS = 3  # timed forward + backward passes per kernel of the `fastest` probe
PROBED = ("per_client", "channels_last", "gemm")  # what `fastest` chooses from, in this order


class _Conv2d:
    """A convolution over stacked clients: per-client oneDNN calls (channels-last on bf16
    operands, `_channels_last`, or on every operand under `channels_last`) or batched GEMMs over
    im2col columns (CONV_KERNELS)."""

    def __init__(self, name: str, mod: nn.Conv2d, kernel: str = "per_client"):
        self.name = name
        self.w = f"{name}.weight"
        self.b = None if mod.bias is None else f"{name}.bias"
        self.keys = (self.w,) if self.b is None else (self.w, self.b)
        self.stride, self.padding, self.dilation = mod.stride, mod.padding, mod.dilation
        self.kernel_size = mod.kernel_size
        self.kernel = kernel
        # (forward, backward) of each kernel, made once (they run every step)
        self._kernels = {
            "per_client": (self._forward, self._backward),
            "channels_last": (partial(self._forward, cl=True), partial(self._backward, cl=True)),
            "gemm": (self._gemm_forward, self._gemm_backward),
        }
        # `fastest`: (input shape, dtype) -> (kernel, {kernel: probe seconds})
        self.probed: dict[tuple, tuple[str, dict[str, float]]] = {}

    def forward(self, p: Params, x: torch.Tensor):
        kernel = self._pick(p, x)
        y, saved = self._kernels[kernel][0](p, x)
        return y, (kernel, saved)

    def backward(self, p: Params, saved, dy: torch.Tensor, need_dx: bool, sink: _Sink):
        kernel, saved = saved
        return self._kernels[kernel][1](p, saved, dy, need_dx, sink)

    def _pick(self, p: Params, x: torch.Tensor) -> str:
        """The kernel for this input: the configured one, or the probe's choice (`fastest`)."""
        if self.kernel != "fastest":
            return self.kernel
        key = (tuple(x.shape), x.dtype)
        if key not in self.probed:
            self.probed[key] = self._probe(p, x)
            log.info("conv %s %s: %s (probe %s)", self.name, list(x.shape), *self.probed[key])
        return self.probed[key][0]

    def _probe(self, p: Params, x: torch.Tensor) -> tuple[str, dict[str, float]]:
        """Time a forward and a full backward (input gradient included) of each kernel on this
        input, gradients collected and dropped (the parameters do not move); the faster by its
        best of PROBE_REPEATS, after one untimed pass."""
        seconds = {}
        for kernel in PROBED:
            fwd, back = self._kernels[kernel]
            times = []
            for i in range(PROBE_REPEATS + 1):
                started = time.perf_counter()
                y, saved = fwd(p, x)
                back(p, saved, torch.ones_like(y), True, _Sink(p, None))
                if y.device.type == "cuda":
                    torch.cuda.synchronize(y.device)
                if i:
                    times.append(time.perf_counter() - started)
            seconds[kernel] = min(times)
        return min(seconds, key=seconds.get), {k: round(v, 6) for k, v in seconds.items()}

    def _gemm_forward(self, p: Params, x: torch.Tensor):
        """y[c] = W[c] @ cols[c] with the chunk's im2col columns [C, K, B * L], K = Cin kh kw."""
        C, B, cin, h, w = x.shape
        weight = p[self.w]
        cout = weight.shape[1]
        k = cin * self.kernel_size[0] * self.kernel_size[1]
        cols = F.unfold(
            x.reshape(C * B, cin, h, w), self.kernel_size, self.dilation, self.padding, self.stride
        )
        length = cols.shape[-1]
        cols = cols.view(C, B, k, length).transpose(1, 2).reshape(C, k, B * length)
        wm = weight.reshape(C, cout, k)
        if self.b is None:
            y = torch.bmm(wm, cols)
        else:
            y = torch.baddbmm(p[self.b].unsqueeze(2), wm, cols)
        ho, wo = _conv_out(h, w, self.kernel_size, self.stride, self.padding, self.dilation)
        y = y.view(C, cout, B, ho, wo).transpose(1, 2).contiguous()
        return y, (cols, (h, w))

    def _gemm_backward(self, p: Params, saved, dy: torch.Tensor, need_dx: bool, sink: _Sink):
        cols, size = saved
        C, B, cout = dy.shape[:3]
        k = cols.shape[1]
        dy = dy.transpose(1, 2).reshape(C, cout, cols.shape[2])  # [C, Co, B * L]
        dx = None
        if need_dx:  # before the fused update of w
            wm = p[self.w].reshape(C, cout, k)
            dcols = torch.bmm(wm.transpose(1, 2), dy)  # [C, K, B * L]
            dcols = dcols.view(C, k, B, -1).transpose(1, 2).reshape(C * B, k, -1)
            dx = F.fold(
                dcols, size, self.kernel_size, self.dilation, self.padding, self.stride
            ).view(C, B, -1, *size)
        sink.outer(self.w, dy, cols.transpose(1, 2))
        if self.b is not None:
            sink.tensor(self.b, dy.sum(2))
        return dx

    def _forward(self, p: Params, x: torch.Tensor, cl: bool = False):
        w, b = p[self.w], None if self.b is None else p[self.b]
        if not (cl or _channels_last(x)):
            xs, stack = list(x), torch.stack
        else:
            xs = [xc.contiguous(memory_format=torch.channels_last) for xc in x]
            stack = _stack_channels_last
        y = stack(
            [
                F.conv2d(
                    xc,
                    w[c],
                    None if b is None else b[c],
                    self.stride,
                    self.padding,
                    self.dilation,
                )
                for c, xc in enumerate(xs)
            ]
        )
        return y, xs

    def _backward(
        self, p: Params, xs, dy: torch.Tensor, need_dx: bool, sink: _Sink, cl: bool = False
    ):
        w = p[self.w]
        bias_sizes = None if self.b is None else [w.shape[1]]
        mask = [need_dx, True, self.b is not None]
        cl = cl or _channels_last(dy)
        outs = [
            torch.ops.aten.convolution_backward(
                dy[c].contiguous(memory_format=torch.channels_last) if cl else dy[c],
                xc,
                w[c],
                bias_sizes,
                self.stride,
                self.padding,
                self.dilation,
                False,
                [0, 0],
                1,
                mask,
            )
            for c, xc in enumerate(xs)
        ]
        sink.tensor(self.w, torch.stack([o[1] for o in outs]))
        if self.b is not None:
            sink.tensor(self.b, torch.stack([o[2] for o in outs]))
        if not need_dx:
            return None
        return (_stack_channels_last if cl else torch.stack)([o[0] for o in outs])


class _MaxPool2d:
    def __init__(self, name: str, mod: nn.MaxPool2d):
        self.keys = ()
        stride = mod.stride if mod.stride is not None else mod.kernel_size
        self.args = (
            _pair(mod.kernel_size),
            _pair(stride),
            _pair(mod.padding),
            _pair(mod.dilation),
            mod.ceil_mode,
        )

    def forward(self, p: Params, x: torch.Tensor):
        flat = x.reshape(-1, *x.shape[2:])
        if flat.device.type == "cpu" and not flat.is_contiguous(memory_format=torch.channels_last):
            # On CPUs the NCHW kernel is 3-4x slower than the channels-last one, even counting
            # the two layout copies (TwoCNN's pools: 6.3 vs 1.7 ms at [100, 32, 28, 28]); the
            # values, the indices (first maximum of each window, NaN wins) and so the backward
            # are the same bits.
            y, idx = torch.ops.aten.max_pool2d_with_indices(
                flat.contiguous(memory_format=torch.channels_last), *self.args
            )
            y, idx = y.contiguous(), idx.contiguous()
        else:
            y, idx = torch.ops.aten.max_pool2d_with_indices(flat, *self.args)
        return y.reshape(*x.shape[:2], *y.shape[1:]), (flat, idx)

    def backward(self, p: Params, saved, dy: torch.Tensor, need_dx: bool, sink: _Sink):
        flat, idx = saved
        lead, dy = dy.shape[:2], dy.reshape(-1, *dy.shape[2:])
        cl = torch.channels_last
        if (_channels_last(flat) or not flat.is_contiguous()) and flat.is_contiguous(
            memory_format=cl
        ):  # a channels-last input (bf16, conv_kernel channels_last): the forward's layout
            dy = dy.contiguous(memory_format=cl)  # (a Flatten gives NCHW)
        dx = torch.ops.aten.max_pool2d_with_indices_backward(dy, flat, *self.args, idx)
        return dx.reshape(*lead, *dx.shape[1:])


def _conv_out(h: int, w: int, kernel, stride, padding, dilation) -> tuple[int, int]:
    """Output height and width of a convolution (torch's formula)."""
    return tuple(
        (n + 2 * pd - dl * (k - 1) - 1) // st + 1
        for n, k, st, pd, dl in zip((h, w), kernel, stride, padding, dilation)
    )


def _conv_ok(m: nn.Conv2d) -> bool:
    return m.groups == 1 and m.padding_mode == "zeros" and isinstance(m.padding, tuple)


def _flatten_ok(m: nn.Flatten) -> bool:
    return m.start_dim == 1 and m.end_dim == -1


def _pool_ok(m: nn.MaxPool2d) -> bool:
    return not m.return_indices


LAYERS: dict[type[nn.Module], tuple[type, Any]] = {
    nn.Linear: (_Linear, None),
    nn.Conv2d: (_Conv2d, _conv_ok),
    nn.ReLU: (_ReLU, None),
    nn.Flatten: (_Flatten, _flatten_ok),
    nn.MaxPool2d: (_MaxPool2d, _pool_ok),
    nn.Identity: (_Identity, None),
}


class LayerChain:
    """Batched forward/backward of a chain of supported layers over stacked client parameters."""

    def __init__(self, layers: list[Any]):
        self.layers = layers
        self.keys = [k for layer in layers for k in layer.keys]
        first = next((i for i, layer in enumerate(layers) if layer.keys), len(layers))
        # Layers at or before the first one with parameters need no input gradient.
        self.need_dx = [i > first for i in range(len(layers))]

    @classmethod
    def build(
        cls, module: nn.Module | None, keys: list[str], conv_kernel: str = "per_client"
    ) -> tuple[LayerChain | None, str]:
        """The chain of `module` if every layer is supported and `keys` are exactly its
        parameters, else (None, why not); its convolutions run `conv_kernel` (CONV_KERNELS)."""
        if module is None:
            return None, "apply has no module"
        if any(True for _ in module.buffers()):
            return None, "model has buffers"
        try:
            graph = fx.symbolic_trace(module).graph
        except Exception as err:  # any tracing failure means: not a plain chain
            return None, f"not traceable ({type(err).__name__})"
        layers, prev = [], None
        for node in graph.nodes:
            if node.op == "placeholder":
                if prev is not None:
                    return None, "more than one input"
                prev = node
            elif node.op == "output":
                if node.args[0] is not prev:
                    return None, "output is not the last layer"
            elif node.op == "call_module" and node.args == (prev,) and not node.kwargs:
                mod = module.get_submodule(node.target)
                kind, ok = LAYERS.get(type(mod), (None, None))
                if kind is None or (ok is not None and not ok(mod)):
                    return None, f"layer {node.target} ({type(mod).__name__}) not supported"
                extra = (conv_kernel,) if kind is _Conv2d else ()
                layers.append(kind(node.target, mod, *extra))
                prev = node
            else:
                return None, f"{node.op} {node.target} is not a layer of a chain"
        chain = cls(layers)
        if sorted(chain.keys) != sorted(keys):
            return None, "parameters differ from the model's"
        return chain, "layer chain"

    def loss_and_grads(
        self,
        params: Params,
        x: torch.Tensor,
        y: torch.Tensor,
        mask: torch.Tensor | None,
        sink: _Sink,
        dtype: torch.dtype | None = None,
    ) -> torch.Tensor:
        """Masked mean cross-entropy per client ([C]); gradients go to `sink` (float32).

        `dtype` (bf16 precision): the layers' GEMMs and convolutions run on operands cast to it,
        as autocast runs one client's; the loss and its gradient at the logits stay float32.
        """
        cast = params if dtype is None else {k: v.to(dtype) for k, v in params.items()}
        tape = []
        h = x if dtype is None else x.to(dtype)
        for layer in self.layers:
            h, saved = layer.forward(cast, h)
            tape.append(saved)
        logp = torch.log_softmax(h.float(), dim=-1)
        nll = -logp.gather(-1, y.unsqueeze(-1)).squeeze(-1)  # [C, B]
        dz = logp.exp()
        dz.scatter_add_(-1, y.unsqueeze(-1), torch.full_like(nll, -1.0).unsqueeze(-1))
        if mask is None:
            loss = nll.mean(1)
            dz.mul_(1.0 / y.shape[1])
        else:
            count = mask.sum(1).clamp(min=1)
            loss = (nll * mask).sum(1) / count
            dz.mul_((mask / count.unsqueeze(1)).unsqueeze(-1))
        if dtype is not None:
            dz = dz.to(dtype)
        for i in range(len(self.layers) - 1, -1, -1):
            if dz is None:
                break
            dz = self.layers[i].backward(cast, tape[i], dz, self.need_dx[i], sink)
        return loss


def kernel_path(
    algo: Algorithm, apply: Any, keys: list[str], conv_kernel: str = "per_client"
) -> tuple[LayerChain | None, str]:
    """The batched-kernel chain for this algorithm and model, or (None, why the vmap path)."""
    if algo.carry_updates:  # the kernels have no aux output; such a loss is its own anyway
        return None, f"{algo.name} updates its carry"
    if capabilities(algo).own_objective:
        return None, f"{algo.name} has its own local objective"
    if capabilities(algo).before_step:  # its steps read what before_step writes to the carry
        return None, f"{algo.name} prepares each step (before_step)"
    objective = objective_of(apply)
    if objective.name != CROSS_ENTROPY.name:  # the kernels hard-code softmax cross-entropy
        return None, f"objective {objective.name}"
    return LayerChain.build(getattr(apply, "module", None), keys, conv_kernel)


# ---------------------------------------------------------------------------------------------
# The executor


@dataclass
class _Chunk:
    """A chunk's batch plan: rows [S, C, B], mask (None = no padding), active [S, C] (host)."""

    rows: torch.Tensor
    mask: torch.Tensor | None
    active: np.ndarray
    steps: torch.Tensor
    draws: dict[str, torch.Tensor] | None = None  # augmentation draws [S, C, B]


class VectorisedExecutor:
    """Clients of a round in lockstep over stacked parameters, chunked to a memory budget."""

    name = "vectorised"

    def __init__(
        self,
        chunk: int | None = None,
        budget_mb: int = DEFAULT_MEMORY_BUDGET_MB,
        conv_kernel: str = "per_client",
    ):
        self.chunk = chunk
        self.budget_mb = budget_mb
        if conv_kernel not in CONV_KERNELS:
            raise ValueError(f"conv_kernel must be one of {CONV_KERNELS}, got {conv_kernel!r}")
        self.conv_kernel = conv_kernel
        self._kernel: dict[Any, tuple[LayerChain | None, str]] = {}
        self._workspace: dict[str, torch.Tensor] = {}
        self._deltas = DeltaBuffers()
        self.last_chunk: tuple[int, str] | None = None  # (clients per chunk, why), last round
        self.chunks_run = 0  # chunks of the last round

    def describe(self) -> dict[str, Any]:
        """How the last round ran (for run.yaml): kernel path, clients per chunk and why."""
        paths = sorted(
            {
                "batched layer-chain kernels" if c else f"vmap ({why})"
                for c, why in self._kernel.values()
            }
        )
        out: dict[str, Any] = {"vectorised_path": "; ".join(paths)}
        convs = [
            layer
            for chain, _ in self._kernel.values()
            if chain is not None
            for layer in chain.layers
            if isinstance(layer, _Conv2d)
        ]
        if convs:  # each convolution's kernel; under `fastest`, per input shape with its probe
            out["vectorised_conv"] = {
                "setting": self.conv_kernel,
                "layers": {
                    c.name: (
                        [
                            {"input": list(shape), "kernel": k, "probe_seconds": s}
                            for (shape, _), (k, s) in c.probed.items()
                        ]
                        if c.kernel == "fastest"
                        else c.kernel
                    )
                    for c in convs
                },
            }
        if self.last_chunk is not None:
            out["chunk_size"], out["chunk_reason"] = self.last_chunk
        return out

    def run(self, job: RoundJob) -> RoundOutput:
        """Train every client of `job.client_ids`, a chunk at a time."""
        algo, cfg, fed = job.algo, job.cfg, job.fed
        why = algo.sequential_only or (
            f"it takes each batch for {repeat} steps"
            if (repeat := opt_in(algo, LocalSteps).steps_per_batch) > 1
            else None
        )
        if why:
            raise ValueError(
                f"{algo.name} runs in the sequential executor only ({why}); "
                "set training.executor: sequential"
            )
        keys = list(job.global_params)
        cache_key = (type(algo), id(job.apply), tuple(keys))
        if cache_key not in self._kernel:
            self._kernel[cache_key] = kernel_path(algo, job.apply, keys, self.conv_kernel)
            log.debug("vectorised path: %s", self._kernel[cache_key][1])
        chain = self._kernel[cache_key][0]
        num_params = sum(v.numel() for v in job.global_params.values())
        size, why = pick_chunk(
            num_params,
            cfg.batch_size,
            math.prod(fed.x.shape[1:]),
            self.budget_mb,
            self.chunk,
            fed.x.device,
        )
        self.last_chunk = (size, why)
        self.chunks_run = 0
        ids = job.client_ids
        stacked_end = not capabilities(algo).client_end
        messages: list[dict[str, Any]] = []
        states: dict[int, Any] = {}
        losses = []
        out = None
        if stacked_end:
            out = self._deltas.take(job.global_params, len(ids))
        for start in range(0, len(ids), size):
            chunk_ids = ids[start : start + size]
            self.chunks_run += 1
            ctxs, plans = [], []
            for cid in chunk_ids:
                plan = host_plan(job, cid)
                plans.append(plan)
                ctxs.append(client_context(job, cid, len(plan[0])))
            starts, carries = [], []
            for cid, ctx in zip(chunk_ids, ctxs):
                p, c = tree_to(
                    algo.client_begin(
                        job.global_params, job.server_state, job.client_states[cid], ctx
                    ),
                    fed.x.device,
                )
                starts.append(p)
                carries.append(c)
            noises = [client_noise(job, cid, ctx) for cid, ctx in zip(chunk_ids, ctxs)]
            plan = self._device_plan(plans, fed.train, chunk_ids, cfg.batch_size, fed.x.device)
            plan.draws = _stack_draws(
                [client_draws(job, cid, ctx.num_steps) for cid, ctx in zip(chunk_ids, ctxs)],
                plan.rows.shape[0],
            )
            params = self._stack_params(starts, reuse=stacked_end)
            carry, carry_dims = stack_shared(carries, device=fed.x.device)
            noise = _stack_noise(
                noises, plan.rows.shape[0], fed.x.device, opt_in(algo, LocalSteps).noise_is_schedule
            )
            loss, final = self._train(job, chain, params, carry, carry_dims, noise, plan)
            losses.append(loss / plan.steps.clamp(min=1))
            if stacked_end:
                for k, v in params.items():
                    torch.sub(v, job.global_params[k], out=out[k][start : start + len(chunk_ids)])
                states.update({cid: job.client_states[cid] for cid in chunk_ids})
                continue
            for c, cid in enumerate(chunk_ids):
                trained = {k: v[c] for k, v in params.items()}
                last = {**carries[c], **{k: _row(v, c) for k, v in final.items()}}
                message, states[cid] = algo.client_end(
                    job.global_params, trained, last, job.client_states[cid], ctxs[c]
                )
                if ctxs[c].pre_loss is not None:
                    message["pre_loss"] = ctxs[c].pre_loss
                messages.append(message)
        if stacked_end:
            stacked = fedavg_messages(job, out)
        else:
            stacked = stack_messages(messages, fed.x.device)
        return RoundOutput(stacked, states, torch.cat(losses))

    def _stack_params(self, starts: list[Params], reuse: bool) -> Params:
        """The chunk's starting parameters, stacked (into a reused buffer when nothing keeps
        references to it after the round)."""
        out = {}
        n = len(starts)
        for k, first in starts[0].items():
            shape = (n, *first.shape)
            buf = self._workspace.get(k) if reuse else None
            if buf is None or buf.shape != shape or buf.dtype != first.dtype:
                buf = torch.empty(shape, dtype=first.dtype, device=first.device)
                if reuse:
                    self._workspace[k] = buf
            if all(s[k] is first for s in starts):
                buf.copy_(first.expand(shape))
            else:
                torch.stack([s[k] for s in starts], out=buf)
            out[k] = buf
        return out

    @staticmethod
    def _device_plan(plans, train, ids, batch_size: int, device: torch.device) -> _Chunk:
        """Stack the clients' host plans into [steps, clients, B] index and mask tensors."""
        steps = np.array([len(p[0]) for p in plans])
        n_steps, n = int(steps.max(initial=0)), len(plans)
        rows = np.zeros((n_steps, n, batch_size), dtype=np.int64)
        sizes = np.zeros((n_steps, n), dtype=np.int64)
        for c, (r, s) in enumerate(plans):
            if len(r):
                rows[: len(r), c] = r
                sizes[: len(s), c] = s
            elif len(train[ids[c]]):
                rows[:, c] = int(train[ids[c]][0])
        mask = None
        if (sizes != batch_size).any():
            mask_np = (np.arange(batch_size) < sizes[..., None]).astype(np.float32)
            mask = torch.from_numpy(mask_np).to(device)
        return _Chunk(
            torch.from_numpy(rows).to(device),
            mask,
            sizes > 0,
            torch.from_numpy(steps.astype(np.float32)).to(device),
        )

    def _train(self, job, chain, params, carry, carry_dims, noise, plan):
        """The chunk's local steps in lockstep: `make_step`'s pieces vmapped over the clients,
        or, for a layer chain, the chain's own gradients (a swap-in for vmap's; with plain SGD
        fused into its backward) followed by the step's vmapped `finish` hooks. Returns the
        per-client loss sums and the carry entries the steps updated (stacked; empty without
        `carry_updates`)."""
        algo, cfg, fed = job.algo, job.cfg, job.fed
        fns = make_step(algo, job.apply, lambda f: grad_and_value(f, has_aux=True))
        adam = cfg.adam()
        mask_dim = None if plan.mask is None else 0
        w_dim = None if fed.weight is None else 0
        noise_dim = _noise_dim(noise)

        def step(p: Params, xb, yb, mb, wb, cr, nz):
            g, value, upd, new = fns.gradient(p, Batch(xb, yb, mb, wb), cr, nz)
            return g, value, {} if upd is None else upd, new

        def vmapped(dims):
            return vmap(step, in_dims=(0, 0, 0, mask_dim, w_dim, dims, noise_dim))

        if chain is not None:
            vstep = self._chain_step(job, chain, fns, carry_dims, noise_dim, adam)
        else:
            vstep = vmapped(carry_dims)

        def before(p: Params, xb, yb, mb, wb, cr, nz):
            return fns.prepare(p, Batch(xb, yb, mb, wb), cr, nz)

        carry, carry_dims, final = dict(carry), dict(carry_dims), {}
        buf = stacked_state(cfg.optimizer, cfg.momentum, params)
        xs, ys = _gather(job, plan)
        ws = None if fed.weight is None else fed.weight[plan.rows]
        loss_sum = torch.zeros(plan.rows.shape[1], device=fed.x.device)
        for s in range(plan.rows.shape[0]):
            mask = None if plan.mask is None else plan.mask[s]
            nz = step_of(noise, s)
            wb = None if ws is None else ws[s]
            if fns.prepare is not None:
                dims = (0, 0, 0, mask_dim, w_dim, carry_dims, noise_dim)
                made = vmap(before, in_dims=dims)(params, xs[s], ys[s], mask, wb, carry, nz)
                vstep = self._absorb(
                    algo, made, carry, carry_dims, final, plan.active[s], vstep, vmapped
                )
            if fns.passes(nz):  # FrozenPasses: `prepare` did the step's work
                grads, value, upd, new = None, carry["loss"], {}, {}
            else:
                grads, value, upd, new = vstep(params, xs[s], ys[s], mask, wb, carry, nz)
            if grads is not None:  # (None: the chain's backward took the step, or a pass)
                scale = _combine(_step_scale(plan.active[s], params, fed.x.device), upd, params)
                stacked_step(algo, cfg, adam, params, grads, buf, job.lr, s, scale, bool(upd))
            keep = torch.as_tensor(plan.active[s], device=value.device)
            loss_sum += torch.where(keep, value.detach(), torch.zeros_like(value))
            if new:
                vstep = self._absorb(
                    algo, new, carry, carry_dims, final, plan.active[s], vstep, vmapped
                )
        return loss_sum, final

    @staticmethod
    def _chain_step(job, chain, fns, carry_dims, noise_dim, adam):
        """The layer chain's step over the stacked clients, shaped as the vmapped one's:
        (grads, per-client loss, update mask, carry updates). Plain SGD (no hook after the
        gradient, no momentum, weight decay or Adam) is fused into the chain's backward, which
        then returns no gradients: a client without a batch got zero gradients, so nothing of it
        moved."""
        cfg, caps = job.cfg, capabilities(job.algo)
        hooked = caps.correct_grads or caps.update_mask
        fused = not (hooked or cfg.momentum or cfg.weight_decay or adam)
        dtype = compute_dtype(cfg.precision)
        finish = None
        if hooked:

            def finish_one(g, p, cr, nz):
                g, upd = fns.finish(g, p, cr, nz)
                return g, {} if upd is None else upd

            finish = vmap(finish_one, in_dims=(0, 0, carry_dims, noise_dim))

        def step(p: Params, xb, yb, mb, wb, cr, nz):
            sink = _Sink(p, job.lr if fused else None)
            value = chain.loss_and_grads(p, xb, yb, mb, sink, dtype)
            if fused:
                return None, value, {}, {}
            grads, upd = sink.grads, {}
            if finish is not None:
                grads, upd = finish(grads, p, cr, nz)
            return grads, value, upd, {}

        return step

    @staticmethod
    def _absorb(algo, new, carry, carry_dims, final, active, vstep, vmapped):
        """Write a step's carry entries (stacked) into `carry` for the clients with a batch
        (the others keep theirs) and into `final`; re-vmap the step when an entry's layout
        changed. Returns the step function to use next."""
        check_carry_keys(algo, carry, new)
        every = bool(active.all())
        keep = torch.as_tensor(active)
        moved = False
        for k, v in new.items():
            carry[k] = (
                v if every else _keep_inactive(v, carry[k], carry_dims[k], keep.to(_device_of(v)))
            )
            final[k] = carry[k]
            moved = moved or _dims_of(v) != carry_dims[k]
            carry_dims[k] = _dims_of(v)
        return vmapped(carry_dims) if moved else vstep


def _device_of(tree: Any) -> torch.device:
    """The device of a carry entry (a tensor or a dict of them)."""
    while isinstance(tree, dict):
        tree = next(iter(tree.values()))
    return tree.device


def _dims_of(tree: Any) -> Any:
    """vmap in_dims of a stacked carry entry (every leaf per client)."""
    return {k: _dims_of(v) for k, v in tree.items()} if isinstance(tree, dict) else 0


def _keep_inactive(new: Any, old: Any, dims: Any, keep: torch.Tensor) -> Any:
    """A carry entry after a step: `new` for clients with a batch, `old` (stacked or shared,
    per `dims`) for the others."""
    if isinstance(new, dict):
        return {k: _keep_inactive(new[k], old[k], dims[k], keep) for k in new}
    if dims is None:
        old = old.expand_as(new)
    return torch.where(keep.reshape(keep.shape + (1,) * (new.dim() - 1)), new, old)


def _row(tree: Any, c: int) -> Any:
    """Client `c`'s entry of a stacked carry entry."""
    return {k: _row(v, c) for k, v in tree.items()} if isinstance(tree, dict) else tree[c]


def _gather(job: RoundJob, plan: _Chunk) -> tuple[torch.Tensor, torch.Tensor]:
    """The chunk's batches [S, C, B, ...] from the pool, augmented with the clients' draws
    (`index_select` on the flat rows: the same copy as `x[rows]`, 2.7x faster on a CPU)."""
    flat, fed = plan.rows.reshape(-1), job.fed
    xs = fed.x.index_select(0, flat).view(*plan.rows.shape, *fed.x.shape[1:])
    ys = fed.y.index_select(0, flat).view(plan.rows.shape)
    if plan.draws is not None:
        xs = job.cfg.augment.apply(xs, plan.draws)
    return xs, ys


def _stack_draws(draws: list, n_steps: int) -> dict[str, torch.Tensor] | None:
    """Per-client augmentation draws as [steps, clients, B] (missing steps padded, masked)."""
    if draws[0] is None:
        return None
    out = {}
    for k in draws[0]:
        padded = [
            torch.cat([d[k], d[k].new_zeros((n_steps - len(d[k]), *d[k].shape[1:]))]) for d in draws
        ]
        out[k] = torch.stack(padded, 1)
    return out


def _noise_dim(noise: torch.Tensor | dict | list | None) -> int | None:
    """vmap in_dim of the step noise: 0 for per-client draws (a tensor or named tensors), None
    for none or a schedule."""
    return 0 if isinstance(noise, (torch.Tensor, dict)) else None


def _step_scale(active: np.ndarray, params: Params, device) -> dict[str, torch.Tensor] | None:
    """Per-client 0/1 factors freezing clients without a batch at this step (None: all train)."""
    if active.all():
        return None
    keep = torch.from_numpy(active.astype(np.float32)).to(device)
    return dict.fromkeys(params, keep)


def _combine(scale, upd: dict[str, torch.Tensor] | None, params: Params):
    """Multiply the step's per-client factors with an algorithm's (vmapped) update mask."""
    if not upd:
        return scale
    out = {} if scale is None else dict(scale)
    for k, m in upd.items():
        p = params[k]
        m = torch.as_tensor(m, dtype=p.dtype, device=p.device)
        if m.dim() == 0:
            m = m.expand(p.shape[0])
        if k in out:
            keep = out[k]
            m = keep.reshape(keep.shape + (1,) * (m.dim() - keep.dim())) * m
        out[k] = m
    return out


def _stack_noise(
    noises: list, n_steps: int, device: torch.device, schedule: bool = False
) -> torch.Tensor | dict[str, torch.Tensor] | list[float] | None:
    """Per-client step noise as [steps, clients, ...] (clients with fewer steps padded by 0);
    a schedule (`LocalSteps.noise_is_schedule`) as one Python float a step, the longest client's
    marks (a client's steps are a prefix of them; its missing steps are inactive anyway)."""
    if noises[0] is None:
        return None
    if schedule:
        longest = max(noises, key=len)
        return longest.tolist() + [0.0] * (n_steps - len(longest))
    if isinstance(noises[0], dict):
        return {k: _stack_noise([n[k] for n in noises], n_steps, device) for k in noises[0]}
    padded = [torch.cat([n, n.new_zeros((n_steps - len(n), *n.shape[1:]))]) for n in noises]
    return torch.stack(padded).to(device).transpose(0, 1)

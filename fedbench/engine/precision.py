"""Arithmetic precision of training (`training.precision`) and evaluation (`eval_precision`).

- `fp32`: float32 throughout (every paper grid).
- `bf16`: mixed precision. Only the model's forward pass runs under `torch.autocast` (bfloat16
  GEMMs and convolutions; its backward follows in the same dtypes); its outputs are cast back to
  float32, so the loss, everything an algorithm computes from it (powers of losses, SGLD noise,
  prox and second-order terms, simplex projections), the float32 master weights, the optimiser's
  state and the aggregation stay float32. The vectorised executor's layer-chain kernels cast their
  GEMM and convolution operands instead (`LayerChain.loss_and_grads(dtype=...)`).
- `tf32`: float32 tensors, TF32 tensor-core matmuls and convolutions on a CUDA device (an error
  on any other device: there is nothing to switch on).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from fedbench.tree import Apply

PRECISIONS = ("fp32", "bf16", "tf32")


def check_device(precision: str, device: torch.device, key: str = "training.precision") -> None:
    """ValueError naming `key` when `precision` cannot run on `device`."""
    if precision == "tf32" and device.type != "cuda":
        raise ValueError(
            f"{key}: tf32 switches on TF32 tensor-core matmuls of a CUDA device; this run is on "
            f"{device.type}. Use fp32 (exact float32) or bf16 (autocast, fast on CPUs with "
            "AVX-512 BF16/AMX) there"
        )


def with_precision(apply: Apply, precision: str) -> Apply:
    """`apply` whose forward pass runs in `precision` and returns float32 (bf16: under autocast;
    fp32 and tf32: `apply` itself, tf32 being a switch of the device, see `matmul_scope`)."""
    if precision != "bf16":
        return apply

    def bf16_apply(params, x):
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            out = apply(params, x)
        return out.float()

    bf16_apply.module = getattr(apply, "module", None)
    bf16_apply.precision = precision
    return bf16_apply


def compute_dtype(precision: str) -> torch.dtype | None:
    """The dtype the hand-written kernels cast their GEMM operands to (None: leave float32)."""
    return torch.bfloat16 if precision == "bf16" else None


@contextmanager
def matmul_scope(precision: str, device: torch.device) -> Iterator[None]:
    """Within: TF32 matmuls and cuDNN convolutions when `precision` is tf32 on CUDA; the previous
    switches are restored on exit (a warm worker's next job starts from the defaults)."""
    if precision != "tf32" or device.type != "cuda":
        yield
        return
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before

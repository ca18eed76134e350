"""The machine's float32 matmul rate, measured in the same run as the rounds it is compared to."""

import pytest
import torch
from bench_lib import gemm_flops


@pytest.mark.parametrize("n", [512, 1024, 2048])
def test_matmul(benchmark, n):
    g = torch.Generator().manual_seed(n)
    a, b = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
    benchmark.extra_info.update(kind="matmul", n=n, flops=gemm_flops(n))
    benchmark.pedantic(torch.mm, (a, b), rounds=max(5, 2**33 // gemm_flops(n)), warmup_rounds=2)

"""Peak memory of one vectorised FedAvg round (TwoNN), measured in a fresh process.

Run as a script (`python benchmarks/bench_memory.py --clients 100 [--chunk N] [--budget-mb M]`);
prints one JSON object. CPU: resident-set growth, VmHWM after the round minus VmRSS before it (the
peak is reset first where the kernel allows); cuda: torch.cuda.max_memory_allocated growth.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from pathlib import Path

import torch
from bench_lib import RoundCase, engine_round, federation

from fedbench.engine.run import pick_device
from fedbench.engine.vectorised import client_bytes, pick_chunk


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def measure(clients: int, chunk: int | None, budget_mb: int | None, device: str) -> dict:
    """One round of `clients` clients; memory before, peak during, and the chunk used."""
    dev = pick_device(device)
    fed, model, cfg, _ = RoundCase("twonn", clients).build()
    if dev.type != "cpu":
        fed, model = federation(clients, device=dev), model.to(dev)
    changes = {"chunk_size": chunk}
    if budget_mb is not None:
        changes["memory_budget_mb"] = budget_mb
    cfg = dataclasses.replace(cfg, **changes)
    num_params = sum(p.numel() for p in model.parameters())
    size, why = pick_chunk(
        num_params, cfg.batch_size, math.prod(fed.x.shape[1:]), cfg.memory_budget_mb, chunk, dev
    )
    round_ = engine_round(fed, model, cfg, "vectorised")
    out = {
        "clients": clients,
        "chunk": size,
        "chunks": math.ceil(clients / size),
        "chunk_reason": why,
        "budget_mb": cfg.memory_budget_mb,
        "estimate_per_client_mb": client_bytes(num_params, cfg.batch_size, 784) / 2**20,
        "messages_mb": clients * num_params * 4 / 2**20,
        "device": str(dev),
    }
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        before = torch.cuda.memory_allocated(dev)
        round_()
        torch.cuda.synchronize(dev)
        out.update(
            before_mb=before / 2**20,
            peak_mb=torch.cuda.max_memory_allocated(dev) / 2**20,
            method="torch.cuda.max_memory_allocated",
        )
    else:
        before = _status_mb("VmRSS")
        reset = _reset_peak()
        round_()
        out.update(
            before_mb=before,
            peak_mb=_status_mb("VmHWM"),
            method="VmHWM - VmRSS" + ("" if reset else " (peak not resettable: upper bound)"),
        )
    out["growth_mb"] = out["peak_mb"] - out["before_mb"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--chunk", type=int, default=None)
    parser.add_argument("--budget-mb", type=int, default=None)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    print(json.dumps(measure(args.clients, args.chunk, args.budget_mb, args.device)))


if __name__ == "__main__":
    main()

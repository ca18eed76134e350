"""Explicit, named random streams spawned from one run seed (no global seeding anywhere)."""

from __future__ import annotations

import numpy as np
import torch

# Order is part of the format: append new names, never reorder (older runs would change).
STREAMS = (
    "partition",
    "init",
    "sampling",
    "batches",
    "algorithm",
    "standin",
    "eval",
    "augment",
    "server",  # server-side draws of an algorithm (FedEvg's SGLD noise), keyed by round
)


class Streams:
    """Independent seeded streams of one run: `Streams(seed).generator("sampling", round_)`."""

    def __init__(self, seed: int):
        if not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self.seed = int(seed)
        self._children = dict(zip(STREAMS, np.random.SeedSequence(self.seed).spawn(len(STREAMS))))

    def sequence(self, name: str, *key: int) -> np.random.SeedSequence:
        """The SeedSequence of stream `name`, further keyed by integers (round, client, ...)."""
        if name not in self._children:
            raise KeyError(f"unknown random stream {name!r}; valid: {', '.join(STREAMS)}")
        parent = self._children[name]
        if not key:
            return parent
        return np.random.SeedSequence(
            parent.entropy, spawn_key=parent.spawn_key + tuple(int(k) for k in key)
        )

    def generator(self, name: str, *key: int) -> np.random.Generator:
        """A numpy Generator for stream `name` (keyed so it does not depend on call order)."""
        return np.random.default_rng(self.sequence(name, *key))

    def torch_seed(self, name: str, *key: int) -> int:
        """A 63-bit integer seed for a torch.Generator drawn from stream `name`."""
        return int(self.sequence(name, *key).generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))

    def torch_generator(self, name: str, *key: int, device: str | torch.device = "cpu"):
        """A torch.Generator seeded from stream `name`."""
        g = torch.Generator(device=device)
        g.manual_seed(self.torch_seed(name, *key))
        return g


def init_streams(streams: Streams, init_seed: int | None) -> Streams:
    """The streams a run draws initial weights from: its own, or those of a fixed `init_seed`."""
    return streams if init_seed is None else Streams(init_seed)

"""Deterministic training for the SFT-style stages (sft, bc, dpo): the same rows, seed, device model and software
give the same weights, so an SFT policy trained in one GPU session has the digest of the one trained in the next,
and arms trained from either pair in one paper (docs/gpu.md 4: the paper refuses arms from two SFT policies).

Without it, GPU training is not repeatable: on one H200, two sessions' SFT of SmolLM2 on the same trajectories
logged first losses 1.22041 and 1.22083 and exported different weights
(benchmarks/results/gpu/learning_smollm2_26c74b7/README.md). The usual sources are kernels that accumulate with
atomics (the embedding's backward, attention's backward) and cuBLAS's workspace choice.

    result, mode = train_deterministically(lambda: build_and_train(), wanted=True)
    # mode: "strict", or "default: <why>" when an op had no deterministic kernel, or "off"
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

__all__ = ["CUBLAS_WORKSPACE", "train_deterministically"]

T = TypeVar("T")

CUBLAS_WORKSPACE = ":4096:8"
"""cuBLAS's fixed workspace configuration that PyTorch's strict deterministic mode requires (CUDA >= 10.2). It is
read when cuBLAS starts in a process, so the device scripts export it; setting it here covers a process whose
first CUDA work is this training."""


def _no_deterministic_kernel(exc: RuntimeError) -> bool:
    # PyTorch's wording for both cases: an op without a deterministic implementation, and cuBLAS started
    # without the fixed workspace
    return "deterministic" in str(exc)


def train_deterministically(train: Callable[[], T], wanted: bool) -> tuple[T, str]:
    """Run `train()` under `torch.use_deterministic_algorithms(True)` (strict, no warn-only) when `wanted`.

    If an op has no deterministic implementation on this device, `train()` runs again from the start with the
    default algorithms: `train` must build its model and trainer itself, so the second run starts from the same
    weights. Returns (what train returned, the mode it ran in): "strict", "default: <PyTorch's reason>" or "off".
    Any other error propagates. The process's previous setting is restored either way."""
    import torch

    if not wanted:
        return train(), "off"
    previous = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    try:
        torch.use_deterministic_algorithms(True)
        try:
            return train(), "strict"
        except RuntimeError as exc:
            if not _no_deterministic_kernel(exc):
                raise
            reason = str(exc).splitlines()[0][:300]
        torch.use_deterministic_algorithms(False)
        return train(), f"default: {reason}"
    finally:
        torch.use_deterministic_algorithms(previous[0], warn_only=previous[1])

"""The few torch.distributed reductions the trainer needs, also valid with no process group (world 1).

- `all_reduce_sum(x)`: the loss normaliser N of docs/method.md 6 is global across micro-batches AND
  ranks: N = all_reduce_sum(global_token_normaliser(this rank's episode masks)). Summed in float64,
  so token counts stay exact.
- `all_reduce_max(n)`: under ZeRO-3 every rank must run the same number of micro-batches
  (packing.pad_micro_batches(mbs, all_reduce_max(len(mbs)), ...)).
- `all_gather_objects(obj)`: small picklable things (per-rank metrics) to every rank.

Tensors travel on the device the backend needs (CUDA for NCCL, CPU for gloo).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

__all__ = ["all_gather_objects", "all_reduce_max", "all_reduce_sum", "barrier", "rank", "world_size"]


def _active() -> bool:
    return dist.is_available() and dist.is_initialized()


def world_size() -> int:
    """Ranks in the default process group (1 without one)."""
    return dist.get_world_size() if _active() else 1


def rank() -> int:
    """This process's rank in the default process group (0 without one)."""
    return dist.get_rank() if _active() else 0


def _device() -> torch.device:
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_reduce_sum(value: float | torch.Tensor) -> float:
    """Sum of `value` over all ranks, as a Python float (float64 arithmetic)."""
    v = float(value)
    if not _active():
        return v
    t = torch.tensor([v], dtype=torch.float64, device=_device())
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return float(t.item())


def all_reduce_max(value: int) -> int:
    """Maximum of an integer over all ranks."""
    if not _active():
        return int(value)
    t = torch.tensor([int(value)], dtype=torch.int64, device=_device())
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


def all_gather_objects(obj: object) -> list[Any]:
    """[obj of rank 0, obj of rank 1, ...] on every rank (pickled; keep it small)."""
    if not _active():
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def barrier() -> None:
    """Wait for every rank (no-op without a process group)."""
    if _active():
        if dist.get_backend() == "nccl":
            dist.barrier(device_ids=[torch.cuda.current_device()])
        else:
            dist.barrier()

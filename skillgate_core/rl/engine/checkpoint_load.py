"""Load a DeepSpeed resume checkpoint without running code that came with it.

A checkpoint folder lies in the state dir, where anyone with write access can plant a file, and
DeepSpeed loads its files with `torch.load(weights_only=False)`: full pickle, so a planted file runs
whatever it names. Here every file of the checkpoint is unpickled first with `weights_only=True`,
which builds tensors, containers, numbers and strings and only the few classes listed in
SAFE_GLOBALS (what DeepSpeed's own ZeRO checkpoints hold, found by saving one: its loss scaler and
its ZeRO stage enum). A file that needs anything else, or an entry that is not a regular file, is
refused with UnsafeCheckpoint naming it. DeepSpeed then loads through a checkpoint engine that
unpickles the same restricted way, so a file swapped in after the check is refused as well.

    save_engine_checkpoint(engine, Path(ckpt) / "engine", tag="state")
    load_engine_checkpoint(engine, Path(ckpt) / "engine", tag="state")   # UnsafeCheckpoint if planted

A LoRA policy (rl.engine.lora_adapters) is saved without its frozen base weights (the adapters and their
optimizer state only) and loaded onto the base model the engine was built from.
"""

from __future__ import annotations

import contextlib
import stat
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

__all__ = ["UnsafeCheckpoint", "check_checkpoint_files", "load_engine_checkpoint", "safe_globals",
           "save_engine_checkpoint"]


class UnsafeCheckpoint(ValueError):
    """A checkpoint file that needs more than tensors and DeepSpeed's listed classes to load."""


def _safe_classes() -> list[Any]:
    from deepspeed.runtime.fp16.loss_scaler import DynamicLossScaler, LossScaler
    from deepspeed.runtime.zero.config import ZeroStageEnum
    from deepspeed.utils.tensor_fragment import fragment_address

    # DynamicLossScaler: what an fp16 engine saves in place of LossScaler (bf16 and fp32 save LossScaler).
    # fragment_address: a (numel, start) named tuple in a bf16 ZeRO-1/2 optimizer's state (2026-12-01: a
    # SmolLM2 GRPO checkpoint on one H200 was refused for it; CPU runs are fp32 and never save one)
    return [LossScaler, DynamicLossScaler, ZeroStageEnum, fragment_address]


@contextlib.contextmanager
def safe_globals() -> Iterator[None]:
    """The classes DeepSpeed's checkpoints need, allowed to `torch.load(weights_only=True)` here only."""
    with torch.serialization.safe_globals(_safe_classes()):
        yield


def _restricted_load(path: str | Path, map_location: Any = None) -> Any:
    """`torch.load` with the weights-only unpickler and SAFE_GLOBALS; UnsafeCheckpoint otherwise."""
    mmap = zipfile.is_zipfile(path)  # maps the tensors instead of reading them (a check of a large file)
    try:
        with safe_globals():
            return torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
    except Exception as exc:
        reason = str(exc).strip().splitlines()
        why = next((line for line in reason if "GLOBAL" in line or "Unsupported" in line), reason[-1] if reason else "")
        raise UnsafeCheckpoint(  # the file last: Ray shortens a worker's error in the middle
            f"refused: it does not load as tensors and DeepSpeed's own checkpoint classes ({type(exc).__name__}: "
            f"{why.strip()[:200]}); a checkpoint written by skillgate never needs more, so this file was changed "
            f"or planted: resume checkpoint file {path}"
        ) from None


def check_checkpoint_files(folder: Path) -> list[Path]:
    """Check every entry under `folder` (a DeepSpeed save_checkpoint folder); returns the files
    unpickled. `.pt` files must load with the weights-only unpickler; any entry that is not a
    regular file or a folder (a link, a FIFO, a device) is refused, as it could stand for any file."""
    if not folder.is_dir() or folder.is_symlink():
        raise UnsafeCheckpoint(f"resume checkpoint folder {folder} is missing or not a plain folder")
    checked = []
    for path in sorted(folder.rglob("*")):
        mode = path.lstat().st_mode
        if stat.S_ISDIR(mode):
            continue
        if not stat.S_ISREG(mode):
            raise UnsafeCheckpoint(f"resume checkpoint entry {path} is refused: not a regular file or folder")
        if path.suffix == ".pt":
            _restricted_load(path, map_location="cpu")
            checked.append(path)
    return checked


class _WeightsOnlyLoads:
    """DeepSpeed's checkpoint engine with `load` replaced by the restricted one (all else as it was)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def load(self, path: str, map_location: Any = None) -> Any:
        return _restricted_load(path, map_location)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _has_frozen_parameters(engine: Any) -> bool:
    return any(not p.requires_grad for p in engine.module.parameters())


def save_engine_checkpoint(engine: Any, folder: Path, tag: str) -> None:
    """`engine.save_checkpoint(folder, tag)` (COLLECTIVE), leaving out frozen parameters: a LoRA policy's
    checkpoint is its adapters and their optimizer state, not a copy of the base model."""
    if not _has_frozen_parameters(engine):
        engine.save_checkpoint(str(folder), tag=tag)
        return
    # DeepSpeed 0.19 drops the frozen weights it finds in named_parameters(), which names a tied weight once:
    # a tied lm_head (the whole embedding matrix, 57 MB for SmolLM2-135M in bf16) would stay. Its state dict
    # is filtered here against every name, aliases included, for this one save.
    frozen = {n for n, p in engine.module.named_parameters(remove_duplicate=False) if not p.requires_grad}
    deepspeeds_own = engine.module_state_dict

    def without_frozen(*args: Any, **kwargs: Any) -> Any:
        state = deepspeeds_own(*args, **kwargs)
        return {n: t for n, t in state.items() if n not in frozen}

    engine.module_state_dict = without_frozen
    try:
        engine.save_checkpoint(str(folder), tag=tag, exclude_frozen_parameters=True)
    finally:
        del engine.module_state_dict  # the class's method again


def load_engine_checkpoint(engine: Any, folder: Path, tag: str) -> None:
    """`engine.load_checkpoint(folder, tag)` after every file of the checkpoint passed the check, with
    DeepSpeed's loads restricted the same way (COLLECTIVE, like load_checkpoint itself). An engine with
    frozen parameters (LoRA) takes the saved trainable ones and keeps its frozen base weights."""
    check_checkpoint_files(folder / tag)
    saved = engine.checkpoint_engine
    engine.checkpoint_engine = _WeightsOnlyLoads(saved)
    try:
        # strict: every weight of the module is in the file, unless frozen ones were left out on save
        load_path, _ = engine.load_checkpoint(str(folder), tag=tag, load_module_strict=not _has_frozen_parameters(engine))
    finally:
        engine.checkpoint_engine = saved
    if load_path is None:
        raise UnsafeCheckpoint(f"resume checkpoint {folder / tag} could not be loaded by DeepSpeed")

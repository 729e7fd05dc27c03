"""Tiny Hugging Face-style model folders (config.json + safetensors) for export tests."""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["write_model", "write_safetensors"]


def write_safetensors(path: Path, keys: Sequence[str], truncate: int = 0) -> None:
    """A valid safetensors file holding one float32 per key (minus `truncate` bytes at the end)."""
    header = {k: {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]} for i, k in enumerate(keys)}
    raw = json.dumps(header).encode()
    data = struct.pack("<Q", len(raw)) + raw + b"\0" * (4 * len(keys))
    path.write_bytes(data[: len(data) - truncate] if truncate else data)


def write_model(folder: Path, shards: Mapping[str, Sequence[str]] | None = None, config: bool = True) -> None:
    """An HF-style model folder: config.json + one model.safetensors, or index + shards."""
    if config:
        (folder / "config.json").write_text(json.dumps({"model_type": "qwen2", "hidden_size": 8}))
    if shards is None:
        write_safetensors(folder / "model.safetensors", ["embed.weight", "lm_head.weight"])
        return
    weight_map = {k: shard for shard, keys in shards.items() for k in keys}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    for shard, keys in shards.items():
        write_safetensors(folder / shard, keys)

"""A minimal valid HF-style model folder for export tests that never load the weights."""

from __future__ import annotations

import json
import struct
from pathlib import Path


def write_fake_model(folder: Path) -> None:
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen2", "hidden_size": 8}))
    header = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 4)

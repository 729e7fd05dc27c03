"""Stage `sft`: TRL SFTTrainer + LoRA on the collected trajectories, merged into a plain HF model dir.

The training rows are the trajectories' own token streams: input_ids = prompt ids + response ids,
and the loss covers exactly the tokens the teacher produced (the trajectory's loss mask), passed to
TRL as `assistant_masks`. Nothing is re-rendered or re-tokenized, so SFT trains on the same ids the
harness produced and that RL will later sample in the same format.

    train_sft(SFTStageConfig(max_steps=20), {"base_model": m, "trajectories": t}, out)
    -> out/model (merged weights + tokenizer), out/sft_summary.json
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillgate_core.base.config_ranges import NonNegativeInt, PositiveFloat, PositiveInt, check_ranges
from skillgate_core.base.stage_output import StageOutput
from skillgate_core.sft.determinism import train_deterministically

if TYPE_CHECKING:
    from peft import LoraConfig

__all__ = [
    "LORA_TARGETS",
    "LoRATrainingConfig",
    "SFTStageConfig",
    "lora_config",
    "save_policy_export",
    "sft_rows",
    "train_lora_sft",
    "train_sft",
    "trainer_arguments",
]


LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""The attention and MLP projections of Qwen/Llama-style models."""


@dataclass(frozen=True)
class LoRATrainingConfig:
    """The LoRA training settings the sft, bc and dpo stage configs share (train_lora_sft, lora_config and
    the DPO trainer read them); each stage config adds its own fields and may change a default. The
    fields stay flat on the stage config, so a recipe's `[bc] max_steps = 4` is unchanged."""

    max_steps: PositiveInt = 8
    """Optimizer steps."""
    learning_rate: PositiveFloat = 1e-3
    """LoRA learning rate."""
    per_device_batch_size: PositiveInt = 1
    """Rows per step per device (a row: one sequence; for DPO one chosen/rejected pair)."""
    max_length: PositiveInt = 8192
    """Longest row in tokens (prompt + trained turn); a longer row is refused, naming its task."""
    lora_rank: PositiveInt = 8
    """LoRA rank r."""
    lora_alpha: PositiveInt = 16
    """LoRA scaling alpha."""
    lora_targets: tuple[str, ...] = LORA_TARGETS
    """Module names that get LoRA adapters."""
    gradient_checkpointing: bool = False
    """Recompute activations in backward (TRL's default is on): saves memory on large models, costs
    time (measured here, tiny model on CPU, 2 steps of one ~6k-token row: 13.6 s with, 11.6 s without)."""
    seed: NonNegativeInt = 0
    """Trainer seed (data order, adapter init)."""
    deterministic: bool = True
    """Train with PyTorch's deterministic algorithms (strict), so the same rows, seed, device model and software
    give the same weights digest in every session (sft.determinism). Where an op has no deterministic kernel the
    training starts over with the default ones, and the summary's `determinism` says so. False: the default
    algorithms (on a GPU, two runs then differ: benchmarks/results/gpu/learning_smollm2_26c74b7/README.md)."""

    def __post_init__(self) -> None:
        check_ranges(self)
        if not self.lora_targets:
            raise ValueError("lora_targets: expected at least one module name")


@dataclass(frozen=True)
class SFTStageConfig(LoRATrainingConfig):
    """SFT with LoRA (merged at the end), or of every weight (`full_weights`)."""

    max_steps: PositiveInt = 30
    per_device_batch_size: PositiveInt = 2
    max_length: PositiveInt = 8192
    """Longest training sequence in tokens (longer rows are truncated; a row whose prompt alone
    fills it is refused)."""
    only_resolved: bool = True
    """Train only on trajectories whose score is 1 (the teacher's noisy misses are dropped)."""
    full_weights: bool = False
    """Train every weight instead of LoRA adapters (the lora_* fields are then unused). For a policy
    init-model built from scratch: LoRA on a random base keeps the embeddings, the output head and
    the base projections random (measured on an H200, 24.7M policy, r=64: teacher-forced accuracy
    0.92 yet 0/32 eval trials ran a tool call)."""
    warmup_steps: NonNegativeInt = 0
    """Linear learning-rate warm-up over this many steps, then constant (0: constant throughout)."""
    renamed_copies: NonNegativeInt = 0
    """Also train on this many copies of each trajectory under fresh skill names, renamed in its token
    ids (sft.realias; a new name set per copy, seeded by `seed`): memorising names then stops paying,
    copying them from the slate does. 0: the trajectories as collected."""
    shuffle_suffixes: bool = True
    """The renamed copies also permute the suffixes within each lookalike group (skills.aliases), so
    the oracle's suffix, skewed per split by the bench's draws, is no cue to imitate. False: only the
    codename is renamed, as before this option."""


def sft_rows(trajectories: Path, only_resolved: bool, max_length: int, renamed_copies: int = 0,
             tokenizer: Any = None, seed: int = 0, shuffle_suffixes: bool = True) -> list[dict[str, list[int]]]:
    """Pre-tokenized rows {input_ids, assistant_masks} from trajectories.parquet; with `renamed_copies`,
    each trajectory followed by that many copies under fresh skill names (needs the policy's tokenizer;
    `shuffle_suffixes` as in SFTStageConfig)."""
    import random

    from skillgate_core.base.parquet_rows import read_columns, read_rows
    from skillgate_core.sft.realias import renamed_copies as rename

    path = Path(trajectories) / "trajectories.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; expected the output of the collect stage")
    needed = {"prompt_ids", "response_ids", "loss_mask", "score"} | ({"slate_names"} if renamed_copies else set())
    missing = needed - set(read_columns(path))
    if missing:
        raise ValueError(f"{path}: missing columns {sorted(missing)}")
    if renamed_copies and tokenizer is None:
        raise ValueError("sft_rows: renamed_copies needs the policy's tokenizer")
    rng = random.Random(f"sft-renamed-copies::{seed}")
    table = read_rows(path)
    kept = [r for r in table if r["score"] is not None and r["score"] >= 1.0] if only_resolved else table
    rows = []
    for r in kept:
        prompt, response, mask = r["prompt_ids"], r["response_ids"], r["loss_mask"]
        if len(response) != len(mask):
            raise ValueError(f"{path}: task {r.get('task_id')}: response_ids and loss_mask differ in length")
        if len(prompt) >= max_length:
            raise ValueError(f"{path}: task {r.get('task_id')}: prompt of {len(prompt)} tokens leaves nothing to "
                             f"train on within max_length={max_length}; raise sft.max_length")
        rows.append({"input_ids": list(prompt) + list(response), "assistant_masks": [0] * len(prompt) + list(mask)})
        for p2, r2, m2 in rename(prompt, response, mask, r.get("slate_names") or [], tokenizer, renamed_copies, rng,
                                 shuffle_suffixes=shuffle_suffixes):
            if len(p2) < max_length:  # a fresh name can be a token longer; such a copy is left out
                rows.append({"input_ids": p2 + r2, "assistant_masks": [0] * len(p2) + m2})
    if not rows:
        raise ValueError(f"{path}: no trajectory to train on (only_resolved={only_resolved}, {len(table)} rows)")
    return rows


def save_policy_export(model, tokenizer, target: Path) -> Path:
    """Save a plain HF policy dir (config, safetensors, tokenizer with its chat template) and check it
    loads the way every later stage loads a policy; ValueError lists what is wrong."""
    from skillgate_core.ownership.exports import weights_problems

    model.save_pretrained(target, safe_serialization=True)
    tokenizer.save_pretrained(target)
    problems = weights_problems(target)
    try:
        config = json.loads((target / "config.json").read_text())
        if not isinstance(config, dict) or "model_type" not in config:
            problems.append("config.json has no model_type")
    except (OSError, ValueError) as exc:
        problems.append(f"config.json unreadable: {exc}")
    from transformers import AutoTokenizer

    if not getattr(AutoTokenizer.from_pretrained(target), "chat_template", None):
        problems.append("the saved tokenizer has no chat template")
    if problems:
        raise ValueError(f"{target}: invalid policy export: " + "; ".join(problems))
    return target


def lora_config(config: LoRATrainingConfig) -> LoraConfig:
    """The LoRA adapter every SFT-style stage trains (sft, bc, dpo): rank, alpha and targets from
    `config`; no dropout, causal-LM task."""
    from peft import LoraConfig

    return LoraConfig(r=config.lora_rank, lora_alpha=config.lora_alpha, lora_dropout=0.0,
                      target_modules=list(config.lora_targets), task_type="CAUSAL_LM")


def trainer_arguments(config: LoRATrainingConfig, out_dir: Path) -> dict[str, Any]:
    """The TrainingArguments every SFT-style stage passes to TRL (SFTConfig, DPOConfig): steps, rate,
    batch, length and seed from `config`; constant schedule, no saving or reporting, the CPU when
    there is no GPU, scratch under out_dir/_trainer. Each stage adds its own (logging_steps, beta, ...)."""
    import torch

    return {
        "output_dir": str(out_dir / "_trainer"),
        "max_steps": config.max_steps,
        "learning_rate": config.learning_rate,
        "per_device_train_batch_size": config.per_device_batch_size,
        "max_length": config.max_length,
        "save_strategy": "no",
        "report_to": [],
        "seed": config.seed,
        "use_cpu": not torch.cuda.is_available(),
        "dataloader_num_workers": 0,
        "lr_scheduler_type": "constant_with_warmup" if getattr(config, "warmup_steps", 0) else "constant",
        "warmup_steps": getattr(config, "warmup_steps", 0),
        # mixed precision where the GPU has bf16 (fp32 master weights; the CPU path stays fp32)
        "bf16": bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported()),
        "gradient_checkpointing": config.gradient_checkpointing,
        "disable_tqdm": False,
    }


def train_lora_sft(config: LoRATrainingConfig, model_dir: Path, rows: list[dict[str, list[int]]],
                   out_dir: Path, full_weights: bool = False) -> tuple[Path, dict]:
    """TRL SFTTrainer + LoRA on pre-tokenized rows {input_ids, assistant_masks} from the policy at
    `model_dir`; merge, save out_dir/model. Returns (model dir, summary). `full_weights`: no adapter,
    every weight trained (the lora_* settings unused)."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    args = SFTConfig(**trainer_arguments(config, out_dir), logging_steps=max(1, config.max_steps // 10))
    peft_config = None if full_weights else lora_config(config)

    def train() -> tuple[Any, Any]:  # from the base weights each time: a restart must not continue a partial run
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows),
                             processing_class=tokenizer, peft_config=peft_config)
        return trainer, trainer.train()

    (trainer, result), determinism = train_deterministically(train, config.deterministic)
    history = trainer.state.log_history
    losses = [h["loss"] for h in history if "loss" in h]
    accuracies = [h["mean_token_accuracy"] for h in history if "mean_token_accuracy" in h]
    if full_weights:
        trained = trainer.model
    else:
        from peft import PeftModel

        assert isinstance(trainer.model, PeftModel)  # peft_config given: the trainer wraps the model in the adapter
        trained = trainer.model.merge_and_unload()
    target = save_policy_export(trained, tokenizer, out_dir / "model")
    summary = {
        "weights": "full" if full_weights else f"lora r={config.lora_rank}",
        "rows": len(rows),
        "trained_tokens": sum(sum(r["assistant_masks"]) for r in rows),
        "steps": result.global_step,
        "first_loss": losses[0] if losses else None,
        "last_loss": losses[-1] if losses else None,
        "first_token_accuracy": accuracies[0] if accuracies else None,
        "last_token_accuracy": accuracies[-1] if accuracies else None,
        "train_seconds": round(result.metrics.get("train_runtime", 0.0), 2),
        "determinism": determinism,
    }
    return target, summary


def train_sft(config: SFTStageConfig, inputs: Mapping[str, Path], out_dir: Path) -> StageOutput:
    """Train LoRA adapters with TRL's SFTTrainer and merge them (or every weight: `full_weights`), save
    out_dir/model."""
    tokenizer = None
    if config.renamed_copies:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(Path(inputs["base_model"]))
    rows = sft_rows(Path(inputs["trajectories"]), config.only_resolved, config.max_length,
                    renamed_copies=config.renamed_copies, tokenizer=tokenizer, seed=config.seed,
                    shuffle_suffixes=config.shuffle_suffixes)
    target, summary = train_lora_sft(config, Path(inputs["base_model"]), rows, out_dir, full_weights=config.full_weights)
    (out_dir / "sft_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return StageOutput(outputs={"sft_model": target}, metrics=summary)

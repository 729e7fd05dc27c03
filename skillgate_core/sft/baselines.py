"""Stages `bc` and `dpo`: the supervised selection baselines of docs/method.md 7, from the SFT model.

- Gold Selector BC (`train_bc`): SFT (TRL SFTTrainer + LoRA, merged) on [system, user, first
  assistant turn that reads only the gold skill]; the loss covers that turn only.
- SelSkill-style DPO (`train_dpo`): TRL DPOTrainer (sigmoid loss, beta 0.1, LoRA, merged) on pairs
  chosen = that turn, rejected = the same turn with the gold skill swapped for one misleading skill,
  one pair per misleading skill (5 per task).

The turn is the teacher's own first read turn (agent.policies.first_read_turn): an optional
<skill_reasoning> naming the skill, then `read` on /skills/NAME/SKILL.md, ended by <|im_end|> as a
sampled turn is. It names the skill and its location and quotes no description, so swapping the
name and location is the whole swap. Nothing is re-rendered: the prompt is the rl_data row's
`prompt_ids` (rendered once by rl-data-prep with this policy's tokenizer and chat template, the
slate in its frozen order), and the turn is tokenized the way the teacher's turns are
(agent.policies.turn_token_ids). Rows reach TRL as token ids: {input_ids, assistant_masks} for
SFTTrainer; {prompt_ids, chosen_ids, rejected_ids} for DPOTrainer, whose collator takes exactly
those (its text-tokenizing dataset preparation is skipped, see `_TokenIdDPOTrainer`).

Both write out_dir/model, a plain HF policy dir (config, safetensors, tokenizer + chat template)
that eval loads like any policy export; out_dir/{bc,dpo}_summary.json holds the metrics.

    train_bc(BCStageConfig(), {"sft_model": sft, "rl_data": rl / "rl_train.parquet"}, out)
    train_dpo(DPOStageConfig(), {"sft_model": sft, "rl_data": rl / "rl_train.parquet"}, out)
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillgate_core.agent.policies import first_read_turn, turn_token_ids
from skillgate_core.base.config_ranges import NonNegativeInt, PositiveFloat, PositiveInt
from skillgate_core.base.stage_output import StageOutput
from skillgate_core.policy.tokenizer_identity import tokenizer_digest
from skillgate_core.sft.determinism import train_deterministically
from skillgate_core.sft.trainer import (
    LoRATrainingConfig,
    lora_config,
    save_policy_export,
    train_lora_sft,
    trainer_arguments,
)
from skillgate_core.skills.aliases import shown_task_row

__all__ = ["BCStageConfig", "DPOStageConfig", "bc_rows", "dpo_rows", "selection_tasks", "train_bc", "train_dpo"]

@dataclass(frozen=True)
class BCStageConfig(LoRATrainingConfig):
    """Gold Selector BC: LoRA SFT on the gold first read turn (defaults sized for the tiny CPU policy)."""

    max_tasks: NonNegativeInt = 16
    """Training tasks to use (0 = all), taken round-robin over families from the rl_data table."""
    skill_reasoning: bool = True
    """Open the turn with <skill_reasoning>, as the teacher does."""
    evidence: bool = True
    """The <skill_reasoning> states the task's deciding fields before naming the skill, as the reference
    teacher does (agent.policies.selection_reasoning; the rl-data-prep row's `selection_cue`); False, or a
    row without a cue: the one-line reason."""


@dataclass(frozen=True)
class DPOStageConfig(LoRATrainingConfig):
    """SelSkill-style DPO on gold-read vs misleading-read first turns (defaults sized for the tiny CPU
    policy). The reference model is the SFT model: the policy with its LoRA adapter disabled."""

    max_steps: PositiveInt = 6
    learning_rate: PositiveFloat = 5e-4
    max_tasks: NonNegativeInt = 4
    """Training tasks to use (0 = all), taken round-robin over families from the rl_data table."""
    pairs_per_task: PositiveInt = 5
    """Pairs per task: one per misleading skill, in slate order (docs/method.md 7: 5, every misleading skill)."""
    beta: PositiveFloat = 0.1
    """DPO beta (docs/method.md 7: 0.1)."""
    loss_type: str = "sigmoid"
    """TRL DPO loss (docs/method.md 7: sigmoid, the original DPO loss)."""
    skill_reasoning: bool = True
    """Open the turns with <skill_reasoning>, as the teacher does."""
    evidence: bool = True
    """The <skill_reasoning> states the task's deciding fields before naming the skill, as the reference
    teacher does (agent.policies.selection_reasoning; the rl-data-prep row's `selection_cue`); chosen and
    rejected turns state the same evidence and differ only in the name. False, or a row without a cue: the
    one-line reason."""


def selection_tasks(rl_data: Path, model_dir: Path, max_tasks: int) -> list[dict[str, Any]]:
    """The rl_data rows the baselines train on: slate prompts rendered with this policy's tokenizer, the
    slate and gold named as the prompt shows them (a renamed task: its fresh names).

    Order: round-robin over families (each family's tasks by task id), so a small `max_tasks` still
    covers every family; deterministic."""
    from skillgate_core.base.parquet_rows import read_columns, read_rows

    path = Path(rl_data)
    if path.is_dir():
        path = path / "rl_train.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; expected the output of the rl-data-prep stage")
    needed = {"task_id", "family", "gold_name", "slate", "prompt_ids", "tokenizer_digest"}
    missing = needed - set(read_columns(path))
    if missing:
        raise ValueError(f"{path}: missing columns {sorted(missing)}; expected an rl-data-prep table")
    table = read_rows(path)
    if not table:
        raise ValueError(f"{path}: no task rows")
    ours = tokenizer_digest(model_dir)
    for row in table:
        if row["tokenizer_digest"] != ours:
            raise ValueError(f"{path}: task {row['task_id']}: prompt ids were rendered with another tokenizer "
                             f"({row['tokenizer_digest'][:12]}...) than {model_dir}'s ({ours[:12]}...); rerun "
                             "rl-data-prep on this model")
        if row["prompt_ids"] is None:
            raise ValueError(f"{path}: task {row['task_id']}: no slate prompt (the table was prepared for a "
                             "no-skill profile); the selection baselines need the slate variant")
    rows = sorted((_as_shown(r, path) for r in table), key=lambda r: r["task_id"])
    by_family: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_family.setdefault(r["family"], []).append(r)
    ordered = [r for rank in range(max(len(v) for v in by_family.values()))
               for fam in sorted(by_family) for r in by_family[fam][rank: rank + 1]]
    return ordered[:max_tasks] if max_tasks else ordered


def _as_shown(row: dict[str, Any], path: Path) -> dict[str, Any]:
    """The row with its slate and gold under the names its prompt shows (skills.aliases.shown_task_row): its
    read turns must name the shown skill, the one the episode mounts, not the bench's."""
    try:
        return shown_task_row(row)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def _check_gold(task: Mapping[str, Any]) -> list[str]:
    """The task's misleading skills (slate order), after checking its slate names the gold as oracle."""
    slate = task["slate"]
    oracles = [s["name"] for s in slate if s["category"] == "oracle"]
    if oracles != [task["gold_name"]]:
        raise ValueError(f"task {task['task_id']}: slate oracle {oracles} is not gold {task['gold_name']!r}")
    return [s["name"] for s in slate if s["category"] == "misleading"]


def _fits(task_id: str, length: int, max_length: int) -> None:
    if length > max_length:
        raise ValueError(f"task {task_id}: {length} tokens (prompt + first turn) exceed max_length={max_length}")


def _cue(task: Mapping[str, Any], evidence: bool) -> dict[str, Any] | None:
    """The row's selection cue (rl-data-prep `selection_cue`), when evidence is on and the row has one."""
    text = task.get("selection_cue") if evidence else None
    return json.loads(text) if text else None


def bc_rows(tasks: list[dict[str, Any]], tokenizer: Any, reasoning: bool, max_length: int,
            evidence: bool = True) -> list[dict[str, list[int]]]:
    """{input_ids, assistant_masks}: the frozen prompt, then the gold read turn (the only trained tokens)."""
    rows = []
    for task in tasks:
        _check_gold(task)
        prompt = list(task["prompt_ids"])
        turn = turn_token_ids(tokenizer, first_read_turn(task["gold_name"], reasoning, _cue(task, evidence)))
        _fits(task["task_id"], len(prompt) + len(turn), max_length)
        rows.append({"input_ids": prompt + turn, "assistant_masks": [0] * len(prompt) + [1] * len(turn)})
    return rows


def dpo_rows(tasks: list[dict[str, Any]], tokenizer: Any, reasoning: bool, pairs_per_task: int,
             max_length: int, evidence: bool = True) -> list[dict[str, Any]]:
    """{prompt_ids, chosen_ids, rejected_ids, task_id, rejected_name}: gold read turn over each misleading
    read turn (the first `pairs_per_task` misleading skills in slate order)."""
    rows = []
    for task in tasks:
        misleading = _check_gold(task)
        if len(misleading) < pairs_per_task:
            raise ValueError(f"task {task['task_id']}: {len(misleading)} misleading skills on the slate, "
                             f"pairs_per_task={pairs_per_task}")
        prompt = list(task["prompt_ids"])
        cue = _cue(task, evidence)
        chosen = turn_token_ids(tokenizer, first_read_turn(task["gold_name"], reasoning, cue))
        for name in misleading[:pairs_per_task]:
            rejected = turn_token_ids(tokenizer, first_read_turn(name, reasoning, cue))
            _fits(task["task_id"], len(prompt) + max(len(chosen), len(rejected)), max_length)
            rows.append({"prompt_ids": prompt, "chosen_ids": chosen, "rejected_ids": rejected,
                         "task_id": task["task_id"], "rejected_name": name})
    return rows


def train_bc(config: BCStageConfig, inputs: Mapping[str, Path], out_dir: Path) -> StageOutput:
    """Gold Selector BC: LoRA SFT on the gold first read turn; out_dir/model + bc_summary.json."""
    from transformers import AutoTokenizer

    model_dir = Path(inputs["sft_model"])
    tasks = selection_tasks(Path(inputs["rl_data"]), model_dir, config.max_tasks)
    rows = bc_rows(tasks, AutoTokenizer.from_pretrained(model_dir), config.skill_reasoning, config.max_length,
                   config.evidence)
    target, summary = train_lora_sft(config, model_dir, rows, out_dir)
    summary = {"tasks": len(tasks), **summary}
    (out_dir / "bc_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return StageOutput(outputs={"policy_export": target}, metrics=summary)


def _token_id_dpo_trainer():
    from trl import DPOTrainer

    class _TokenIdDPOTrainer(DPOTrainer):
        """DPOTrainer fed rows that are already token ids.

        TRL's DataCollatorForPreference consumes {prompt_ids, chosen_ids, rejected_ids}; the trainer's
        dataset preparation only extracts and tokenizes text fields, which would re-render our prompt
        through the chat template. The rows are complete, so that step is the identity here."""

        def _prepare_dataset(self, dataset, processing_class, args, dataset_name):
            return dataset

    return _TokenIdDPOTrainer


def train_dpo(config: DPOStageConfig, inputs: Mapping[str, Path], out_dir: Path) -> StageOutput:
    """SelSkill-style DPO with LoRA (reference = the SFT model); out_dir/model + dpo_summary.json."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig

    model_dir = Path(inputs["sft_model"])
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tasks = selection_tasks(Path(inputs["rl_data"]), model_dir, config.max_tasks)
    rows = dpo_rows(tasks, tokenizer, config.skill_reasoning, config.pairs_per_task, config.max_length,
                    config.evidence)
    args = DPOConfig(**trainer_arguments(config, out_dir), beta=config.beta, loss_type=[config.loss_type],
                     logging_steps=1, remove_unused_columns=True)
    peft_config = lora_config(config)
    dataset = Dataset.from_list([{k: r[k] for k in ("prompt_ids", "chosen_ids", "rejected_ids")} for r in rows])

    def train():  # from the SFT weights each time: a restart must not continue a partial run
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        trainer = _token_id_dpo_trainer()(model=model, args=args, train_dataset=dataset, processing_class=tokenizer,
                                          peft_config=peft_config)
        return trainer, trainer.train()

    (trainer, result), determinism = train_deterministically(train, config.deterministic)
    logs = [h for h in trainer.state.log_history if "loss" in h]
    losses = [h["loss"] for h in logs]
    if not losses or not all(math.isfinite(x) for x in losses):
        raise FloatingPointError(f"DPO loss is not finite: {losses}")
    target = save_policy_export(trainer.model.merge_and_unload(), tokenizer, out_dir / "model")
    summary = {
        "tasks": len(tasks),
        "pairs": len(rows),
        "steps": result.global_step,
        "beta": config.beta,
        "loss_type": config.loss_type,
        "first_loss": losses[0],
        "last_loss": losses[-1],
        "last_reward_accuracy": next((h["rewards/accuracies"] for h in reversed(logs) if "rewards/accuracies" in h),
                                     None),
        "last_reward_margin": next((h["rewards/margins"] for h in reversed(logs) if "rewards/margins" in h), None),
        "train_seconds": round(result.metrics.get("train_runtime", 0.0), 2),
        "determinism": determinism,
    }
    (out_dir / "dpo_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return StageOutput(outputs={"policy_export": target}, metrics=summary)

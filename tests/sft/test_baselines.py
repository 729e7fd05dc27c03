"""Stages bc and dpo (docs/method.md 7 supervised selection baselines) on a real bench, a real tiny policy
(standing in for the SFT model: any HF policy dir is a valid init) and the real rl-data-prep table."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from skillgate_core.agent.policies import first_read_turn
from skillgate_core.base.paths import state_layout
from skillgate_core.pipeline.run import run_stage
from skillgate_core.policy.tiny_model import TinyModelConfig, build_tiny_model
from skillgate_core.rl.data_prep import RLDataPrepConfig, prepare_rl_data
from skillgate_core.sft.baselines import (
    BCStageConfig,
    DPOStageConfig,
    bc_rows,
    dpo_rows,
    selection_tasks,
    train_bc,
    train_dpo,
)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, bench) -> dict[str, Path]:
    """The session's small bench (tests/support/tiny_fixtures.py), a tiny policy and its rl-data-prep table."""
    root = tmp_path_factory.mktemp("baselines")
    model = build_tiny_model(TinyModelConfig(vocab_size=700, corpus_lines=400, hidden_size=32), {}, root)
    policy = model.outputs["base_model"]
    rl = prepare_rl_data(RLDataPrepConfig(profile="mixed_task_reward"), {"bench": bench, "sft_model": policy},
                         root / "rl")
    return {"sft_model": policy, "rl_data": rl.outputs["rl_data"], "bench": bench}


def changed_parameters(a: Path, b: Path) -> list[str]:
    from transformers import AutoModelForCausalLM

    pa = dict(AutoModelForCausalLM.from_pretrained(a).named_parameters())
    pb = dict(AutoModelForCausalLM.from_pretrained(b).named_parameters())
    assert pa.keys() == pb.keys(), "an export must have the SFT model's parameters, no adapter left"
    return [n for n in pa if (pa[n] - pb[n]).abs().max().item() > 0]


def generates(model_dir: Path, prompt_ids: list[int]) -> list[int]:
    """Load the export the way any later stage loads a policy and sample a few tokens."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tok = AutoTokenizer.from_pretrained(model_dir)
    assert tok.chat_template and tok.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False,
                                                         add_generation_prompt=True).endswith("assistant\n")
    out = model.generate(torch.tensor([prompt_ids[-64:]]), max_new_tokens=4, do_sample=False)
    return out[0, 64:].tolist()


def test_rows_are_the_frozen_prompt_then_the_teachers_first_read_turn(inputs):
    import json

    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(inputs["sft_model"])
    tasks = selection_tasks(inputs["rl_data"], inputs["sft_model"], max_tasks=4)
    assert len({t["family"] for t in tasks}) == 4, "a small sample still covers every family"
    (row,) = bc_rows(tasks[:1], tok, reasoning=True, max_length=100_000)
    task = tasks[0]
    prompt_len = len(task["prompt_ids"])
    assert row["input_ids"][:prompt_len] == task["prompt_ids"] and sum(row["assistant_masks"][:prompt_len]) == 0
    turn = tok.decode(row["input_ids"][prompt_len:])
    gold = task["gold_name"]
    cue = json.loads(task["selection_cue"])
    assert turn == first_read_turn(gold, cue=cue) + "<|im_end|>" and all(row["assistant_masks"][prompt_len:])
    assert turn.startswith("<skill_reasoning>") and f'"path": "/skills/{gold}/SKILL.md"' in turn

    pairs = dpo_rows(tasks[:2], tok, reasoning=True, pairs_per_task=5, max_length=100_000)
    assert len(pairs) == 10
    misleading = [s["name"] for s in task["slate"] if s["category"] == "misleading"]
    assert [p["rejected_name"] for p in pairs[:5]] == misleading
    for pair in pairs[:5]:
        assert pair["prompt_ids"] == task["prompt_ids"]
        chosen, rejected = tok.decode(pair["chosen_ids"]), tok.decode(pair["rejected_ids"])
        assert chosen == turn and rejected == turn.replace(gold, pair["rejected_name"])
    with pytest.raises(ValueError, match=rf"task {task['task_id']}: \d+ tokens .* exceed max_length=100"):
        bc_rows(tasks[:1], tok, reasoning=True, max_length=100)


def test_the_read_turns_state_the_teachers_evidence_and_differ_only_in_the_name(inputs):
    import json

    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(inputs["sft_model"])
    tasks = selection_tasks(inputs["rl_data"], inputs["sft_model"], max_tasks=2)
    cue = json.loads(tasks[0]["selection_cue"])
    (bc,) = bc_rows(tasks[:1], tok, True, 8192)
    text = tok.decode(bc["input_ids"][len(tasks[0]["prompt_ids"]):])
    assert f"revision {cue['revision']}" in text and cue["output"] in text
    assert text.startswith(first_read_turn(tasks[0]["gold_name"], True, cue))
    assert bc_rows(tasks[:1], tok, True, 8192, evidence=False)[0]["input_ids"] != bc["input_ids"]
    pair = dpo_rows(tasks[:1], tok, True, 1, 8192)[0]
    chosen = tok.decode(pair["chosen_ids"])
    rejected = tok.decode(pair["rejected_ids"])
    cut = chosen.index(tasks[0]["gold_name"])
    assert chosen[:cut] == rejected[:cut] and f"revision {cue['revision']}" in chosen[:cut]


def test_a_renamed_task_trains_the_read_of_the_name_its_prompt_shows(inputs, tmp_path):
    """rl-data-prep renders a renamed task's prompt with fresh skill names (the learning result renames half):
    its BC turn and DPO pairs read the shown names, never the bench's, which the prompt does not contain."""
    import json

    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(inputs["sft_model"])
    renamed = prepare_rl_data(RLDataPrepConfig(profile="mixed_task_reward", max_tasks=2, renamed_rate=1.0),
                              {"bench": inputs["bench"], "sft_model": inputs["sft_model"]}, tmp_path / "renamed")
    bench_rows = {r["task_id"]: r for r in pl.read_parquet(renamed.outputs["rl_data"]).to_dicts()}
    tasks = selection_tasks(renamed.outputs["rl_data"], inputs["sft_model"], 0)
    assert len(tasks) == 2
    for task in tasks:
        aliases = json.loads(bench_rows[task["task_id"]]["skill_aliases"])
        bench_gold = bench_rows[task["task_id"]]["gold_name"]
        assert task["gold_name"] == aliases[bench_gold] != bench_gold
        prompt = tok.decode(task["prompt_ids"])
        assert task["gold_name"] in prompt and bench_gold not in prompt
        (row,) = bc_rows([task], tok, reasoning=True, max_length=100_000)
        cue = json.loads(task["selection_cue"])
        assert tok.decode(row["input_ids"][len(task["prompt_ids"]):]) == first_read_turn(task["gold_name"], cue=cue) + "<|im_end|>"
        pairs = dpo_rows([task], tok, reasoning=True, pairs_per_task=5, max_length=100_000)
        assert {p["rejected_name"] for p in pairs} <= set(aliases.values())
        assert all(p["rejected_name"] in prompt for p in pairs)


def test_the_table_must_hold_slate_prompts_of_this_tokenizer(inputs, tiny_model_dir, tmp_path):
    bare = prepare_rl_data(RLDataPrepConfig(profile="no_skill", max_tasks=2),
                           {"bench": inputs["bench"], "sft_model": inputs["sft_model"]}, tmp_path / "bare")
    with pytest.raises(ValueError, match="no slate prompt .*no-skill profile"):
        selection_tasks(bare.outputs["rl_data"], inputs["sft_model"], 0)
    other = tiny_model_dir  # the session's tiny policy: another tokenizer (600 tokens, not 700)
    with pytest.raises(ValueError, match="rendered with another tokenizer"):
        selection_tasks(inputs["rl_data"], other, 0)


def test_bc_trains_and_exports_a_loadable_policy(inputs, tmp_path):
    out = train_bc(BCStageConfig(max_tasks=2, max_steps=1, learning_rate=5e-3), inputs, tmp_path)
    export = out.outputs["policy_export"]
    assert out.metrics["steps"] == 1 and out.metrics["tasks"] == 2 and out.metrics["first_loss"] > 0
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in export.iterdir()}
    changed = changed_parameters(export, inputs["sft_model"])
    assert any("q_proj" in n for n in changed), "the LoRA update must land in the merged weights"
    prompt = pl.read_parquet(inputs["rl_data"])["prompt_ids"][0].to_list()
    assert len(generates(export, prompt)) == 4


def test_dpo_trains_with_a_finite_loss_and_exports_a_loadable_policy(inputs, tmp_path):
    import math

    out = train_dpo(DPOStageConfig(max_tasks=1, pairs_per_task=1, max_steps=1, learning_rate=5e-3), inputs, tmp_path)
    m = out.metrics
    assert m["pairs"] == 1 and m["steps"] == 1 and m["beta"] == 0.1 and m["loss_type"] == "sigmoid"
    # Step one: the policy is its reference (LoRA B = 0), so the sigmoid DPO loss is exactly log 2.
    assert math.isfinite(m["first_loss"]) and m["first_loss"] == pytest.approx(math.log(2), abs=1e-4)
    export = out.outputs["policy_export"]
    assert any("q_proj" in n for n in changed_parameters(export, inputs["sft_model"]))
    prompt = pl.read_parquet(inputs["rl_data"])["prompt_ids"][0].to_list()
    assert len(generates(export, prompt)) == 4


def completion_logp(model, prompt_ids: list[int], completion_ids: list[int]) -> float:
    """Summed log-probability of `completion_ids` after `prompt_ids` under `model`."""
    import torch

    ids = torch.tensor([prompt_ids + completion_ids])
    with torch.no_grad():
        logps = torch.log_softmax(model(ids).logits[0, :-1].float(), dim=-1)
    targets = ids[0, 1:]
    picked = logps.gather(1, targets[:, None])[:, 0]
    return picked[len(prompt_ids) - 1:].sum().item()


@pytest.mark.slow
def test_bc_and_dpo_stages_with_their_default_configs(inputs, skillgate_home):
    """The registered stages with the configs the recipes use (tiny defaults: about a minute on CPU):
    BC makes the gold read turn likelier, DPO widens the gold-over-misleading margin."""
    import math

    from transformers import AutoModelForCausalLM, AutoTokenizer

    stage_inputs = {"sft_model": inputs["sft_model"], "rl_data": inputs["rl_data"]}
    bc = run_stage("bc", BCStageConfig(), stage_inputs, state_layout())
    dpo = run_stage("dpo", DPOStageConfig(), stage_inputs, state_layout())
    assert bc.metrics["steps"] == BCStageConfig().max_steps and bc.metrics["tasks"] == BCStageConfig().max_tasks
    assert dpo.metrics["pairs"] == 5 * DPOStageConfig().max_tasks
    assert all(math.isfinite(dpo.metrics[k]) for k in ("first_loss", "last_loss"))
    for record in (bc, dpo):
        export = Path(record.outputs["policy_export"])
        assert changed_parameters(export, inputs["sft_model"])
        assert len(generates(export, pl.read_parquet(inputs["rl_data"])["prompt_ids"][0].to_list())) == 4

    tok = AutoTokenizer.from_pretrained(inputs["sft_model"])
    tasks = selection_tasks(inputs["rl_data"], inputs["sft_model"], DPOStageConfig().max_tasks)
    sft, bc_model, dpo_model = (AutoModelForCausalLM.from_pretrained(p) for p in (
        inputs["sft_model"], bc.outputs["policy_export"], dpo.outputs["policy_export"]))
    row = bc_rows(tasks[:1], tok, reasoning=True, max_length=100_000)[0]
    n = row["assistant_masks"].index(1)
    gold = row["input_ids"][n:]
    assert completion_logp(bc_model, row["input_ids"][:n], gold) > completion_logp(sft, row["input_ids"][:n], gold)
    margins = []
    for pair in dpo_rows(tasks, tok, reasoning=True, pairs_per_task=5, max_length=100_000):
        def margin(model, pair=pair) -> float:
            return (completion_logp(model, pair["prompt_ids"], pair["chosen_ids"])
                    - completion_logp(model, pair["prompt_ids"], pair["rejected_ids"]))
        margins.append(margin(dpo_model) - margin(sft))
    assert sum(margins) / len(margins) > 0, margins

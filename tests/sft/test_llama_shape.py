"""SFT (LoRA and full weights), BC and DPO on the pretrained policy's shape: a tiny Llama (no attention
bias, 9 query heads over 3 KV heads) built by init-model, through the same stage functions as the demo's
Qwen2. Each trains and exports a plain Llama dir that the next stage loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillgate_core.agent.collect import CollectConfig, collect_trajectories
from skillgate_core.benchgen import BenchBuildConfig, build_suite
from skillgate_core.policy.init_model import InitModelConfig, init_model
from skillgate_core.rl.data_prep import RLDataPrepConfig, prepare_rl_data
from skillgate_core.sft.baselines import BCStageConfig, DPOStageConfig, train_bc, train_dpo
from skillgate_core.sft.trainer import SFTStageConfig, train_sft


@pytest.fixture(scope="module")
def llama_inputs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("llama-sft")
    bench = root / "bench"
    build_suite(BenchBuildConfig(seed=3, train_skills_per_cell=1, train_tasks_per_skill=1, eval_tasks=4,
                                 slate_tasks=4), bench)
    model = init_model(InitModelConfig(vocab_size=1500, corpus_lines=1500, hidden_size=36, intermediate_size=64,
                                       num_attention_heads=9, num_key_value_heads=3, architecture="llama"),
                       {}, root).outputs["base_model"]
    (root / "collect").mkdir()
    traj = collect_trajectories(CollectConfig(max_tasks=2, seed=1), {"bench": bench, "base_model": model},
                                root / "collect")
    rl = prepare_rl_data(RLDataPrepConfig(profile="mixed_task_reward"), {"bench": bench, "sft_model": model},
                         root / "rl")
    return {"base_model": model, "sft_model": model, "trajectories": traj.outputs["trajectories"],
            "rl_data": rl.outputs["rl_data"], "bench": bench}


def _changed(a: Path, b: Path) -> list[str]:
    from transformers import AutoModelForCausalLM

    pa = dict(AutoModelForCausalLM.from_pretrained(a).named_parameters())
    pb = dict(AutoModelForCausalLM.from_pretrained(b).named_parameters())
    assert type(AutoModelForCausalLM.from_pretrained(a)).__name__ == "LlamaForCausalLM"
    assert pa.keys() == pb.keys(), "an export must keep the base's parameters, no adapter left"
    return [n for n in pa if (pa[n] - pb[n]).abs().max().item() > 0]


# both by default: full weights on a Llama (tied embeddings) is the learning result's SFT (SmolLM2, docs/gpu.md 5)
@pytest.mark.parametrize("full_weights", [False, True])
def test_sft_trains_and_exports_a_llama(llama_inputs, tmp_path, full_weights):
    out = train_sft(SFTStageConfig(max_steps=2, per_device_batch_size=1, learning_rate=5e-3,
                                   full_weights=full_weights), llama_inputs, tmp_path)
    assert out.metrics["steps"] == 2 and out.metrics["first_loss"] is not None
    changed = _changed(out.outputs["sft_model"], llama_inputs["base_model"])
    assert any("q_proj" in n for n in changed)
    assert full_weights == any("embed_tokens" in n for n in changed)


@pytest.mark.slow  # ~14 s; by default test_baselines trains and exports BC and DPO (same stage functions, same
# checks and more) on Qwen2, and the LoRA case above runs their shared LoRA train-and-merge on this Llama shape
def test_bc_and_dpo_train_and_export_a_llama(llama_inputs, tmp_path):
    bc = train_bc(BCStageConfig(max_tasks=2, max_steps=1, learning_rate=5e-3), llama_inputs, tmp_path / "bc")
    assert bc.metrics["steps"] == 1 and any("q_proj" in n for n in _changed(bc.outputs["policy_export"],
                                                                              llama_inputs["sft_model"]))
    dpo = train_dpo(DPOStageConfig(max_tasks=1, pairs_per_task=1, max_steps=1, learning_rate=5e-3), llama_inputs,
                    tmp_path / "dpo")
    assert dpo.metrics["steps"] == 1 and any("q_proj" in n for n in _changed(dpo.outputs["policy_export"],
                                                                               llama_inputs["sft_model"]))

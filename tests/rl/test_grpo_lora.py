"""GRPO with LoRA adapters (GRPOConfig.lora_rank > 0, rl.engine.lora_adapters): only the adapters train, the
replica samples with the merged weights, and a checkpoint is the adapters and their Adam state, small enough
to travel, from which a resume continues exactly where the run stopped."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from test_selector_credit_update import _group  # the fixed group of four episodes (same folder)

from skillgate_core.rl import grpo
from skillgate_core.rl.engine.launch import run_in_process
from skillgate_core.rl.engine.zero_choice import choose_zero, explicit_zero, lora_zero
from skillgate_core.rl.grpo_config import GRPOConfig
from skillgate_core.rl.profiles import get_profile
from skillgate_core.rl.samples import build_samples

PROFILE = "selector_clean_oracle_action_credit"
RANK = 4


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _runs(ctx, payload):
    """Three LoRA engines on the same batch: 3 steps straight; 2 steps then a checkpoint; a fresh engine
    (other adapter init) loading it and taking step 3. Plus a full-weight engine's checkpoint, for size."""
    model_dir, out = payload
    from transformers import AutoTokenizer

    from skillgate_core.rl.engine.checkpoint_load import load_engine_checkpoint, save_engine_checkpoint
    from skillgate_core.rl.engine.deepspeed_engine import (
        EngineConfig,
        build_engine,
        gathered_state_dict,
        load_replica,
        refresh_replica,
        resolve_zero,
    )
    from skillgate_core.rl.engine.packing import PackingConfig, pack_samples

    tok = AutoTokenizer.from_pretrained(model_dir)
    samples, _ = build_samples([_group(tok)], get_profile(PROFILE), chunk_groups=4)
    cfg = replace(GRPOConfig(profile=PROFILE, num_workers=1, launcher="process"), learning_rate=1e-2, beta=0.0)
    lora = EngineConfig(lr=cfg.learning_rate, weight_decay=0.0, grad_clip=0.0, lora_rank=RANK)

    def step(engine):
        grpo.update_policy(engine, None, samples, cfg, pad_token_id=0, device=torch.device("cpu"))

    def weights(engine) -> dict:
        # the merged plain model's names and tensors (numpy: a worker returns no tensors)
        return {n: t.numpy() for n, t in gathered_state_dict(engine).items()}

    result: dict = {"zero": resolve_zero(model_dir, lora)}
    torch.manual_seed(0)
    straight = build_engine(model_dir, lora)
    result["trainable"] = sorted(n for n, p in straight.module.named_parameters() if p.requires_grad)
    result["start"] = weights(straight)
    replica = load_replica(model_dir, lora)
    step(straight)
    refresh_replica(replica, straight)
    (mb,) = pack_samples([samples[0]], PackingConfig(max_tokens=4096))
    with torch.no_grad():
        ids = mb.input_ids.view(1, -1)
        result["engine_logits"] = straight.module(input_ids=ids).logits.float().numpy()
        result["replica_logits"] = replica(input_ids=ids).logits.float().numpy()
    step(straight)
    step(straight)
    result["straight"] = weights(straight)

    torch.manual_seed(0)
    first = build_engine(model_dir, lora)
    step(first)
    step(first)
    save_engine_checkpoint(first, Path(out) / "lora", "state")
    torch.manual_seed(123)  # other adapter init: only the checkpoint can make it the same
    resumed = build_engine(model_dir, lora)
    load_engine_checkpoint(resumed, Path(out) / "lora", "state")
    step(resumed)
    result["resumed"] = weights(resumed)

    full = build_engine(model_dir, EngineConfig(lr=cfg.learning_rate, weight_decay=0.0, grad_clip=0.0, zero_stage=2))
    step(full)
    save_engine_checkpoint(full, Path(out) / "full", "state")
    result["bytes"] = {"lora": _folder_bytes(Path(out) / "lora"), "full": _folder_bytes(Path(out) / "full")}
    result["params"] = sum(p.numel() for p in full.module.parameters())
    result["adapter_params"] = sum(p.numel() for p in first.module.parameters() if p.requires_grad)
    result["folder"] = out
    return result


@pytest.fixture(scope="module")
def runs(tiny_llama_dir, tmp_path_factory):
    return run_in_process(_runs, (str(tiny_llama_dir), str(tmp_path_factory.mktemp("lora")))).results[0]


def test_only_the_adapters_train_and_the_stage_is_at_most_2(runs):
    assert runs["trainable"] and all(".lora_A." in n or ".lora_B." in n for n in runs["trainable"])
    assert runs["zero"].stage == 2 and "LoRA" in runs["zero"].reason  # auto's CPU stage 3, held to 2


def test_the_replica_gets_the_merged_weights(runs):
    moved = [n for n in runs["start"] if not (runs["start"][n] == runs["straight"][n]).all()]
    assert moved and all(n.endswith("_proj.weight") for n in moved)  # the plain names, the targets moved
    engine, replica = runs["engine_logits"], runs["replica_logits"]
    assert abs(engine).max() > 0
    np.testing.assert_allclose(replica, engine, rtol=1e-5, atol=1e-5)


def test_two_steps_checkpoint_resume_one_step_is_three_steps_straight(runs):
    straight, resumed = runs["straight"], runs["resumed"]
    assert set(straight) == set(resumed)
    for name in straight:
        np.testing.assert_allclose(resumed[name], straight[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_the_checkpoint_is_a_small_fraction_of_the_full_one(runs):
    sizes = runs["bytes"]
    # adapters + fp32 Adam moments, against every weight + its moments: about adapter_params / params
    share = runs["adapter_params"] / runs["params"]
    print(f"lora checkpoint {sizes['lora']} B, full {sizes['full']} B, adapter params {runs['adapter_params']} of "
          f"{runs['params']} ({share:.3f})")
    assert sizes["lora"] < 0.5 * sizes["full"]


def test_lora_never_runs_at_stage_3():
    auto3 = choose_zero(10**6, 1, None, "fp32")
    assert auto3.stage == 3 and lora_zero(auto3).stage == 2
    assert lora_zero(explicit_zero(1)) == explicit_zero(1)
    with pytest.raises(ValueError, match="grpo.zero_stage"):
        lora_zero(explicit_zero(3))
    with pytest.raises(ValueError, match="grpo.zero_stage = 3 with grpo.lora_rank"):
        GRPOConfig(lora_rank=8, zero_stage=3)
    assert GRPOConfig(lora_rank=8).lora_rank == 8


def _next_second() -> None:
    # a segment is named by the second it starts in and the pid (rl.grpo_stage): two runs of one process in
    # one second would share a segment, which ownership refuses
    time.sleep(1.05 - time.time() % 1)


def _saved_module_names(folder: Path) -> list[str]:
    from skillgate_core.rl.engine.checkpoint_load import safe_globals

    with safe_globals():
        state = torch.load(next(folder.rglob("*model_states.pt")), map_location="cpu", weights_only=True)
    return sorted(state["module"])


def test_the_checkpoint_leaves_out_every_frozen_weight_tied_ones_too(runs):
    names = _saved_module_names(Path(runs["folder"]) / "lora")
    assert names and all(".lora_A." in n or ".lora_B." in n for n in names), [n for n in names if ".lora_" not in n]


def test_a_lora_stage_run_resumes_and_exports_a_plain_model(tmp_path, bench, policy, skillgate_home):
    """Through the stage (one process): checkpoint at step 1, resume to step 2, the export is the merged plain
    model (no adapter names, every weight of the base present), and a resume with another lora_rank is refused."""
    from safetensors.torch import load_file

    from skillgate_core.rl.data_prep import RLDataPrepConfig, prepare_rl_data
    from skillgate_core.rl.grpo_stage import train_grpo

    rl = tmp_path / "rl"
    prepare_rl_data(RLDataPrepConfig(max_tasks=4), {"bench": bench, "sft_model": policy}, rl)
    inputs = {"sft_model": policy, "rl_data": rl, "bench": bench}
    tiny = dict(profile=PROFILE, steps=1, num_workers=1, launcher="process", prompts_per_step=1, group_size=2,
                rollout_source="teacher", max_turns=4, teacher_misleading_rate=0.5, teacher_no_read_rate=0.0,
                learning_rate=1e-2, max_rejected_groups=8, backend="bwrap", sandbox_workers=2, lora_rank=RANK)
    (tmp_path / "a").mkdir()
    first = train_grpo(GRPOConfig(**tiny), inputs, tmp_path / "a")
    assert first.metrics["zero_stage_resolved"] == 2 and "LoRA" in first.metrics["zero_stage_reason"]
    (checkpoint,) = [Path(c["path"]) for c in first.metrics["checkpoints"]]
    names = _saved_module_names(checkpoint)
    assert names and all(".lora_" in n for n in names)
    experiment = first.metrics["experiment_id"]
    with pytest.raises(Exception, match="lora_rank"):
        _next_second()
        (tmp_path / "c").mkdir()
        train_grpo(GRPOConfig(**{**tiny, "steps": 2, "lora_rank": RANK * 2, "resume_experiment": experiment}),
                   inputs, tmp_path / "c")
    _next_second()
    (tmp_path / "b").mkdir()
    second = train_grpo(GRPOConfig(**{**tiny, "steps": 2, "resume_experiment": experiment}), inputs, tmp_path / "b")
    base = load_file(str(next(Path(policy).glob("*.safetensors"))))
    exported = load_file(str(next(Path(second.outputs["policy_export"]).glob("*.safetensors"))))
    assert set(exported) == set(base)
    moved = {k for k in base if not torch.equal(base[k], exported[k])}
    assert moved and all(k.endswith("_proj.weight") for k in moved), sorted(moved)[:5]

"""Real DeepSpeed ZeRO-3 on CPU (gloo), in this process: the engine, the gather, the replica, one step.

The 2-worker Ray equivalence of the same step is in test_rl_launch.py (slow).
"""

from __future__ import annotations

import math

import pytest
import torch
from rl_workers import StepCase, engine_checks_worker, grpo_step_worker

from skillgate_core.rl.engine import EngineConfig, build_engine, deepspeed_config
from skillgate_core.rl.launch import run_in_process


def test_deepspeed_config_is_method_optimizer_with_caller_owned_accumulation():
    ds = deepspeed_config(EngineConfig())
    params = ds["optimizer"]["params"]
    assert ds["optimizer"]["type"] == "AdamW"
    assert (params["lr"], params["betas"], params["weight_decay"]) == (1e-6, [0.9, 0.98], 0.1)
    assert params["torch_adam"] is True  # torch AdamW on the shards: no compiled optimizer on CPU
    assert "scheduler" not in ds  # constant lr
    assert ds["managed_gradient_accumulation"] is False
    assert ds["zero_optimization"]["stage"] == 3 and ds["gradient_clipping"] == 1.0
    assert ds["bf16"]["enabled"] is False  # CPU default: fp32
    bf16 = deepspeed_config(EngineConfig(dtype="bf16"))
    assert bf16["bf16"]["enabled"] and bf16["data_types"]["grad_accum_dtype"] == "fp32"
    assert bf16["communication_data_type"] == "fp32"
    offload = deepspeed_config(EngineConfig(offload_optimizer=True))
    assert offload["optimizer"]["params"]["torch_adam"] is False  # DeepSpeedCPUAdam
    assert offload["zero_optimization"]["offload_optimizer"]["device"] == "cpu"
    ref = deepspeed_config(EngineConfig(), inference=True)
    assert "optimizer" not in ref and ref["zero_optimization"]["stage"] == 3
    with pytest.raises(ValueError):
        EngineConfig(betas=(0.9, 1.0))


def test_engine_needs_a_process_group(tiny_model_dir):
    with pytest.raises(RuntimeError, match="process group"):
        build_engine(tiny_model_dir, EngineConfig())


def test_zero3_engine_gathers_exact_weights_in_full_size_buckets(tiny_policy_dir):
    [r] = run_in_process(engine_checks_worker, str(tiny_policy_dir)).results
    assert r["placeholders_empty"]  # really ZeRO-3: parameters are size-0 placeholders
    assert r["gathered_equals_checkpoint"]  # the gather returns the checkpoint's exact weights
    assert r["only_rank_elsewhere_is_empty"]
    assert r["bucket_names"] == r["param_names"]  # every parameter once, in order
    assert len(r["bucket_sizes"]) > 2
    assert all(size <= r["bucket_limit"] or size == max(r["bucket_sizes"]) for size in r["bucket_sizes"])
    assert r["ratio_exactly_one"] and r["new_requires_grad"]
    assert r["reference_equals_policy"]  # the ZeRO-3 reference holds the same initial weights
    assert r["no_reference_at_beta_0"]


def test_zero3_step_then_replica_refresh_in_process(tiny_policy_dir):
    tiny_model_dir = tiny_policy_dir  # both shapes: Qwen2 and Llama (SmolLM2's)
    case = StepCase(model_dir=str(tiny_model_dir))
    [r] = run_in_process(grpo_step_worker, case).results
    assert r["world_size"] == 1 and r["lr"] == pytest.approx(1e-3)
    assert math.isfinite(r["loss"]) and r["loss"] != 0.0 and r["grad_norm"] > 0
    assert r["clipped_tokens"] > 0  # the perturbed old log-probs exercise the clip
    weights = torch.load(r["weights"])
    from transformers import AutoModelForCausalLM

    before = dict(AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).named_parameters())
    moved = max((weights[n] - p.detach()).abs().max().item() for n, p in before.items())
    assert 1e-4 < moved <= 1.2e-3  # an Adam step of lr 1e-3 (+ weight decay) moves each weight <= ~lr
    # the replica holds exactly the gathered weights, and its logits equal the engine's: same
    # fp32 weights, same kernels, so the tolerance is 0 (bitwise)
    assert r["replica_equal"]
    assert r["logit_gap"] == 0.0


def test_auto_attention_packs_with_the_varlen_kernel_on_a_gpu_where_it_runs(monkeypatch):
    """The choice only (the kernel itself: tests/rl/test_varlen_attention.py, and the GPU benchmarks):
    on CPU sdpa; on a GPU flash-attn when importable, else torch_varlen when its self-check passes."""
    import transformers.utils

    from skillgate_core.rl import engine
    from skillgate_core.rl.varlen_attention import TORCH_VARLEN

    assert engine._attn_implementation(EngineConfig()) == "sdpa"  # this CPU machine
    assert engine._attn_implementation(EngineConfig(attn_implementation="eager")) == "eager"
    monkeypatch.setattr(engine, "_device_type", lambda: "cuda")
    monkeypatch.setattr(transformers.utils, "is_flash_attn_2_available", lambda: False)
    for usable, want in ((True, TORCH_VARLEN), (False, "sdpa")):
        monkeypatch.setattr(engine, "varlen_usable", lambda usable=usable: usable)
        assert engine._attn_implementation(EngineConfig()) == want
    monkeypatch.setattr(transformers.utils, "is_flash_attn_2_available", lambda: True)
    assert engine._attn_implementation(EngineConfig()) == "flash_attention_2"


def test_overlap_comm_is_asked_only_of_the_stages_that_take_it(monkeypatch):
    # DeepSpeed refuses overlap_comm below stage 2 (the z0 preset failed so on the H200, 2026-11-30)
    import skillgate_core.rl.engine as engine

    monkeypatch.setattr(engine, "_device_type", lambda: "cuda")
    stages = {z: deepspeed_config(EngineConfig(zero_stage=z))["zero_optimization"]["overlap_comm"] for z in range(4)}
    assert stages == {0: False, 1: False, 2: True, 3: True}

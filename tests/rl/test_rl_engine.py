"""Real DeepSpeed ZeRO-3 on CPU (gloo), in this process: the engine, the gather, the replica, one step.

The 2-worker Ray equivalence of the same step is in test_rl_launch.py (slow).
"""

from __future__ import annotations

import math

import pytest
import torch
from rl_workers import StepCase, engine_checks_worker, grpo_step_worker

from skillgate_core.rl.engine.deepspeed_engine import (
    EngineConfig,
    build_engine,
    deepspeed_config,
    parameter_count,
)
from skillgate_core.rl.engine.launch import run_in_process
from skillgate_core.rl.engine.zero_choice import choose_zero


def test_deepspeed_config_is_method_optimizer_with_caller_owned_accumulation():
    ds = deepspeed_config(EngineConfig(zero_stage=3))
    params = ds["optimizer"]["params"]
    assert ds["optimizer"]["type"] == "AdamW"
    assert (params["lr"], params["betas"], params["weight_decay"]) == (1e-6, [0.9, 0.98], 0.1)
    assert params["torch_adam"] is True  # torch AdamW on the shards: no compiled optimizer on CPU
    assert "scheduler" not in ds  # constant lr
    assert ds["managed_gradient_accumulation"] is False
    assert ds["zero_optimization"]["stage"] == 3 and ds["gradient_clipping"] == 1.0
    assert ds["bf16"]["enabled"] is False  # CPU default: fp32
    bf16 = deepspeed_config(EngineConfig(dtype="bf16", zero_stage=3))
    assert bf16["bf16"]["enabled"] and bf16["data_types"]["grad_accum_dtype"] == "fp32"
    assert bf16["communication_data_type"] == "fp32"
    offload = deepspeed_config(EngineConfig(offload_optimizer=True, zero_stage=3))
    assert offload["optimizer"]["params"]["torch_adam"] is False  # DeepSpeedCPUAdam
    assert offload["zero_optimization"]["offload_optimizer"]["device"] == "cpu"
    ref = deepspeed_config(EngineConfig(), inference=True)  # the reference is ZeRO-3 whatever the policy's stage
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

    from skillgate_core.rl.engine import deepspeed_engine as engine
    from skillgate_core.rl.engine.varlen_attention import TORCH_VARLEN

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
    import skillgate_core.rl.engine.deepspeed_engine as engine

    monkeypatch.setattr(engine, "_device_type", lambda: "cuda")
    stages = {z: deepspeed_config(EngineConfig(zero_stage=z, dtype="fp32"))["zero_optimization"]["overlap_comm"]
              for z in range(4)}
    assert stages == {0: False, 1: False, 2: True, 3: True}


def test_auto_is_resolved_on_the_ranks_and_the_configs_own_overrides_apply_last():
    with pytest.raises(ValueError, match="resolve_zero"):
        deepspeed_config(EngineConfig())  # "auto" needs the model and the ranks: resolve_zero
    zero = choose_zero(415_242_112, 2, 139 * 10**9, "fp32")
    section = deepspeed_config(EngineConfig(), zero=zero)["zero_optimization"]
    assert section["stage"] == 2 and section["reduce_bucket_size"] == section["allgather_bucket_size"] == 5 * 10**8
    mine = EngineConfig(zero_overrides=(("reduce_bucket_size", 7),))
    assert deepspeed_config(mine, zero=zero)["zero_optimization"]["reduce_bucket_size"] == 7
    with pytest.raises(ValueError, match="offload_params needs zero_stage 3"):
        EngineConfig(zero_stage=2, offload_params=True)
    with pytest.raises(ValueError, match="0..3 or 'auto'"):
        EngineConfig(zero_stage="two")  # type: ignore[arg-type]


def test_stage_0_with_bf16_is_refused_with_what_to_use_instead():
    # DeepSpeed 0.19 refuses bf16 weights with fp32 gradient accumulation without ZeRO ("unsupported mix")
    with pytest.raises(ValueError, match="use zero_stage 1"):
        deepspeed_config(EngineConfig(zero_stage=0, dtype="bf16"))
    assert deepspeed_config(EngineConfig(zero_stage=0, dtype="fp32"))["zero_optimization"]["stage"] == 0


def test_auto_on_cpu_builds_zero3_and_says_why(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    assert parameter_count(tiny_model_dir) == AutoModelForCausalLM.from_pretrained(tiny_model_dir).num_parameters()
    [r] = run_in_process(grpo_step_worker, StepCase(model_dir=str(tiny_model_dir), engine=EngineConfig(lr=1e-3)),
                         run_dir=tmp_path).results
    assert r["zero"]["stage"] == r["engine_zero_stage"] == 3 and r["zero"]["auto"]
    assert "CPU" in r["zero"]["reason"] and r["grad_norm"] > 0


@pytest.mark.parametrize(("dtype", "optimizer"), [("fp32", "DeepSpeedZeroOptimizer"), ("bf16", "BF16_Optimizer")])
def test_auto_with_a_gpus_free_memory_skips_sharding_and_trains_as_zero3_does(
        tiny_model_dir, tmp_path, monkeypatch, dtype, optimizer):
    """On one rank with an H200's free memory, auto picks stage 1, which partitions nothing there (in bf16:
    DeepSpeed's bf16 optimizer); the same GRPO step (two micro-batches, clipping, KL) moves the weights as ZeRO-3
    does. Run on CPU: the free memory is the GPU's, the arithmetic DeepSpeed's own."""
    from transformers import AutoModelForCausalLM

    import skillgate_core.rl.engine.deepspeed_engine as engine

    monkeypatch.setattr(engine, "_free_device_bytes", lambda: 139 * 10**9)
    runs = {}
    configs = {"auto": EngineConfig(lr=1e-3, dtype=dtype), "z3": EngineConfig(lr=1e-3, dtype=dtype, zero_stage=3)}
    for name, config in configs.items():
        case = StepCase(model_dir=str(tiny_model_dir), engine=config)
        [runs[name]] = run_in_process(grpo_step_worker, case, run_dir=tmp_path / name).results
    auto, z3 = runs["auto"], runs["z3"]
    assert auto["zero"]["stage"] == auto["engine_zero_stage"] == 1 and auto["zero"]["auto"]
    assert auto["engine_optimizer"] == optimizer and z3["engine_zero_stage"] == 3
    assert auto["micro_batches"] == z3["micro_batches"] > 1  # accumulation over micro-batches is exercised
    assert auto["grad_norm"] == pytest.approx(z3["grad_norm"], rel=1e-2 if dtype == "bf16" else 1e-5)
    initial = dict(AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).named_parameters())
    after = {k: {n: w.float() for n, w in torch.load(r["weights"]).items()} for k, r in runs.items()}
    assert any(not torch.equal(after["auto"][n], p.detach()) for n, p in initial.items())  # the step moved them
    for n, a in after["auto"].items():
        b = after["z3"][n]
        if dtype == "fp32":  # measured 1e-6 (reduction order): a hundredth of an lr-1e-3 Adam step
            assert (a - b).abs().max().item() <= 1e-5, n
        else:  # measured equal; at most one bf16 rounding step apart
            assert torch.all((a - b).abs() <= 2**-7 * torch.maximum(a.abs(), b.abs())), n
    assert auto["replica_equal"] and auto["logit_gap"] == 0.0  # the replica takes the unsharded weights as well

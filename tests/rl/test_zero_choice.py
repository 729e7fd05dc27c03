"""zero_stage "auto": the stage picked from the parameter count, the world size, the free device memory
per rank and the dtype (rl.engine.zero_choice), on the cases its docstring's rules name."""

from __future__ import annotations

import pytest

from skillgate_core.rl.engine.zero_choice import (
    STAGE2_BUCKET,
    STATE_BYTES,
    STATE_FRACTION,
    choose_zero,
    explicit_zero,
    resumed_zero,
)

H200 = 139 * 10**9
"""Free bytes of one H200 rank (the measured machine)."""
BUCKETS = (("reduce_bucket_size", STAGE2_BUCKET), ("allgather_bucket_size", STAGE2_BUCKET))

CASES = [
    # (what, params, world, free bytes per rank, dtype, stage, overrides)
    ("SmolLM2-135M on one H200", 135_000_000, 1, H200, "bf16", 1, ()),
    ("the 415M benchmark model on one H200", 415_242_112, 1, H200, "bf16", 1, ()),
    ("415M in fp32 on one H200", 415_242_112, 1, H200, "fp32", 1, ()),
    ("70B on one H200: does not fit", 70 * 10**9, 1, H200, "bf16", 3, ()),
    ("415M on two H200s", 415_242_112, 2, H200, "bf16", 2, BUCKETS),
    ("7B on two 80 GB GPUs: weights + grads alone take 56 GB a rank", 7 * 10**9, 2, 80 * 10**9, "bf16", 3, ()),
    ("7B on eight H200s: stage 2 fits", 7 * 10**9, 8, H200, "bf16", 2, BUCKETS),
    ("415M on CPU: the sharded path, as before auto", 415_242_112, 1, None, "fp32", 3, ()),
    ("415M on two CPU ranks", 415_242_112, 2, None, "fp32", 3, ()),
]


@pytest.mark.parametrize(("what", "params", "world", "free", "dtype", "stage", "overrides"), CASES,
                         ids=[c[0] for c in CASES])
def test_the_stage_follows_model_size_world_size_and_memory(what, params, world, free, dtype, stage, overrides):
    choice = choose_zero(params, world, free, dtype)
    assert (choice.stage, choice.overrides, choice.auto) == (stage, overrides, True), choice.reason
    assert choice.reason.startswith(f"stage {stage}: ") and "\n" not in choice.reason


def test_the_reason_carries_the_numbers_a_person_can_check():
    one = choose_zero(415_242_112, 1, H200, "bf16")
    assert "415M params x 20 B = 8.3 GB" in one.reason and "139.0 GB free per rank" in one.reason
    assert "partitions nothing" in one.reason and "not 0" in one.reason  # why stage 1 and not 0
    big = choose_zero(70 * 10**9, 1, H200, "bf16")
    assert "1400.0 GB" in big.reason and "offload" in big.reason
    two = choose_zero(7 * 10**9, 2, 80 * 10**9, "bf16")
    assert "98.0 GB a rank exceeds" in two.reason  # 7B x (2 + 6) + 7B x 12 / 2
    assert "70.0 GB a rank even at stage 3" in two.reason  # 140 GB / 2 > 40 GB: not even stage 3 fits


def test_the_boundary_is_the_documented_share_of_free_memory():
    params = 10**8
    free = int(params * STATE_BYTES["bf16"].total / STATE_FRACTION)  # the state takes exactly the share
    assert choose_zero(params, 1, free, "bf16").stage == 1
    assert choose_zero(params + 1, 1, free, "bf16").stage == 3


def test_offload_knobs_are_honoured_never_chosen():
    assert choose_zero(415_242_112, 1, H200, "bf16", offload_params=True).stage == 3
    assert choose_zero(415_242_112, 1, H200, "fp32", offload_optimizer=True).stage == 1
    for params, world in ((415_242_112, 1), (415_242_112, 2), (70 * 10**9, 1), (7 * 10**9, 2)):
        assert not any("offload" in key for key, _ in choose_zero(params, world, H200, "bf16").overrides)


def test_bad_facts_are_refused_by_name():
    with pytest.raises(ValueError, match="params >= 1"):
        choose_zero(0, 1, H200, "bf16")
    with pytest.raises(ValueError, match="world >= 1"):
        choose_zero(10, 0, H200, "bf16")
    with pytest.raises(ValueError, match="dtype must be one of"):
        choose_zero(10, 1, H200, "fp16")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="0..3 or 'auto'"):
        explicit_zero(4)


def test_a_resumed_auto_run_keeps_its_checkpoints_stage():
    auto = choose_zero(415_242_112, 1, H200, "bf16")  # stage 1 here
    kept = resumed_zero(auto, 3)  # written by a ZeRO-3 run (e.g. before auto existed)
    assert (kept.stage, kept.auto) == (3, False)
    assert "resumed checkpoint" in kept.reason and "auto would pick stage 1" in kept.reason
    assert resumed_zero(auto, 1) is auto
    assert resumed_zero(auto, None) is auto and resumed_zero(auto, "auto") is auto and resumed_zero(auto, True) is auto
    named = explicit_zero(2)
    assert resumed_zero(named, 3) is named  # a config that names its stage is taken at its word


def test_fused_adamw_comes_with_an_automatic_choice_on_a_gpu_only():
    from skillgate_core.rl.engine.deepspeed_engine import EngineConfig, deepspeed_config

    gpu = choose_zero(415_242_112, 1, H200, "bf16")
    assert gpu.fused_adam and "AdamW fused (optimizer step 7.8 against 13.2 ms" in gpu.reason
    cpu = choose_zero(415_242_112, 1, None, "fp32")
    offloaded = choose_zero(415_242_112, 1, H200, "bf16", offload_optimizer=True)
    assert not cpu.fused_adam and not offloaded.fused_adam and "fused" not in cpu.reason + offloaded.reason
    assert not explicit_zero(2).fused_adam  # a config that names its stage keeps the per-tensor AdamW

    def fused(config: EngineConfig, choice) -> bool:
        return bool(deepspeed_config(config, zero=choice)["optimizer"]["params"].get("fused"))

    assert fused(EngineConfig(), gpu) and not fused(EngineConfig(), cpu)
    assert not fused(EngineConfig(optimizer="torch"), gpu)  # a named optimizer wins over the choice
    assert fused(EngineConfig(optimizer="torch_fused", zero_stage=2), explicit_zero(2))
    assert not fused(EngineConfig(zero_stage=2), explicit_zero(2))
    # a resumed run whose checkpoint has another stage keeps the optimizer it started with
    assert resumed_zero(gpu, 3).stage == 3 and resumed_zero(gpu, 3).fused_adam

"""EngineConfig.flat_grad_norm: under DeepSpeed's bf16 optimizer (ZeRO-1 in bf16, the one-GPU default) the
gradient norm and the clipping run over the flat fp32 gradient buffers, and give what DeepSpeed's
per-parameter loop gives; EngineConfig.bf16_overrides reach DeepSpeed's `bf16` section."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from skillgate_core.rl.engine.deepspeed_engine import (
    EngineConfig,
    backward,
    build_engine,
    deepspeed_config,
    optimizer_step,
)
from skillgate_core.rl.engine.launch import WorkerContext, run_in_process

# eps 1 and no weight decay: the first Adam update is lr * g / (|g| + 1) ~ lr * g elementwise, so the master
# weights move by ~ lr * (the CLIPPED gradient) and the clipping shows in them (with a small eps Adam would
# undo any rescaling of the gradient)
BASE = EngineConfig(lr=1.0, eps=1.0, weight_decay=0.0, grad_clip=1e-2, dtype="bf16", zero_stage=1)
STEPS = 2


def _counting(inner, calls: list[bool]):
    def get_grads_for_norm(for_clipping: bool = False):
        calls.append(for_clipping)
        return inner(for_clipping)

    return get_grads_for_norm


def _steps_worker(ctx: WorkerContext, model_dir: str) -> dict:
    from deepspeed.runtime.bf16_optimizer import BF16_Optimizer

    out: dict = {}
    gen = torch.Generator().manual_seed(0)
    inputs = [torch.randint(0, 600, (2, 24), generator=gen) for _ in range(STEPS)]
    for flat in (True, False):
        engine = build_engine(model_dir, replace(BASE, flat_grad_norm=flat))
        opt = engine.optimizer
        assert isinstance(opt, BF16_Optimizer), type(opt)
        installed = "get_grads_for_norm" in vars(opt)
        calls: list[bool] = []
        if installed:  # count what step() asks of the installed function
            opt.get_grads_for_norm = _counting(opt.get_grads_for_norm, calls)
        master0 = torch.cat([p.detach().clone() for p in opt.fp32_groups_flat_partition]).numpy()
        norms = []
        for ids in inputs:
            backward(engine, engine(input_ids=ids, labels=ids, use_cache=False).loss.float())
            norms.append(optimizer_step(engine).grad_norm)
        master = torch.cat([p.detach() for p in opt.fp32_groups_flat_partition]).numpy()
        weights = torch.cat([p.detach().float().flatten() for p in engine.module.parameters()]).numpy()
        out["flat" if flat else "per_param"] = {
            "installed": installed, "calls": calls, "norms": norms,
            "master0": master0, "master": master, "weights": weights,
        }
        del engine, opt
    return out


@pytest.fixture(scope="module")
def stepped(tiny_model_dir) -> dict:
    [r] = run_in_process(_steps_worker, str(tiny_model_dir), use_gpu=False).results
    return r


def test_the_flat_norm_is_installed_on_the_bf16_optimizer_and_step_uses_it(stepped):
    assert stepped["flat"]["installed"] and not stepped["per_param"]["installed"]
    assert stepped["flat"]["calls"] == [False, True] * STEPS  # norm, then clip, every step


def test_the_flat_norm_and_clipping_match_deepspeeds_per_parameter_loop(stepped):
    flat, ref = stepped["flat"], stepped["per_param"]
    assert all(n > 10 * BASE.grad_clip for n in ref["norms"]), ref["norms"]  # the clip bites
    np.testing.assert_allclose(flat["norms"], ref["norms"], rtol=1e-5)
    np.testing.assert_array_equal(flat["master0"], ref["master0"])
    moved = flat["master"] - flat["master0"]
    # clipped: the first step moved the master weights by ~ lr * grad_clip, not lr * the norm
    assert np.linalg.norm(moved) < 3 * BASE.lr * BASE.grad_clip * STEPS
    scale = float(np.abs(moved).max())
    np.testing.assert_allclose(flat["master"], ref["master"], rtol=0, atol=1e-4 * scale)
    np.testing.assert_allclose(moved, ref["master"] - ref["master0"], rtol=1e-3, atol=1e-4 * scale)
    np.testing.assert_allclose(flat["weights"], ref["weights"], rtol=0, atol=1e-2 * scale)


def test_bf16_overrides_reach_the_bf16_section_and_bad_ones_are_refused():
    igu = EngineConfig(dtype="bf16", zero_stage=1, bf16_overrides=(("immediate_grad_update", True),))
    assert deepspeed_config(igu)["bf16"] == {"enabled": True, "immediate_grad_update": True}
    assert deepspeed_config(EngineConfig(dtype="bf16", zero_stage=1))["bf16"] == {"enabled": True}
    assert deepspeed_config(replace(igu, dtype="fp32"))["bf16"] == {"enabled": False}  # fp32: no bf16 section keys
    with pytest.raises(ValueError, match="bf16_overrides must be"):
        EngineConfig(bf16_overrides=(("immediate_grad_update",),))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="bf16_overrides must be"):
        EngineConfig(bf16_overrides=((1, True),))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match='may not set "enabled"'):
        EngineConfig(bf16_overrides=(("enabled", False),))


def test_other_optimizers_are_left_alone():
    from skillgate_core.rl.engine.flat_grad_norm import install_flat_grad_norm

    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(3))])
    assert install_flat_grad_norm(opt) is False and "get_grads_for_norm" not in vars(opt)

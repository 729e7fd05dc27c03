"""The old log-probs of the clipped ratio (GRPOConfig.old_logprobs): with one optimizer step per rollout
batch they are the current ones detached, one no-grad forward per micro-batch fewer, and the step is the
one the recomputing trainer takes; with active dropout two forwards differ, and auto recomputes."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from test_selector_credit_update import _group  # the fixed group of four episodes (same folder)

from skillgate_core.rl import grpo
from skillgate_core.rl.engine.launch import run_in_process
from skillgate_core.rl.grpo_config import GRPOConfig
from skillgate_core.rl.profiles import get_profile
from skillgate_core.rl.samples import build_samples

PROFILE = "selector_clean_oracle_action_credit"


def _step(ctx, payload):
    model_dir, mode, dropout = payload
    from transformers import AutoTokenizer

    from skillgate_core.rl.engine.deepspeed_engine import EngineConfig, build_engine

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(model_dir)
    samples, _ = build_samples([_group(tok)], get_profile(PROFILE), chunk_groups=4)
    cfg = replace(GRPOConfig(profile=PROFILE, num_workers=1, launcher="process"), learning_rate=1e-3, beta=0.0,
                  old_logprobs=mode)
    engine = build_engine(model_dir, EngineConfig(lr=cfg.learning_rate, weight_decay=0.0, grad_clip=0.0))
    engine.module.config.attention_dropout = dropout
    engine.train()
    calls = {"grad": 0, "no_grad": 0}
    real = grpo.token_logprobs

    def counted(model, mb, temperature=1.0):  # a spy around the real function: counts, changes nothing
        calls["grad" if torch.is_grad_enabled() else "no_grad"] += 1
        return real(model, mb, temperature)

    grpo.token_logprobs = counted
    try:
        _, losses, stats = grpo.update_policy(engine, None, samples, cfg, pad_token_id=0, device=torch.device("cpu"))
    finally:
        grpo.token_logprobs = real
    from skillgate_core.rl.engine.deepspeed_engine import gathered_state_dict

    state = gathered_state_dict(engine)  # whole tensors under any ZeRO stage
    weights = torch.cat([state[k].flatten().float() for k in sorted(state)]).numpy()
    return {"calls": calls, "loss": sum(float(x.loss.detach()) for x in losses), "grad_norm": stats.grad_norm,
            "weights": weights}


@pytest.fixture(scope="module")
def steps(tiny_model_dir):
    return {(m, d): run_in_process(_step, (str(tiny_model_dir), m, d)).results[0]
            for m, d in (("auto", 0.0), ("recompute", 0.0), ("auto", 0.1))}


def test_auto_skips_the_old_forward_and_takes_the_recomputing_step(steps):
    auto, rec = steps[("auto", 0.0)], steps[("recompute", 0.0)]
    assert auto["calls"]["no_grad"] == 0 and rec["calls"]["no_grad"] == rec["calls"]["grad"] > 0
    assert auto["calls"]["grad"] == rec["calls"]["grad"]
    assert auto["loss"] == pytest.approx(rec["loss"], rel=1e-6, abs=1e-9)
    assert auto["grad_norm"] == pytest.approx(rec["grad_norm"], rel=1e-5)
    assert auto["weights"].size > 1000 and abs(auto["weights"] - rec["weights"]).max() <= 1e-7


def test_auto_recomputes_when_dropout_makes_two_forwards_differ(steps):
    dropped = steps[("auto", 0.1)]
    assert dropped["calls"]["no_grad"] == dropped["calls"]["grad"] > 0


def test_the_setting_is_checked():
    with pytest.raises(ValueError, match="old_logprobs"):
        GRPOConfig(old_logprobs="sometimes")

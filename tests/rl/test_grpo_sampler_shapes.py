"""GRPOConfig.static_shapes: a worker's replica samples every turn of every round at one compiled shape."""

from __future__ import annotations

from skillgate_core.policy.local_sampler import load_policy
from skillgate_core.rl.grpo import _static_sampler
from skillgate_core.rl.grpo_config import GRPOConfig


def test_the_floors_are_the_largest_round_and_the_context_plus_turn_budget(policy):
    model, tok = load_policy(policy)
    cfg = GRPOConfig(prompts_per_step=4, group_size=8, max_context_tokens=2048, static_shapes=True, sampler="static")
    sampler = _static_sampler(model, tok, cfg, world=2)  # 2 prompts a worker x 8 episodes
    # the widest context plus the batch's longest turn budget (each episode keeps its own: LocalPolicy)
    assert (sampler.config.min_batch, sampler.config.min_cache_length) == (16, 2048 + cfg.max_new_tokens)
    paired = GRPOConfig(prompts_per_step=4, group_size=8, max_context_tokens=2048, static_shapes=True,
                        sampler="static", profile="hybrid_slate")
    assert _static_sampler(model, tok, paired, world=1).config.min_batch == 64  # G without skills + G with the slate
    ahead = GRPOConfig(prompts_per_step=4, group_size=8, static_shapes=True, sampler="static", draw_ahead=1.5)
    assert _static_sampler(model, tok, ahead, world=1).config.min_batch == 48  # a round plays ceil(4 x 1.5) groups
    assert _static_sampler(model, tok, ahead, world=4).config.min_batch == 16  # ceil(1 x 1.5) a worker
    assert _static_sampler(model, tok, GRPOConfig(sampler="hf", static_shapes=True), world=1) is None
    # without static_shapes the replica still gets one sampler for the run, at the default floors
    plain = _static_sampler(model, tok, GRPOConfig(sampler="static"), world=1)
    assert (plain.config.min_batch, plain.config.min_cache_length) == (1, 0)

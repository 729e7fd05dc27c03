"""One real optimizer step (DeepSpeed ZeRO-3, in-process) on a fixed batch: the selector credit moves
the skill-name tokens of the episode that read the oracle and failed (METHOD.md 6 credit semantics).

The group (G = 4, clean-oracle utility): episode 0 reads the oracle and FAILS; episode 1 reads a
misleading skill and succeeds; episode 2 reads a misleading skill and fails; episode 3 reads nothing
and succeeds. Outcome credit pushes episode 0 down everywhere; SkillGate's selector stream pushes its
oracle-name tokens up (A_sel = 1 - 1/3). With `selector_clean_oracle_masked_task_only` (lambda = 0)
the name tokens carry no credit at all: the loss's gradient at those tokens is exactly 0, so whatever
they move comes only from parameters shared with other tokens (Adam's first step moves every
parameter by about lr, so that drift is not 0), and it is smaller than SkillGate's push.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from skillgate_core.agent.collect import trajectory_span_report
from skillgate_core.agent.episode import OBSERVATION_TEMPLATE, Trajectory, TurnRecord
from skillgate_core.rl.grpo import update_policy
from skillgate_core.rl.grpo_config import GRPOConfig
from skillgate_core.rl.launch import run_in_process
from skillgate_core.rl.logprobs import token_logprobs
from skillgate_core.rl.loss import grpo_clipped_loss, selector_grpo_loss
from skillgate_core.rl.packing import PackingConfig, TrainSample, pack_samples
from skillgate_core.rl.profiles import get_profile
from skillgate_core.rl.rollouts import Episode, Group, RLTask
from skillgate_core.rl.samples import build_samples
from skillgate_core.slate_manifest import Slate, SlateEntry

GOLD, MISLEADING = "csv-column-sum", "csv-row-count"
NAMES = [GOLD] + [f"mis-{i}" for i in range(4)] + [MISLEADING] + [f"rel-{i}" for i in range(5)] + [
    f"irr-{i}" for i in range(5)]
CATEGORIES = ["oracle"] + ["misleading"] * 5 + ["relevant"] * 5 + ["irrelevant"] * 5


def _trajectory(tok, skill: str | None, score: float) -> Trajectory:
    prompt = tuple(tok("<|im_start|>user\nsum the column<|im_end|>\n<|im_start|>assistant\n",
                       add_special_tokens=False)["input_ids"])
    ids: list[int] = []
    mask: list[int] = []
    turns: list[TurnRecord] = []

    def sampled(text: str, calls: tuple) -> None:
        start = len(ids)
        turn_ids = tok(text + "<|im_end|>", add_special_tokens=False)["input_ids"]
        ids.extend(turn_ids)
        mask.extend([1] * len(turn_ids))
        turns.append(TurnRecord(text, start, len(ids), "stop", calls))

    if skill is not None:
        args = {"path": f"/skills/{skill}/SKILL.md"}
        sampled("<skill_reasoning>this one fits</skill_reasoning>\n<tool_call>"
                + json.dumps({"name": "read", "arguments": args}) + "</tool_call>",
                (("read", json.dumps(args, sort_keys=True, separators=(",", ":"))),))
        glue = tok(OBSERVATION_TEMPLATE.format(observation="<tool_response name='read'>{}</tool_response>"),
                   add_special_tokens=False)["input_ids"]
        ids.extend(glue)
        mask.extend([0] * len(glue))
    sampled("The column is summed and written.", ())
    return Trajectory(task_id="t0", bench="procedural", repeat=0, policy="fixed", prompt_profile="p",
                      slate_names=tuple(NAMES), slate_categories=tuple(CATEGORIES), gold=GOLD, messages=(),
                      prompt_ids=prompt, response_ids=tuple(ids), loss_mask=tuple(mask),
                      logprobs=tuple([0.0] * len(ids)), turns=tuple(turns), status="completed", score=score,
                      raw_score=score, missing_reward=False, verifier_detail="", backend="none", duration_s=0.0)


def _group(tok) -> Group:
    slate = Slate("t0", "procedural", "train", 0, tuple(SlateEntry(n, c, n) for n, c in zip(NAMES, CATEGORIES,
                                                                                               strict=True)))
    task = RLTask("t0", "procedural", None, slate, None, ())  # type: ignore[arg-type]  (no sandbox in this test)
    episodes = []
    for skill, score in ((GOLD, 0.0), (MISLEADING, 1.0), (MISLEADING, 0.0), (None, 1.0)):
        traj = _trajectory(tok, skill, score)
        spans = trajectory_span_report(traj, tok)
        assert spans.clean
        episodes.append(Episode(traj, spans, True))
    return Group(task, tuple(episodes))


def _step(ctx, payload):
    model_dir, profile_name = payload
    from transformers import AutoTokenizer

    from skillgate_core.rl.engine import EngineConfig, build_engine

    tok = AutoTokenizer.from_pretrained(model_dir)
    group = _group(tok)
    profile = get_profile(profile_name)
    samples, facts = build_samples([group], profile, chunk_groups=4)
    target = group.episodes[0].spans.actions[0]
    cfg = replace(GRPOConfig(profile=profile_name, num_workers=1, launcher="process"), learning_rate=1e-3, beta=0.0)
    engine = build_engine(model_dir, EngineConfig(lr=cfg.learning_rate, weight_decay=0.0, grad_clip=0.0))

    def identity_logp() -> torch.Tensor:
        s = samples[0]
        (mb,) = pack_samples([TrainSample(s.prompt_ids, s.response_ids, s.fields())], PackingConfig(max_tokens=4096))
        with torch.no_grad():
            logp = token_logprobs(engine, mb)
        return logp[list(target.identity_token_indices)].clone()

    # The loss's own gradient at each response token of episode 0 (rho = 1, this batch's N).
    s0 = samples[0]
    normaliser = float(sum(max(1.0, s.mask.sum()) for s in samples))
    logp = torch.zeros(len(s0.response_ids), dtype=torch.float64, requires_grad=True)
    out = (selector_grpo_loss if profile.loss == "two_stream" else grpo_clipped_loss)
    kwargs = dict(logp_old=torch.zeros_like(logp), normaliser=normaliser, beta=0.0)
    loss = out(logp, a_task=s0.a_task, a_sel=s0.a_sel, w_task=s0.w_task, w_sel=s0.w_sel, mask=s0.mask,
               selector_coef=cfg.lambda_, **kwargs).loss
    (grad,) = torch.autograd.grad(loss, logp)

    before = identity_logp()
    update_policy(engine, None, samples, profile.loss, cfg, pad_token_id=0, device=torch.device("cpu"))
    after = identity_logp()
    return {"delta": (after - before).sum().item(), "selector_mass": facts.selector_mass,
            "grad_on_identity": grad[list(target.identity_token_indices)].tolist(),
            "grad_on_rest_of_call": grad[sorted(set(target.call_token_indices) - set(target.identity_token_indices))
                                         ].tolist(),
            "sel_on_identity": float(samples[0].w_sel[list(target.identity_token_indices)].sum()),
            "a_sel": float(samples[0].a_sel[target.identity_token_indices[0]]),
            "a_task": float(samples[0].a_task[0])}


@pytest.fixture(scope="module")
def deltas(tiny_model_dir):
    return {p: run_in_process(_step, (str(tiny_model_dir), p)).results[0]
            for p in ("selector_clean_oracle_action_credit", "selector_clean_oracle_masked_task_only")}


def test_the_fixed_batch_is_what_the_test_claims(deltas):
    skillgate = deltas["selector_clean_oracle_action_credit"]
    assert skillgate["a_sel"] == pytest.approx(2 / 3) and skillgate["a_task"] < 0
    assert skillgate["sel_on_identity"] > 0


def test_skillgate_raises_the_oracle_name_tokens_of_a_failed_oracle_read(deltas):
    assert deltas["selector_clean_oracle_action_credit"]["delta"] > 0


def test_only_skillgate_puts_credit_on_the_name_tokens(deltas):
    skillgate, masked = deltas["selector_clean_oracle_action_credit"], deltas["selector_clean_oracle_masked_task_only"]
    # dL/dlogp < 0 at the oracle's name tokens (a descent step raises them) for SkillGate; exactly 0
    # for the masked ablation; and the rest of the read call gets no outcome credit in either.
    assert all(g < 0 for g in skillgate["grad_on_identity"])
    assert all(g == 0 for g in masked["grad_on_identity"])
    assert skillgate["grad_on_rest_of_call"] and all(g == 0 for g in skillgate["grad_on_rest_of_call"])
    assert all(g == 0 for g in masked["grad_on_rest_of_call"])
    assert masked["delta"] < skillgate["delta"]

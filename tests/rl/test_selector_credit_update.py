"""One real optimizer step (DeepSpeed ZeRO-3, in-process) on a fixed batch: the selector credit moves
the skill-name tokens of the episode that read the oracle and failed (docs/method.md 6 credit semantics).

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

from skillgate_core.agent.episode import OBSERVATION_TEMPLATE
from skillgate_core.agent.trajectory import Trajectory, TurnRecord, trajectory_span_report
from skillgate_core.credit import RejectReason
from skillgate_core.formats.slate_manifest import Slate, SlateEntry
from skillgate_core.rl.engine.launch import run_in_process
from skillgate_core.rl.engine.logprobs import token_logprobs
from skillgate_core.rl.engine.packing import PackingConfig, pack_samples
from skillgate_core.rl.grpo import update_policy
from skillgate_core.rl.grpo_config import GRPOConfig
from skillgate_core.rl.loss import grpo_clipped_loss, selector_grpo_loss
from skillgate_core.rl.profiles import get_profile
from skillgate_core.rl.rollouts import Episode, Group, RLTask, RolloutStats, behaviour_tally
from skillgate_core.rl.samples import build_samples
from skillgate_core.rl.step_metrics import rank_summary, step_metrics

GOLD, MISLEADING = "csv-column-sum", "csv-row-count"
NAMES = [GOLD] + [f"mis-{i}" for i in range(4)] + [MISLEADING] + [f"rel-{i}" for i in range(5)] + [
    f"irr-{i}" for i in range(5)]
CATEGORIES = ["oracle"] + ["misleading"] * 5 + ["relevant"] * 5 + ["irrelevant"] * 5


def _trajectory(tok, skill: str | None, score: float, *, reasoning: str = "this one fits",
                dispatched: bool = True) -> Trajectory:
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
        sampled(f"<skill_reasoning>{reasoning}</skill_reasoning>\n<tool_call>"
                + json.dumps({"name": "read", "arguments": args}) + "</tool_call>",
                (("read", json.dumps(args, sort_keys=True, separators=(",", ":"))),) if dispatched else ())
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


PLAYS = ((GOLD, 0.0), (MISLEADING, 1.0), (MISLEADING, 0.0), (None, 1.0))


def _task() -> RLTask:
    slate = Slate("t0", "procedural", "train", 0, tuple(SlateEntry(n, c, n) for n, c in zip(NAMES, CATEGORIES,
                                                                                               strict=True)))
    return RLTask("t0", "procedural", None, slate, None, ())  # type: ignore[arg-type]  (no sandbox in this test)


def _episodes(tok, plays=PLAYS, *, first_mention: bool = False, **kwargs) -> list[Episode]:
    episodes = []
    for skill, score in plays:
        traj = _trajectory(tok, skill, score, **kwargs)
        episodes.append(Episode(traj, trajectory_span_report(traj, tok, first_mention=first_mention), True))
    return episodes


def _group(tok) -> Group:
    episodes = _episodes(tok)
    assert all(e.spans.clean for e in episodes)
    return Group(_task(), tuple(episodes))


def _step(ctx, payload):
    model_dir, profile_name = payload
    from transformers import AutoTokenizer

    from skillgate_core.rl.engine.deepspeed_engine import EngineConfig, build_engine

    tok = AutoTokenizer.from_pretrained(model_dir)
    group = _group(tok)
    profile = get_profile(profile_name)
    samples, facts = build_samples([group], profile, chunk_groups=4)
    target = group.episodes[0].spans.actions[0]
    cfg = replace(GRPOConfig(profile=profile_name, num_workers=1, launcher="process"), learning_rate=1e-3, beta=0.0)
    engine = build_engine(model_dir, EngineConfig(lr=cfg.learning_rate, weight_decay=0.0, grad_clip=0.0))

    def identity_logp() -> torch.Tensor:
        s = samples[0]
        (mb,) = pack_samples([s], PackingConfig(max_tokens=4096))
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
    normaliser, losses, update = update_policy(engine, None, samples, cfg, pad_token_id=0,
                                               device=torch.device("cpu"))
    after = identity_logp()
    rollout = RolloutStats(drawn=["t0"], episodes=4, played=behaviour_tally(group.episodes))
    summary = rank_summary(groups=[group], rollout=rollout, facts=facts, filter_counts={"accepted": 1}, losses=losses,
                           timer={})
    row = step_metrics(step=0, summaries=[summary], normaliser=normaliser, profile=profile, update=update,
                       selector_coef=cfg.lambda_)
    return {"delta": (after - before).sum().item(), "selector_mass": facts.selector_mass, "row": row,
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


def test_the_step_row_reports_the_update_and_the_selector_term(deltas):
    """grad norm and lr come from the optimizer step (they were computed, then discarded); the selector
    term's VALUE is 0 at rho = 1 by construction (each credited action carries B/K, the A_sel of a group
    sum to 0: 2/3 - 1/3 - 1/3), so the row also carries each stream's gradient mass, which is not."""
    for row in (d["row"] for d in deltas.values()):
        assert row["optimizer_step_taken"] and row["learning_rate"] == pytest.approx(1e-3)
        assert row["grad_norm"] is not None and 0 < row["grad_norm"] < float("inf")
        assert row["policy_selector"] == pytest.approx(0.0, abs=1e-6)
        assert row["selector_loss_term"] == pytest.approx(0.0, abs=1e-6)
        assert row["task_gradient_mass"] > 0 and row["selector_token_mass"] == row["loss_tokens"] > 0
        assert row["selector_active_fraction"] == 1.0 and row["metrics_schema"] == 2
    skillgate, masked = deltas["selector_clean_oracle_action_credit"]["row"], \
        deltas["selector_clean_oracle_masked_task_only"]["row"]
    # B/3 on each of three actions, |A_sel| = 2/3 + 1/3 + 1/3: (4/3)(B/3) = 4B/9, times lambda, over N
    assert skillgate["selector_gradient_mass"] == pytest.approx(0.2 * 4 / 9 * skillgate["loss_tokens"]
                                                                / skillgate["normaliser"])
    assert masked["selector_gradient_mass"] == 0.0  # lambda = 0: the stream is computed, never applied


# --- the filter: one rule for every arm; credit checked before acceptance; the labelled variants -----------

@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def _judge(profile_name: str, episodes, **config):
    from skillgate_core.rl.rollouts import judge_group, step_filter_for

    profile = get_profile(profile_name)
    cfg = GRPOConfig(profile=profile_name, num_workers=1, launcher="process", **config)
    return judge_group(_task(), list(episodes), profile, step_filter_for(profile, cfg))


SLATE_PROFILES = ("mixed_task_reward", "mixed_separated", "selector_action_credit",
                  "selector_clean_oracle_masked_task_only", "selector_clean_oracle_action_credit")


def test_every_slate_profile_rejects_the_same_broken_group(tok):
    """A call the environment did not dispatch as parsed (parse_dispatch_mismatch) rejects the group under
    every profile that shows a slate: mixed_task_reward used to skip the span checks and train on it."""
    episodes = _episodes(tok)
    episodes[1] = _episodes(tok, [PLAYS[1]], dispatched=False)[0]
    assert episodes[1].spans.parse_dispatch_mismatch == 1
    verdicts = {p: _judge(p, episodes).verdict for p in SLATE_PROFILES}
    assert {v.reason for v in verdicts.values()} == {RejectReason.PARSE_DISPATCH_MISMATCH}
    assert {v.detail for v in verdicts.values()} == {"episode 1: parse_dispatch_mismatch=1"}


def test_a_group_whose_credit_cannot_be_computed_is_rejected_and_resampled(tok):
    """The filter's credit_failed rule is reachable: an episode whose read action points at a token outside
    its loss mask (a token the policy did not sample) is caught before acceptance, with the detail; it used
    to pass the filter and make conversion drop its whole chunk after the step had stopped drawing."""
    episodes = _episodes(tok)
    traj = episodes[0].trajectory
    (action,) = episodes[0].spans.actions
    mask = list(traj.loss_mask)
    mask[action.identity_token_indices[0]] = 0
    episodes[0] = Episode(replace(traj, loss_mask=tuple(mask)), episodes[0].spans, True)
    for profile in SLATE_PROFILES:
        verdict = _judge(profile, episodes).verdict
        assert verdict.reason is RejectReason.CREDIT_FAILED, profile
        assert verdict.detail.startswith("episode 0: credit computation failed: index outside the mask")


ZERO_VARIANCE = ((GOLD, 0.0), (MISLEADING, 0.0), (MISLEADING, 0.0), (None, 0.0))


def test_selector_on_zero_variance_is_a_labelled_variant_that_keeps_only_the_selector_stream(tok):
    episodes = _episodes(tok, ZERO_VARIANCE)
    default = _judge("selector_clean_oracle_action_credit", episodes)
    assert default.verdict.reason is RejectReason.ZERO_VARIANCE  # the method: rejected, resampled
    kept = _judge("selector_clean_oracle_action_credit", episodes, selector_on_zero_variance=True)
    assert kept.verdict.accepted and kept.verdict.selector_only and not kept.verdict.forced
    samples, facts = build_samples([kept], get_profile("selector_clean_oracle_action_credit"), chunk_groups=4)
    assert all(not s.a_task.any() for s in samples)  # no task signal
    assert facts.selector_mass == pytest.approx(facts.total_mask) and facts.selector_active_groups == 1
    assert samples[0].a_sel[list(episodes[0].spans.actions[0].identity_token_indices)] == pytest.approx(2 / 3)
    # nobody reads cleanly -> the selector is inert too: still rejected under the variant
    inert = _episodes(tok, ((MISLEADING, 0.0), (None, 0.0), (MISLEADING, 0.0), (None, 0.0)))
    assert _judge("selector_clean_oracle_action_credit", inert,
                  selector_on_zero_variance=True).verdict.reason is RejectReason.ZERO_VARIANCE
    # a group with task variance is judged as by the method (not selector-only)
    assert not _judge("selector_clean_oracle_action_credit", _episodes(tok),
                      selector_on_zero_variance=True).verdict.selector_only


def test_the_variants_are_labelled_off_by_default_and_only_for_the_selector_profiles():
    assert GRPOConfig().variant == "" and not GRPOConfig().selector_on_zero_variance
    assert not GRPOConfig().identity_first_mention
    both = GRPOConfig(selector_on_zero_variance=True, identity_first_mention=True)
    assert both.variant == "selector_on_zero_variance+identity_first_mention"
    for name in ("selector_on_zero_variance", "identity_first_mention"):
        with pytest.raises(ValueError, match=f"grpo.{name} is a variant of the two-stream profiles"):
            GRPOConfig(profile="mixed_task_reward", **{name: True})


def test_identity_first_mention_moves_the_credit_to_the_name_in_the_reasoning(tok):
    """The variant: after a reasoning that names the skill, the identity tokens are that first mention;
    they leave the task stream and carry the selector credit. The method keeps the name in the call."""
    reasoning = f"the task sums a column, so {GOLD} fits"
    (method,) = _episodes(tok, [(GOLD, 0.0)], reasoning=reasoning)
    (variant,) = _episodes(tok, [(GOLD, 0.0)], reasoning=reasoning, first_mention=True)
    m, v = method.spans.actions[0], variant.spans.actions[0]
    assert set(m.identity_token_indices) <= set(m.call_token_indices) and not m.first_mention
    assert v.first_mention and v.call_token_indices == m.call_token_indices
    assert max(v.identity_token_indices) < min(v.call_token_indices)  # in <skill_reasoning>, before the call
    ids = variant.trajectory.response_ids
    assert tok.decode([ids[i] for i in v.identity_token_indices]).strip() == GOLD
    # without a mention in the reasoning the first mention IS the call's: nothing moves
    (plain,) = _episodes(tok, [(GOLD, 0.0)], first_mention=True)
    (plain_method,) = _episodes(tok, [(GOLD, 0.0)])
    assert plain.spans.actions[0].identity_token_indices == plain_method.spans.actions[0].identity_token_indices
    # the weights: selector credit on the first mention only, never with task weight
    plays = ((GOLD, 0.0), (MISLEADING, 1.0), (MISLEADING, 0.0), (None, 1.0))
    episodes = _episodes(tok, plays, reasoning=reasoning, first_mention=True)
    samples, facts = build_samples([Group(_task(), tuple(episodes))], get_profile("selector_clean_oracle_action_credit"),
                                   chunk_groups=4)
    first = list(episodes[0].spans.actions[0].identity_token_indices)
    assert (samples[0].w_sel[first] > 0).all() and not samples[0].w_task[first].any()
    assert all(not ((s.w_task > 0) & (s.w_sel > 0)).any() for s in samples)
    assert sum(s.w_task.sum() for s in samples) == pytest.approx(facts.total_mask)

"""Per-step training metrics: one flat JSON row per optimizer step, over all workers.

Each rank hands in what it saw (its accepted groups, rollout stats, conversion facts, filter counts,
loss parts, phase timings); rank 0 folds them into one row for metrics.jsonl, the warehouse and the
Prefect artifact:

- behaviour, over EVERY episode played in the step (accepted or rejected groups; aborted episodes
  apart): reward (mean raw score), success rate (score >= 1), read / oracle read / misleading read
  rate (share of slate episodes with >= 1 such read), clean-oracle rate (exactly one read, the
  oracle: the training utility), and the episodes' shape: mean turns, the share that ended with a
  final answer (a turn with no tool call) and the share with a turn cut at max_new_tokens (a policy
  drifting into long episodes shows there first). The same over the trained (accepted) groups only, as accepted_*:
  the filter keeps groups with a success, so those read higher than the policy is;
- groups: drawn / accepted / rejected, rejections by reason, the first REJECTION_DETAILS_CAP
  rejections with their detail, forced acceptances, zero-variance groups split all-fail / all-pass,
  workers that gave up;
- credit: selector-active fraction (converted groups with a nonzero selector advantage), task and
  selector token mass, the share of loss tokens that are selection (identity) tokens and read-call
  tokens, oracle reads with a negative advantage (selector advantage in the two-stream profiles, the
  episode's in the plain ones, whose read calls carry it);
- premise (docs/method.md 8b; credit.premise), over the slate episodes of every drawn group, as
  `premise/KEY`: P1 (oracle readers whose outcome differs from a clean oracle read, and its parts), P2
  (skill-name, read-call and <skill_reasoning> shares of the sampled tokens; sampled tokens and turns
  per episode), the multi-read and recovery rates, each with its count;
- loss: policy (task, selector before lambda, the lambda-weighted selector term), KL, clip fraction,
  and each stream's gradient mass (1/N sum w |A|: at rho = 1 the selector term's VALUE is 0 by
  construction, its gradient is not);
- update: whether an optimizer step was taken, the gradient norm (before clipping) and learning rate;
- speed: rollout and train tokens/s, and the step time split into generate / env (sandbox starts,
  tools, verification; each also on its own: time_env_start_s, time_env_tools_s, time_env_verify_s) / train / sync; what the sampler prefilled and what its turn cache reused
  (prefill_tokens, prefill_reused_tokens, prefill_shared_tokens, prefill_fallbacks) and the calls after
  which it was switched off for raising (turn_cache_failures; the turn is then sampled with a full prefill).

METRICS_SCHEMA 2 (this layout): reward, success_rate and the read rates are over every episode
played; rows without the key (schema 1) held them over the accepted groups only.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from skillgate_core.agent.episode import ENV_PHASES
from skillgate_core.credit.premise import prefixed, premise_numbers
from skillgate_core.rl.profiles import Profile
from skillgate_core.rl.rollouts import REJECTION_DETAILS_CAP, behaviour_tally

if TYPE_CHECKING:
    from skillgate_core.rl.engine.deepspeed_engine import StepStats
    from skillgate_core.rl.loss import LossOutput
    from skillgate_core.rl.rollouts import Group, RolloutStats
    from skillgate_core.rl.samples import ChunkFacts

__all__ = ["METRICS_SCHEMA", "StepTimer", "rank_summary", "step_metrics"]

METRICS_SCHEMA = 2
"""The layout of a metrics row (see the module docstring); written into every row."""


class StepTimer:
    """Wall seconds per named phase of one step.

    sync_cuda=True waits for the GPU at each phase's start and end (torch.cuda.synchronize), so a
    phase is charged for its own kernels, not for the queue it inherited: for benchmarks, since it
    removes the overlap of host and device work."""

    def __init__(self, sync_cuda: bool = False) -> None:
        self.seconds: dict[str, float] = {}
        self.sync_cuda = sync_cuda

    def _sync(self) -> None:
        if self.sync_cuda:
            import torch

            if torch.cuda.is_available():
                torch.cuda.synchronize()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self._sync()
        start = time.perf_counter()
        try:
            yield
        finally:
            self._sync()
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _rate(num: float, den: float) -> float | None:
    return num / den if den else None


def _rates(prefix: str, tally: Mapping[str, float]) -> dict[str, float | None]:
    """The behaviour rates of one `behaviour_tally` sum, keys prefixed."""
    return {
        f"{prefix}reward": _rate(tally.get("score_sum", 0.0), tally.get("episodes", 0.0)),
        f"{prefix}success_rate": _rate(tally.get("successes", 0.0), tally.get("episodes", 0.0)),
        f"{prefix}read_rate": _rate(tally.get("any_read", 0.0), tally.get("slate_episodes", 0.0)),
        f"{prefix}oracle_read_rate": _rate(tally.get("oracle_reads", 0.0), tally.get("slate_episodes", 0.0)),
        f"{prefix}misleading_read_rate": _rate(tally.get("misleading_reads", 0.0), tally.get("slate_episodes", 0.0)),
        f"{prefix}clean_oracle_rate": _rate(tally.get("clean_oracle", 0.0), tally.get("slate_episodes", 0.0)),
        f"{prefix}turns_mean": _rate(tally.get("turns", 0.0), tally.get("episodes", 0.0)),
        f"{prefix}final_answer_rate": _rate(tally.get("final_answers", 0.0), tally.get("episodes", 0.0)),
        f"{prefix}length_cut_rate": _rate(tally.get("length_cuts", 0.0), tally.get("episodes", 0.0)),
    }


def _sum_tallies(tallies: Sequence[Mapping[str, float]]) -> dict[str, float]:
    out: Counter[str] = Counter()
    for t in tallies:
        out.update(t)
    return dict(out)


def rank_summary(*, groups: Sequence[Group], rollout: RolloutStats, facts: ChunkFacts, filter_counts: Mapping[str, int],
                 losses: Sequence[LossOutput], timer: Mapping[str, float]) -> dict[str, Any]:
    """This rank's step as plain sums and counts (small, picklable: it is all-gathered)."""
    episodes = [e for g in groups for e in (*g.episodes, *g.partner)]
    return {
        "episodes": len(episodes),
        "accepted": behaviour_tally(episodes),
        "played": dict(rollout.played),
        "premise": dict(rollout.premise),
        "groups": facts.groups,
        "selector_active_groups": facts.selector_active_groups,
        "task_mass": facts.task_mass,
        "selector_mass": facts.selector_mass,
        "task_push": facts.task_push,
        "selector_push": facts.selector_push,
        "total_mask": facts.total_mask,
        "identity_tokens": facts.identity_tokens,
        "read_call_tokens": facts.read_call_tokens,
        "oracle_actions": facts.oracle_actions,
        "oracle_negative_actions": facts.oracle_negative_actions,
        "credit_failed_groups": facts.credit_failed_groups,
        "credit_errors": list(facts.errors),
        "trained_tokens": sum(len(e.trajectory.prompt_ids) + len(e.trajectory.response_ids) for e in episodes),
        "filter": dict(filter_counts),
        "rejections": list(rollout.rejections),
        "zero_variance_all_fail": rollout.zero_variance_all_fail,
        "zero_variance_all_pass": rollout.zero_variance_all_pass,
        "policy_task": sum(float(o.policy_task) for o in losses),
        "policy_selector": sum(float(o.policy_selector) for o in losses),
        "kl": sum(float(o.kl) for o in losses),
        "loss": sum(float(o.loss.detach()) for o in losses),
        "clip_fractions": [float(o.clip_fraction) for o in losses],
        "drawn": list(rollout.drawn),
        "gave_up": bool(rollout.gave_up),
        "episodes_played": rollout.episodes,
        "discarded_groups": rollout.discarded_groups,
        "discarded_episodes": rollout.discarded_episodes,
        "generated_tokens": rollout.generated_tokens,
        "generate_s": rollout.generate_s,
        "env_s": rollout.env_s,
        "env_phases": dict(rollout.env_phases),
        "prefill": dict(rollout.prefill),
        "timer": dict(timer),
        "credit_episodes": list(facts.episodes),
    }


def step_metrics(*, step: int, summaries: Sequence[Mapping[str, Any]], normaliser: float, profile: Profile,
                 update: StepStats | None = None, selector_coef: float = 0.0, variant: str = "") -> dict[str, Any]:
    """One row for this step from every rank's `rank_summary` (in rank order).

    update: what the optimizer step reported (None when the step took none: nothing was accepted);
    selector_coef: lambda in force (weights the selector term and its gradient mass); variant: the
    run's labelled variant ('' for the method itself)."""
    def total(key: str) -> float:
        return sum(s[key] for s in summaries)

    filters: Counter[str] = Counter()
    for s in summaries:
        filters.update(s["filter"])
    timers = [s["timer"] for s in summaries]
    train_s = max((t.get("train", 0.0) for t in timers), default=0.0)
    rollout_s = max((t.get("rollout", 0.0) for t in timers), default=0.0)
    trained = bool(any(s["clip_fractions"] for s in summaries))
    played = _sum_tallies([s["played"] for s in summaries])
    accepted = _sum_tallies([s["accepted"] for s in summaries])
    rejected = {k: v for k, v in sorted(filters.items()) if k not in ("accepted", "forced", "selector_only")}
    drawn_groups = filters.get("accepted", 0) + sum(rejected.values())
    details = [r for s in summaries for r in s["rejections"]]
    policy_selector = total("policy_selector") if trained else None
    return {
        "step": step,
        "metrics_schema": METRICS_SCHEMA,
        "profile": profile.name,
        "variant": variant,
        "groups": int(total("groups")),
        "episodes": int(total("episodes")),
        "episodes_played": int(total("episodes_played")),
        "episodes_aborted": int(played.get("aborted", 0)),
        **_rates("", played),
        **_rates("accepted_", accepted),
        "groups_drawn": int(drawn_groups),
        "groups_accepted": int(filters.get("accepted", 0)),
        "groups_rejected": int(sum(rejected.values())),
        # played ahead (GRPOConfig.draw_ahead) and given back to the prompt stream unjudged: not drawn
        "groups_discarded": int(sum(s.get("discarded_groups", 0) for s in summaries)),
        "episodes_discarded": int(sum(s.get("discarded_episodes", 0) for s in summaries)),
        "selector_active_fraction": _rate(total("selector_active_groups"), total("groups")),
        "task_token_mass": total("task_mass"),
        "selector_token_mass": total("selector_mass"),
        "loss_tokens": total("total_mask"),
        "selection_token_share": _rate(total("identity_tokens"), total("total_mask")),
        "read_call_token_share": _rate(total("read_call_tokens"), total("total_mask")),
        "oracle_negative_advantage_rate": _rate(total("oracle_negative_actions"), total("oracle_actions")),
        "credit_failed_groups": int(total("credit_failed_groups")),
        "credit_errors": [e for s in summaries for e in s["credit_errors"]][:REJECTION_DETAILS_CAP],
        "normaliser": normaliser,
        "trained": trained,
        "optimizer_step_taken": update is not None,
        # DeepSpeed reports no norm on some paths (StepStats: nan); JSON gets null, not NaN
        "grad_norm": update.grad_norm if update is not None and math.isfinite(update.grad_norm) else None,
        "learning_rate": update.lr if update is not None else None,
        "policy_task": total("policy_task") if trained else None,
        "policy_selector": policy_selector,
        "selector_loss_term": selector_coef * policy_selector if policy_selector is not None else None,
        "task_gradient_mass": _rate(total("task_push"), normaliser),
        "selector_gradient_mass": _rate(selector_coef * total("selector_push"), normaliser),
        "kl": total("kl") if trained else None,
        "loss": total("loss") if trained else None,
        "clip_fraction": _mean([c for s in summaries for c in s["clip_fractions"]]),
        "rejected": rejected,
        "rejection_details": details[:REJECTION_DETAILS_CAP],
        "forced_groups": filters.get("forced", 0),
        "selector_only_groups": filters.get("selector_only", 0),
        "zero_variance_all_fail": int(total("zero_variance_all_fail")),
        "zero_variance_all_pass": int(total("zero_variance_all_pass")),
        "workers_gave_up": sum(s["gave_up"] for s in summaries),
        "drawn_task_ids": [t for s in summaries for t in s["drawn"]],
        "rollout_tokens_per_s": _rate(total("generated_tokens"), rollout_s),
        "train_tokens_per_s": _rate(total("trained_tokens"), train_s),
        "time_generate_s": max(s["generate_s"] for s in summaries),
        "time_env_s": max(s["env_s"] for s in summaries),
        # env_s by phase (the slowest rank's, like env_s): what bounds the sandbox side of a step
        **{f"time_env_{phase}_s": max(s["env_phases"].get(phase, 0.0) for s in summaries) for phase in ENV_PHASES},
        "time_train_s": train_s,
        "time_sync_s": max((t.get("sync", 0.0) for t in timers), default=0.0),
        "time_step_s": max((sum(t.values()) for t in timers), default=0.0),
        **_prefill(summaries),
        # the premise over every drawn group's slate episodes, all ranks (docs/method.md 8b): premise/KEY
        **prefixed(premise_numbers(_sum_tallies([s.get("premise") or {} for s in summaries]))),
    }


def _prefill(summaries: Sequence[Mapping[str, Any]]) -> dict[str, int | None]:
    """The turn cache's counts over every rank (policy.static.turn_cache): context tokens prefilled, reused from an
    episode's earlier turns, copied from another episode with the same prompt, and the episodes whose
    context did not extend their cache (fallbacks). None: no rank's policy has a turn cache."""
    parts = [s.get("prefill") or {} for s in summaries]
    keys = {"prefill_tokens": "prefilled_tokens", "prefill_reused_tokens": "reused_tokens",
            "prefill_shared_tokens": "shared_tokens", "prefill_fallbacks": "fallbacks",
            "turn_cache_failures": "failures"}
    if not any(parts):
        return dict.fromkeys(keys)
    return {name: int(sum(p.get(key, 0) for p in parts)) for name, key in keys.items()}

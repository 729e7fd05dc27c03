"""Per-step training metrics: one flat JSON row per optimizer step, over all workers.

Each rank hands in what it saw (its accepted groups, rollout stats, conversion facts, filter counts,
loss parts, phase timings); rank 0 folds them into one row for metrics.jsonl, the warehouse and the
Prefect artifact:

- outcome: reward (mean raw score), success rate (score >= 1);
- selection: oracle / misleading read rate (share of slate episodes with >= 1 such read),
  clean-oracle rate (exactly one read, the oracle: the training utility), selector-active fraction
  (accepted groups with a nonzero selector advantage);
- credit: task and selector token mass, the share of loss tokens that are selection (identity)
  tokens and read-call tokens, oracle reads with a negative advantage (selector advantage in the
  two-stream profiles, the episode's in the plain ones, whose read calls carry it);
- loss: policy (task, selector), KL, clip fraction (means over micro-batches with tokens);
- filter: rejections by reason, forced acceptances, workers that gave up, episodes played (accepted
  or not) vs `episodes` (trained);
- speed: rollout and train tokens/s, and the step time split into generate / env (sandbox starts,
  tools, verification) / train / sync.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from skillgate_core.rl.profiles import Profile

if TYPE_CHECKING:
    from skillgate_core.rl.loss import LossOutput
    from skillgate_core.rl.rollouts import Group, RolloutStats
    from skillgate_core.rl.samples import ChunkFacts

__all__ = ["StepTimer", "rank_summary", "step_metrics"]


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


def rank_summary(*, groups: Sequence[Group], rollout: RolloutStats, facts: ChunkFacts, filter_counts: Mapping[str, int],
                 losses: Sequence[LossOutput], timer: Mapping[str, float]) -> dict[str, Any]:
    """This rank's step as plain sums and counts (small, picklable: it is all-gathered)."""
    episodes = [e for g in groups for e in (*g.episodes, *g.partner)]
    slated = [e for e in episodes if e.with_slate]
    reads = [e.spans.reads() for e in slated]
    return {
        "episodes": len(episodes),
        "score_sum": sum(float(e.trajectory.raw_score or 0.0) for e in episodes),
        "successes": sum(float(e.trajectory.score) >= 1.0 for e in episodes),
        "slate_episodes": len(reads),
        "oracle_reads": sum("oracle" in r for r in reads),
        "misleading_reads": sum("misleading" in r for r in reads),
        "clean_oracle": sum(e.spans.reads() == ["oracle"] and all(e.spans.attributed()) for e in slated),
        "any_read": sum(bool(r) for r in reads),
        "groups": facts.groups,
        "selector_active_groups": facts.selector_active_groups,
        "task_mass": facts.task_mass,
        "selector_mass": facts.selector_mass,
        "total_mask": facts.total_mask,
        "identity_tokens": facts.identity_tokens,
        "read_call_tokens": facts.read_call_tokens,
        "oracle_actions": facts.oracle_actions,
        "oracle_negative_actions": facts.oracle_negative_actions,
        "credit_failed_groups": facts.credit_failed_groups,
        "trained_tokens": sum(len(e.trajectory.prompt_ids) + len(e.trajectory.response_ids) for e in episodes),
        "filter": dict(filter_counts),
        "policy_task": sum(float(o.policy_task) for o in losses),
        "policy_selector": sum(float(o.policy_selector) for o in losses),
        "kl": sum(float(o.kl) for o in losses),
        "loss": sum(float(o.loss.detach()) for o in losses),
        "clip_fractions": [float(o.clip_fraction) for o in losses],
        "drawn": list(rollout.drawn),
        "gave_up": bool(rollout.gave_up),
        "episodes_played": rollout.episodes,
        "generated_tokens": rollout.generated_tokens,
        "generate_s": rollout.generate_s,
        "env_s": rollout.env_s,
        "timer": dict(timer),
        "credit_episodes": list(facts.episodes),
    }


def step_metrics(*, step: int, summaries: Sequence[Mapping[str, Any]], normaliser: float,
                 profile: Profile) -> dict[str, Any]:
    """One row for this step from every rank's `rank_summary` (in rank order)."""
    def total(key: str) -> float:
        return sum(s[key] for s in summaries)

    filters: Counter[str] = Counter()
    for s in summaries:
        filters.update(s["filter"])
    timers = [s["timer"] for s in summaries]
    train_s = max((t.get("train", 0.0) for t in timers), default=0.0)
    rollout_s = max((t.get("rollout", 0.0) for t in timers), default=0.0)
    trained = bool(any(s["clip_fractions"] for s in summaries))
    return {
        "step": step,
        "profile": profile.name,
        "groups": int(total("groups")),
        "episodes": int(total("episodes")),
        "episodes_played": int(total("episodes_played")),
        "reward": _rate(total("score_sum"), total("episodes")),
        "success_rate": _rate(total("successes"), total("episodes")),
        "read_rate": _rate(total("any_read"), total("slate_episodes")),
        "oracle_read_rate": _rate(total("oracle_reads"), total("slate_episodes")),
        "misleading_read_rate": _rate(total("misleading_reads"), total("slate_episodes")),
        "clean_oracle_rate": _rate(total("clean_oracle"), total("slate_episodes")),
        "selector_active_fraction": _rate(total("selector_active_groups"), total("groups")),
        "task_token_mass": total("task_mass"),
        "selector_token_mass": total("selector_mass"),
        "loss_tokens": total("total_mask"),
        "selection_token_share": _rate(total("identity_tokens"), total("total_mask")),
        "read_call_token_share": _rate(total("read_call_tokens"), total("total_mask")),
        "oracle_negative_advantage_rate": _rate(total("oracle_negative_actions"), total("oracle_actions")),
        "credit_failed_groups": int(total("credit_failed_groups")),
        "normaliser": normaliser,
        "trained": trained,
        "policy_task": total("policy_task") if trained else None,
        "policy_selector": total("policy_selector") if trained else None,
        "kl": total("kl") if trained else None,
        "loss": total("loss") if trained else None,
        "clip_fraction": _mean([c for s in summaries for c in s["clip_fractions"]]),
        "rejected": {k: v for k, v in sorted(filters.items()) if k not in ("accepted", "forced")},
        "forced_groups": filters.get("forced", 0),
        "workers_gave_up": sum(s["gave_up"] for s in summaries),
        "drawn_task_ids": [t for s in summaries for t in s["drawn"]],
        "rollout_tokens_per_s": _rate(total("generated_tokens"), rollout_s),
        "train_tokens_per_s": _rate(total("trained_tokens"), train_s),
        "time_generate_s": max(s["generate_s"] for s in summaries),
        "time_env_s": max(s["env_s"] for s in summaries),
        "time_train_s": train_s,
        "time_sync_s": max((t.get("sync", 0.0) for t in timers), default=0.0),
        "time_step_s": max((sum(t.values()) for t in timers), default=0.0),
    }

"""One worker's rollout step: draw prompts, play G episodes each, judge every group, refill rejects.

A group is one prompt's G episodes (for hybrid_slate a *pair*: G without skills and G with the
slate, judged together). Each round draws as many prompts as groups are still missing (times
`GRPOConfig.draw_ahead`), plays all their episodes in one lockstep batch (so the policy generates for
every live episode at once), then judges each group in draw order with the step's `RolloutStepFilter`
(docs/method.md 4-5) until the worker has its share; groups played past that are discarded unjudged and
given back to the prompt stream. Rejected groups are replaced by new draws in the next round, until the
worker has its share of accepted groups or has spent its rejection budget (then it trains on what it has
and says so in metrics).

    groups, stats = rollout_step(tasks, stream, policy, tokenizer, profile, config, skills_root)
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillgate_core.agent.episode import EpisodeConfig, EpisodeSpec, Policy, run_episodes
from skillgate_core.agent.premise_facts import trajectory_premise
from skillgate_core.agent.trajectory import Trajectory, trajectory_span_report
from skillgate_core.credit import (
    EpisodeEvidence,
    GroupVerdict,
    RejectReason,
    RolloutStepFilter,
    SpanReport,
    action_selector_advantages,
    episode_credit_problem,
)
from skillgate_core.credit.premise import PremiseEpisode, premise_tally
from skillgate_core.envs.task_package import TaskPackage
from skillgate_core.envs.verifier import EpisodeStatus
from skillgate_core.rl.grpo_config import GRPOConfig
from skillgate_core.rl.profiles import Profile
from skillgate_core.rl.prompt_stream import PromptStream
from skillgate_core.skills import Slate

__all__ = ["REJECTION_DETAILS_CAP", "Episode", "Group", "RLTask", "RolloutStats", "behaviour_tally", "group_premise",
           "judge_group", "rollout_step", "step_filter_for"]

REJECTION_DETAILS_CAP = 16
"""Rejected groups kept with their detail per worker and step (the counts by reason keep every one)."""


# Declarations below, not logic: each field documented where it is declared (docs/design.md, Style).
@dataclass(frozen=True)
class RLTask:
    """One training prompt, as rl-data-prep froze it."""

    task_id: str
    """The task."""
    family: str
    """Its benchmark family."""
    task: TaskPackage
    """The loaded task package (sandbox image, verifier)."""
    slate: Slate
    """The frozen ordered slate (16 skills)."""
    skills_dir: Path
    """A folder holding exactly the slate's skills, mounted read-only at /skills."""
    prompt_ids: tuple[int, ...]
    """Prompt token ids with the slate, rendered once by rl-data-prep."""
    no_skill_prompt_ids: tuple[int, ...] | None = None
    """Prompt ids without skills (no_skill and hybrid_slate profiles)."""


@dataclass(frozen=True)
class Episode:
    """One graded episode with what credit needs."""

    trajectory: Trajectory
    """The exact token stream and grade."""
    spans: SpanReport
    """Selection actions and mismatch counters (docs/method.md 4)."""
    with_slate: bool
    """False for the no-skill episodes of no_skill / hybrid_slate."""

    @property
    def aborted(self) -> bool:
        """An infrastructure failure (docs/method.md 2): the group is rejected, never scored."""
        return self.trajectory.status == EpisodeStatus.ABORTED

    @property
    def score(self) -> float | None:
        """raw_score for the task advantage (docs/method.md 5); None for an aborted episode. A verifier that ran
        and wrote no numeric reward grades 0 (docs/method.md 3: "missing or non-numeric score -> 0 with a flag";
        the flag is the trajectory's missing_reward): were the group dropped instead, an agent that keeps
        the tests from writing a reward would escape its 0."""
        t = self.trajectory
        if self.aborted:
            return None
        return 0.0 if t.missing_reward or t.raw_score is None else float(t.raw_score)

    def evidence(self) -> EpisodeEvidence:
        problem = episode_credit_problem(self.trajectory.loss_mask, self.spans.actions)
        return EpisodeEvidence(
            score=self.score,
            aborted=self.aborted,
            parse_dispatch_mismatch=self.spans.parse_dispatch_mismatch,
            span_mismatch=self.spans.span_mismatch,
            alignment_mismatch=self.spans.alignment_mismatch,
            credit_ok=problem is None,
            credit_detail=problem or "",
        )


@dataclass(frozen=True)
class Group:
    """A judged group: one prompt's episodes (hybrid: the slate group plus its no-skill partner) and the
    filter's verdict; `rollout_step` returns the accepted ones."""

    task: RLTask
    """The prompt."""
    episodes: tuple[Episode, ...]
    """The slate episodes (or the no-skill ones for the no_skill profile)."""
    partner: tuple[Episode, ...] = ()
    """hybrid_slate only: the same task's no-skill episodes."""
    verdict: GroupVerdict = field(default_factory=lambda: GroupVerdict(accepted=True))
    """How the filter judged it (accepted, forced or rejected with a reason)."""


@dataclass
class RolloutStats:
    """What one worker's rollout step cost and saw."""

    drawn: list[str] = field(default_factory=list)
    """Task ids drawn, in order (accepted and rejected)."""
    episodes: int = 0
    """Episodes played in the groups judged (drawn)."""
    discarded_groups: int = 0
    """Groups played ahead (GRPOConfig.draw_ahead) and discarded unjudged: their prompts went back to the stream."""
    discarded_episodes: int = 0
    """Their episodes (generated_tokens and the times include them: they are work done)."""
    generated_tokens: int = 0
    """Sampled (loss-mask 1) tokens."""
    generate_s: float = 0.0
    """Seconds inside the policy's generate calls."""
    env_s: float = 0.0
    """Seconds in sandboxes: starts, tool calls, verification."""
    env_phases: dict[str, float] = field(default_factory=dict)
    """Wall seconds of the sandbox phases inside env_s (agent.episode.ENV_PHASES: start, tools, verify); the rest
    of env_s is the episode loop's own bookkeeping."""
    gave_up: bool = False
    """True when the rejection budget ran out before the worker had its share of groups."""
    played: dict[str, float] = field(default_factory=dict)
    """`behaviour_tally` summed over EVERY group drawn, accepted or rejected: what the policy did,
    whatever the filter kept."""
    rejections: list[dict[str, str]] = field(default_factory=list)
    """The first REJECTION_DETAILS_CAP rejected groups of the step: {task_id, reason, detail} (the
    verdict's detail names the episode and the counter or scores that broke the rule)."""
    zero_variance_all_fail: int = 0
    """Zero-variance groups (rejected or forced) in which every episode failed (score < 1); a hybrid
    pair counts as its two groups, as the filter counts it."""
    zero_variance_all_pass: int = 0
    """Zero-variance groups in which every episode succeeded (score >= 1)."""
    premise: dict[str, float] = field(default_factory=dict)
    """credit.premise.premise_tally summed over the slate episodes of EVERY group drawn, accepted or rejected
    (docs/method.md 8b): whether the step's episodes have the premise the method needs."""
    prefill: dict[str, int] = field(default_factory=dict)
    """What the policy's turn cache did during the step (policy.static.turn_cache.COUNTERS: context tokens
    prefilled, reused from an episode's earlier turns, shared from another episode with the same prompt,
    fallbacks); empty for a policy without one (teacher, SGLang, hf sampler)."""


def behaviour_tally(episodes: Sequence[Episode]) -> dict[str, float]:
    """Sums over `episodes` for the step's behaviour rates: an aborted episode (an infrastructure
    failure, not a policy act) is counted apart and left out of every rate."""
    played = [e for e in episodes if not e.aborted]
    slated = [e for e in played if e.with_slate]
    reads = [e.spans.reads() for e in slated]
    return {
        "episodes": len(played),
        "aborted": len(episodes) - len(played),
        "score_sum": sum(float(e.trajectory.raw_score or 0.0) for e in played),
        "successes": sum(float(e.trajectory.score) >= 1.0 for e in played),
        "slate_episodes": len(slated),
        "any_read": sum(bool(r) for r in reads),
        "oracle_reads": sum("oracle" in r for r in reads),
        "misleading_reads": sum("misleading" in r for r in reads),
        "clean_oracle": sum(e.spans.clean_oracle for e in slated),  # consulting another skill is not clean
        # the episodes' shape: a policy drifting towards longer episodes shows here before evaluation does
        "turns": sum(len(e.trajectory.turns) for e in played),
        "final_answers": sum(bool(e.trajectory.turns) and e.trajectory.turns[-1].finish == "stop"
                             and not e.trajectory.turns[-1].calls for e in played),
        "length_cuts": sum(any(t.finish == "length" for t in e.trajectory.turns) for e in played),
    }


def group_premise(episodes: Sequence[Episode], tokenizer: Any, first_mention: bool = False) -> list[PremiseEpisode]:
    """The premise facts of a group's slate episodes (a no-skill episode chooses no skill). Under the labelled
    variant identity_first_mention the episodes' spans credit the first mention, so the method's own spans
    are detected again: the premise measures the episodes, whatever the credit design."""
    return [trajectory_premise(e.trajectory, tokenizer, None if first_mention else e.spans)
            for e in episodes if e.with_slate]


def _add(total: dict[str, float], part: Mapping[str, float]) -> None:
    for key, value in part.items():
        total[key] = total.get(key, 0.0) + value


class _TimedPolicy:
    """Wraps a policy to time its generate calls (the rest of a rollout is sandbox work)."""

    def __init__(self, policy: Policy) -> None:
        self.policy, self.name, self.seconds = policy, policy.name, 0.0

    def cache_counters(self) -> dict[str, int]:
        """The wrapped policy's turn-cache counters (agent.policies.LocalPolicy), or none."""
        counters = getattr(self.policy, "cache_counters", None)
        return counters() if callable(counters) else {}

    def act(self, views: Sequence[Any]) -> list[Any]:
        start = time.perf_counter()
        try:
            return self.policy.act(views)
        finally:
            self.seconds += time.perf_counter() - start


def _specs(task: RLTask, profile: Profile, group_size: int) -> list[tuple[EpisodeSpec, bool]]:
    plain = [(EpisodeSpec(task.task, None, None, bench=task.family, repeat=r,
                          prompt_ids=task.no_skill_prompt_ids), False) for r in range(group_size)]
    slated = [(EpisodeSpec(task.task, task.slate, task.skills_dir, bench=task.family, repeat=r,
                           prompt_ids=task.prompt_ids), True) for r in range(group_size)]
    if profile.slate == "none":
        return plain
    if profile.slate == "paired":
        return plain + slated
    return slated


def step_filter_for(profile: Profile, config: GRPOConfig) -> RolloutStepFilter:
    """The dynamic filter of one rollout step of `profile`: every profile that shows a slate checks the
    span counters (the method's fail-closed rule, whatever its credit uses), only the plain profiles
    force, and the selector-only variant applies where the config labels it."""
    return RolloutStepFilter(group_size=config.group_size, check_spans=profile.checks_spans,
                             forces=profile.forces_acceptance, force_after_groups=config.force_after_groups,
                             force_after_samples=config.force_after_samples,
                             selector_on_zero_variance=config.selector_on_zero_variance)


def _slate_pairs(slate: Slate) -> list[tuple[str, str]]:
    return [(e.name, e.category) for e in slate.entries]


def rollout_step(
    tasks: Sequence[RLTask],
    stream: PromptStream,
    policy: Policy,
    tokenizer: Any,
    profile: Profile,
    config: GRPOConfig,
    step_filter: RolloutStepFilter,
    *,
    target_groups: int,
) -> tuple[list[Group], RolloutStats]:
    """Play groups until `target_groups` are accepted or the rejection budget is spent."""
    timed = _TimedPolicy(policy)
    stats = RolloutStats()
    episode_config = EpisodeConfig(
        max_turns=config.max_turns, max_context_tokens=config.max_context_tokens,
        max_new_tokens=config.max_new_tokens, wall_clock_s=config.episode_wall_clock_s,
        backend=config.backend, workers=config.sandbox_workers, overlap_sandbox=config.overlap_sandbox,
    )
    accepted: list[Group] = []
    counters_before = timed.cache_counters()
    while len(accepted) < target_groups:
        if step_filter.rejected_groups >= config.max_rejected_groups:
            stats.gave_up = True
            break
        missing = target_groups - len(accepted)
        drawn = [tasks[stream.next()] for _ in range(max(missing, math.ceil(missing * config.draw_ahead)))]
        plan = [_specs(t, profile, config.group_size) for t in drawn]
        flat = [spec for specs in plan for spec, _ in specs]
        started = time.perf_counter()
        generate_before = timed.seconds
        trajectories = run_episodes(flat, timed, tokenizer, episode_config, phase_seconds=stats.env_phases)
        stats.env_s += time.perf_counter() - started - (timed.seconds - generate_before)
        stats.generated_tokens += sum(sum(t.loss_mask) for t in trajectories)
        position = 0
        for judged, (task, specs) in enumerate(zip(drawn, plan, strict=True)):
            if len(accepted) >= target_groups:  # played ahead and not needed: unjudged, back to the stream
                stream.give_back(len(drawn) - judged)
                stats.discarded_groups += len(drawn) - judged
                stats.discarded_episodes += len(trajectories) - position
                break
            stats.drawn.append(task.task_id)
            stats.episodes += len(specs)
            episodes = []
            for (_, with_slate), traj in zip(specs, trajectories[position: position + len(specs)], strict=True):
                spans = trajectory_span_report(traj, tokenizer, first_mention=config.identity_first_mention)
                episodes.append(Episode(traj, spans, with_slate))
            position += len(specs)
            _add(stats.premise, premise_tally(group_premise(episodes, tokenizer, config.identity_first_mention)))
            group = judge_group(task, episodes, profile, step_filter)
            _record(stats, task, episodes, group, profile)
            if group.verdict.accepted:
                accepted.append(group)
    stats.generate_s = timed.seconds
    after = timed.cache_counters()
    stats.prefill = {k: v - counters_before.get(k, 0) for k, v in after.items()}
    return accepted, stats


def _record(stats: RolloutStats, task: RLTask, episodes: list[Episode], group: Group, profile: Profile) -> None:
    """What the step saw of one drawn group, accepted or not."""
    _add(stats.played, behaviour_tally(episodes))
    verdict = group.verdict
    if verdict.reason is RejectReason.ZERO_VARIANCE or verdict.forced or verdict.selector_only:
        scores = [e.score for e in episodes]
        weight = 2 if profile.slate == "paired" else 1
        if all(s is not None and s >= 1.0 for s in scores):
            stats.zero_variance_all_pass += weight
        else:
            stats.zero_variance_all_fail += weight
    if not verdict.accepted and len(stats.rejections) < REJECTION_DETAILS_CAP:
        assert verdict.reason is not None
        stats.rejections.append({"task_id": task.task_id, "reason": verdict.reason.value, "detail": verdict.detail})


def _selector_varies(episodes: Sequence[Episode], profile: Profile) -> bool:
    """Some attributed read of the group has a nonzero selector advantage (the profile's utility)."""
    if profile.utility is None:
        return False
    return any(v != 0.0 for values in action_selector_advantages([e.spans for e in episodes], profile.utility)
               for v in values)


def judge_group(task: RLTask, episodes: list[Episode], profile: Profile, step_filter: RolloutStepFilter) -> Group:
    """One drawn group with the filter's verdict (accepted or not), counted in `step_filter`."""
    gold = task.slate.oracle
    if profile.slate == "paired":
        plain = [e for e in episodes if not e.with_slate]
        slated = [e for e in episodes if e.with_slate]
        verdict = step_filter.judge_pair([e.evidence() for e in plain], [e.evidence() for e in slated],
                                         slate=_slate_pairs(task.slate), gold_name=gold)
        return Group(task, tuple(slated), tuple(plain), verdict)
    slate = _slate_pairs(task.slate) if profile.slate == "mixed" else None
    varies = step_filter.selector_on_zero_variance and _selector_varies(episodes, profile)
    verdict = step_filter.judge([e.evidence() for e in episodes], slate=slate, gold_name=gold if slate else None,
                                selector_varies=varies)
    return Group(task, tuple(episodes), (), verdict)

"""Fail-closed group validation and the dynamic filter (docs/method.md 4 last paragraph, 5, 11 vector 6).

A group either earns credit whole or not at all: one bad episode (aborted, unscored, a span
counter above zero, a credit computation that failed) or a malformed group (wrong size, a slate
that is not 16 unique names with exactly one oracle and 5/5/5) rejects every episode of it, and
the trainer resamples the prompt. Every rejection carries a `RejectReason` (counted in metrics)
and a detail naming the episode and value that caused it.

The dynamic filter applies to every profile: a group whose scores do not vary carries no task
signal and is rejected too. `RolloutStepFilter` holds one rollout step's count of rejections, for
the two rules that depend on it: the plain-GRPO profiles (no_skill, mixed_task_reward) accept
zero-variance groups anyway once the step has rejected 64 groups or 300 samples, so a step always
completes (the two-stream profiles, mixed_separated and hybrid_slate never force); and hybrid_slate
keeps or rejects the no-skill group and the slate group of one task together (pair-atomic).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from skillgate_core.skills.slate_shape import slate_shape_problem

__all__ = [
    "FORCE_AFTER_GROUPS",
    "FORCE_AFTER_SAMPLES",
    "EpisodeEvidence",
    "GroupVerdict",
    "RejectReason",
    "RolloutStepFilter",
    "count_rejections",
    "dynamic_filter",
    "kept_reward",
    "validate_group",
]

ZERO_VARIANCE_TOLERANCE = 1e-12
"""A group is informative only if max(score) - min(score) exceeds this."""
FORCE_AFTER_GROUPS = 64
"""Plain-GRPO profiles: after this many rejected groups in one rollout step, zero variance is waived."""
FORCE_AFTER_SAMPLES = 300
"""... or after this many rejected samples (episodes of rejected groups) in one rollout step."""


class RejectReason(StrEnum):
    """Why a group earned no credit; the value is the metric key."""

    GROUP_SIZE = "group_size"
    SLATE_MALFORMED = "slate_malformed"
    EPISODE_ABORTED = "episode_aborted"
    MISSING_REWARD = "missing_reward"
    PARSE_DISPATCH_MISMATCH = "parse_dispatch_mismatch"
    SPAN_MISMATCH = "span_mismatch"
    ALIGNMENT_MISMATCH = "alignment_mismatch"
    CREDIT_FAILED = "credit_failed"
    ZERO_VARIANCE = "zero_variance"


@dataclass(frozen=True)
class EpisodeEvidence:
    """What group validation needs to know about one episode."""

    score: float | None
    """The score the task advantage uses (raw_score); None or NaN when the episode has no reward."""
    aborted: bool = False
    """True for status ABORTED (infrastructure failure): never scored 0 in training."""
    parse_dispatch_mismatch: int = 0
    """Turns whose parsed calls differ from what the environment dispatched (docs/method.md 4.1)."""
    span_mismatch: int = 0
    """Attributed reads whose skill name could not be located as tokens of their call (docs/reads.md):
    only what cannot be judged; a glob, a relative path or a skill's own script is never one."""
    alignment_mismatch: int = 0
    """Turns whose decoded ids do not reproduce the response text (docs/method.md 4.5)."""
    credit_ok: bool = True
    """False when this episode's credit cannot be computed: its read actions break a token-weight rule
    (`credit.weights.episode_credit_problem`), checked before the filter so the group is resampled."""
    credit_detail: str = ""
    """What broke, when credit_ok is False."""


@dataclass(frozen=True)
class GroupVerdict:
    """Accept or reject one group; a rejection always says why."""

    accepted: bool
    """True iff the group earns credit."""
    reason: RejectReason | None = None
    """The first rule the group broke (None when accepted)."""
    detail: str = ""
    """Human-readable evidence: which episode, which counter, which value."""
    forced: bool = False
    """True when a zero-variance group was accepted only by the plain profiles' forced acceptance."""
    selector_only: bool = False
    """True when a zero-variance group was kept for the selector stream only (task advantages 0): the
    labelled variant selector_on_zero_variance, never the method's default."""

    def __post_init__(self) -> None:
        if self.accepted != (self.reason is None):
            raise ValueError("an accepted verdict has no reason; a rejected one must have one")
        if (self.forced or self.selector_only) and not self.accepted:
            raise ValueError("only an accepted verdict can be forced or kept for the selector only")


_ACCEPT = GroupVerdict(accepted=True)
_FORCED = GroupVerdict(accepted=True, forced=True, detail="zero variance waived: forced acceptance")
_SELECTOR_ONLY = GroupVerdict(accepted=True, selector_only=True,
                              detail="zero variance: kept for the selector stream only (variant selector_on_zero_variance)")


def _reject(reason: RejectReason, detail: str) -> GroupVerdict:
    return GroupVerdict(accepted=False, reason=reason, detail=detail)


def _has_reward(score: float | None) -> bool:
    return score is not None and math.isfinite(float(score))


def kept_reward(score: float | None) -> float:
    """The reward of an episode of a group the filter kept: every such episode has one."""
    if score is None:
        raise ValueError("an episode without a reward in a group the dynamic filter kept")
    return float(score)


def _unscored_or_uncredited(episodes: Sequence[EpisodeEvidence]) -> GroupVerdict | None:
    for i, ep in enumerate(episodes):
        if not _has_reward(ep.score):
            return _reject(RejectReason.MISSING_REWARD, f"episode {i} has no reward (score={ep.score!r})")
    for i, ep in enumerate(episodes):
        if not ep.credit_ok:
            return _reject(RejectReason.CREDIT_FAILED,
                           f"episode {i}: credit computation failed: {ep.credit_detail or 'no detail'}")
    return None


def dynamic_filter(episodes: Sequence[EpisodeEvidence]) -> GroupVerdict:
    """Keep a group iff every episode has a reward, crediting succeeded, and the scores vary.

    "Vary" means max - min > 1e-12: a group whose scores are all equal carries no task signal,
    whatever its reads (docs/method.md 11 vector 6).
    """
    broken = _unscored_or_uncredited(episodes)
    if broken is not None:
        return broken
    scores = [kept_reward(ep.score) for ep in episodes]
    if not scores or max(scores) - min(scores) <= ZERO_VARIANCE_TOLERANCE:
        return _reject(RejectReason.ZERO_VARIANCE, f"all scores equal: {scores}")
    return _ACCEPT


def validate_group(
    episodes: Sequence[EpisodeEvidence],
    *,
    group_size: int,
    slate: Sequence[tuple[str, str]] | None,
    gold_name: str | None = None,
    check_spans: bool,
    waive_zero_variance: bool = False,
) -> GroupVerdict:
    """Judge one group; the first broken rule is the reason.

    Order: group size, slate shape (skipped only when `slate` is None, i.e. a no-skill group),
    aborted episodes, span counters (when the profile uses reads: `check_spans`), then the dynamic
    filter: missing rewards, failed credit, zero variance. `waive_zero_variance` (the plain
    profiles' forced acceptance) lets a zero-variance group through as `forced`; nothing else is
    ever waived: a broken group is never trained on.
    """
    if len(episodes) != group_size:
        return _reject(RejectReason.GROUP_SIZE, f"group has {len(episodes)} episodes, expected {group_size}")
    if slate is not None:
        problem = slate_shape_problem(slate, gold_name)
        if problem is not None:
            return _reject(RejectReason.SLATE_MALFORMED, problem)
    for i, ep in enumerate(episodes):
        if ep.aborted:
            return _reject(RejectReason.EPISODE_ABORTED, f"episode {i} was aborted")
    if check_spans:
        for counter in (
            RejectReason.PARSE_DISPATCH_MISMATCH,
            RejectReason.SPAN_MISMATCH,
            RejectReason.ALIGNMENT_MISMATCH,
        ):
            for i, ep in enumerate(episodes):
                value = getattr(ep, counter.value)
                if value != 0:
                    return _reject(counter, f"episode {i}: {counter.value}={value}")
    verdict = dynamic_filter(episodes)
    if waive_zero_variance and verdict.reason is RejectReason.ZERO_VARIANCE:
        return _FORCED
    return verdict


@dataclass
class RolloutStepFilter:
    """The dynamic filter over one rollout step: judges groups and counts what it rejected.

    Make one per rollout step. `forces` is the profile's `forces_acceptance` (no_skill and
    mixed_task_reward): once this step has rejected `force_after_groups` groups or
    `force_after_samples` samples, later zero-variance groups are accepted (flagged `forced`).
    """

    group_size: int
    """G, the episodes of one group."""
    check_spans: bool
    """Whether span counters reject (profiles whose credit uses reads)."""
    forces: bool
    """Whether this profile's zero-variance rejections give way after the limits below."""
    force_after_groups: int = FORCE_AFTER_GROUPS
    """Rejected groups in this step after which zero variance is waived (when `forces`)."""
    force_after_samples: int = FORCE_AFTER_SAMPLES
    """Rejected samples in this step after which zero variance is waived (when `forces`)."""
    selector_on_zero_variance: bool = False
    """The labelled variant (two-stream profiles only): a zero-variance group whose selector advantages
    vary (`judge(selector_varies=True)`) is kept for the selector stream only."""
    rejected_groups: int = 0
    """Groups rejected so far in this step."""
    rejected_samples: int = 0
    """Episodes of the groups rejected so far in this step."""
    verdicts: list[GroupVerdict] = field(default_factory=list)
    """Every verdict of this step, in order (a pair counts as two)."""

    @property
    def forcing(self) -> bool:
        """True once zero-variance groups are being accepted anyway."""
        return self.forces and (
            self.rejected_groups >= self.force_after_groups or self.rejected_samples >= self.force_after_samples
        )

    def _record(self, verdict: GroupVerdict, samples: int) -> GroupVerdict:
        self.verdicts.append(verdict)
        if not verdict.accepted:
            self.rejected_groups += 1
            self.rejected_samples += samples
        return verdict

    def judge(
        self,
        episodes: Sequence[EpisodeEvidence],
        *,
        slate: Sequence[tuple[str, str]] | None,
        gold_name: str | None = None,
        selector_varies: bool = False,
    ) -> GroupVerdict:
        """Judge one group and count it. `selector_varies`: some attributed read of the group has a nonzero
        selector advantage (only read under selector_on_zero_variance)."""
        verdict = validate_group(
            episodes,
            group_size=self.group_size,
            slate=slate,
            gold_name=gold_name,
            check_spans=self.check_spans,
            waive_zero_variance=self.forcing,
        )
        if (verdict.reason is RejectReason.ZERO_VARIANCE and self.selector_on_zero_variance and selector_varies):
            verdict = _SELECTOR_ONLY
        return self._record(verdict, len(episodes))

    def judge_pair(
        self,
        no_skill: Sequence[EpisodeEvidence],
        with_slate: Sequence[EpisodeEvidence],
        *,
        slate: Sequence[tuple[str, str]],
        gold_name: str | None = None,
    ) -> GroupVerdict:
        """hybrid_slate: one verdict for a task's no-skill group and slate group together.

        Each group must pass the fail-closed rules on its own (size, slate, aborted, spans, rewards);
        if either breaks one, both are rejected, with a detail saying which group broke it. Zero
        variance is judged over the pair as one unit (all 2G raw scores): the pair carries signal
        when its scores differ anywhere, e.g. a slate group that varies beside a no-skill group that
        always fails, which is the common case on skill-critical tasks and exactly what the regret
        shift compares.
        """
        plain = validate_group(no_skill, group_size=self.group_size, slate=None, check_spans=False,
                               waive_zero_variance=True)
        slated = validate_group(with_slate, group_size=self.group_size, slate=slate, gold_name=gold_name,
                                check_spans=self.check_spans, waive_zero_variance=True)
        verdict = _ACCEPT
        for which, single in (("no-skill group", plain), ("slate group", slated)):
            if not single.accepted:
                assert single.reason is not None
                verdict = _reject(single.reason, f"{which}: {single.detail}")
                break
        else:
            unit = dynamic_filter([*no_skill, *with_slate])
            if unit.reason is RejectReason.ZERO_VARIANCE:
                verdict = _FORCED if self.forcing else _reject(RejectReason.ZERO_VARIANCE, f"pair: {unit.detail}")
        self._record(verdict, len(no_skill))
        return self._record(verdict, len(with_slate))

    def counts(self) -> dict[str, int]:
        """Rejections per reason (every reason present), plus accepted, forced and selector-only group counts."""
        out = count_rejections(self.verdicts)
        out["accepted"] = sum(v.accepted for v in self.verdicts)
        out["forced"] = sum(v.forced for v in self.verdicts)
        out["selector_only"] = sum(v.selector_only for v in self.verdicts)
        return out


def count_rejections(verdicts: Iterable[GroupVerdict]) -> dict[str, int]:
    """{reason value: number of groups rejected for it}, every reason present (0 if none)."""
    counts = {reason.value: 0 for reason in RejectReason}
    for verdict in verdicts:
        if verdict.reason is not None:
            counts[verdict.reason.value] += 1
    return counts

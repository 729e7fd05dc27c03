"""Fail-closed group validation and the dynamic filter (METHOD.md 4 last paragraph, 5, 11 vector 6).

A group either earns credit whole or not at all: one bad episode (aborted, unscored, a span
counter above zero, a credit computation that failed) or a malformed group (wrong size, a slate
that is not 16 unique names with exactly one oracle and 5/5/5) rejects every episode of it, and
the trainer resamples the prompt. Every rejection carries a `RejectReason` (counted in metrics)
and a detail naming the episode and value that caused it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from skillgate_core.skills.slate_shape import slate_shape_problem

__all__ = [
    "EpisodeEvidence",
    "GroupVerdict",
    "RejectReason",
    "count_rejections",
    "dynamic_filter",
    "validate_group",
]

ZERO_VARIANCE_TOLERANCE = 1e-12
"""A group is informative only if max(score) - min(score) exceeds this."""


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
    """Turns whose parsed calls differ from what the environment dispatched (METHOD.md 4.1)."""
    span_mismatch: int = 0
    """Skill paths or identity spans that could not be located (METHOD.md 4.3, 4.5)."""
    alignment_mismatch: int = 0
    """Turns whose decoded ids do not reproduce the response text (METHOD.md 4.5)."""
    credit_ok: bool = True
    """False when computing this episode's credit (spans, actions, weights) raised."""


@dataclass(frozen=True)
class GroupVerdict:
    """Accept or reject one group; a rejection always says why."""

    accepted: bool
    """True iff the group earns credit."""
    reason: RejectReason | None = None
    """The first rule the group broke (None when accepted)."""
    detail: str = ""
    """Human-readable evidence: which episode, which counter, which value."""

    def __post_init__(self) -> None:
        if self.accepted != (self.reason is None):
            raise ValueError("an accepted verdict has no reason; a rejected one must have one")


_ACCEPT = GroupVerdict(accepted=True)


def _reject(reason: RejectReason, detail: str) -> GroupVerdict:
    return GroupVerdict(accepted=False, reason=reason, detail=detail)


def _has_reward(score: float | None) -> bool:
    return score is not None and math.isfinite(float(score))


def _unscored_or_uncredited(episodes: Sequence[EpisodeEvidence]) -> GroupVerdict | None:
    for i, ep in enumerate(episodes):
        if not _has_reward(ep.score):
            return _reject(RejectReason.MISSING_REWARD, f"episode {i} has no reward (score={ep.score!r})")
    for i, ep in enumerate(episodes):
        if not ep.credit_ok:
            return _reject(RejectReason.CREDIT_FAILED, f"episode {i}: credit computation failed")
    return None


def dynamic_filter(episodes: Sequence[EpisodeEvidence]) -> GroupVerdict:
    """Keep a group iff every episode has a reward, crediting succeeded, and the scores vary.

    "Vary" means max - min > 1e-12: a group whose scores are all equal carries no task signal,
    whatever its reads (METHOD.md 11 vector 6).
    """
    broken = _unscored_or_uncredited(episodes)
    if broken is not None:
        return broken
    scores = [float(ep.score) for ep in episodes]  # type: ignore[arg-type]
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
    apply_dynamic_filter: bool,
) -> GroupVerdict:
    """Judge one group; the first broken rule is the reason.

    Order: group size, slate shape (skipped only when `slate` is None, i.e. a no-skill group),
    aborted episodes, span counters (when the profile uses reads: `check_spans`), missing
    rewards and failed credit, then the dynamic filter's zero-variance rule
    (`apply_dynamic_filter`, the selector profiles).
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
    if apply_dynamic_filter:
        return dynamic_filter(episodes)
    # Without the filter a zero-variance group is kept (its task advantages are simply zero), but an
    # unscored episode or failed credit still rejects it: fail closed.
    return _unscored_or_uncredited(episodes) or _ACCEPT


def count_rejections(verdicts: Iterable[GroupVerdict]) -> dict[str, int]:
    """{reason value: number of groups rejected for it}, every reason present (0 if none)."""
    counts = {reason.value: 0 for reason in RejectReason}
    for verdict in verdicts:
        if verdict.reason is not None:
            counts[verdict.reason.value] += 1
    return counts

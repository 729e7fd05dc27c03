"""Fail-closed group validation: every rejection has a reason and a detail (METHOD.md 4, 5)."""

from __future__ import annotations

import math

import pytest

from skillgate_core.credit import (
    EpisodeEvidence,
    GroupVerdict,
    RejectReason,
    count_rejections,
    dynamic_filter,
    validate_group,
)
from skillgate_core.skills import slate_shape_problem

SLATE = (
    [("gold", "oracle")]
    + [(f"mis{i}", "misleading") for i in range(5)]
    + [(f"rel{i}", "relevant") for i in range(5)]
    + [(f"irr{i}", "irrelevant") for i in range(5)]
)
SCORES = [1, 0, 1, 0, 1, 0, 1, 0]


def good_group() -> list[EpisodeEvidence]:
    return [EpisodeEvidence(score=s) for s in SCORES]


def judge(episodes, slate=SLATE, **kwargs) -> GroupVerdict:
    options = {"group_size": 8, "gold_name": "gold", "check_spans": True, "apply_dynamic_filter": True}
    options.update(kwargs)
    return validate_group(episodes, slate=slate, **options)


def with_episode(index: int, **changes) -> list[EpisodeEvidence]:
    episodes = good_group()
    episodes[index] = EpisodeEvidence(**{"score": SCORES[index], **changes})
    return episodes


def test_a_good_group_is_accepted():
    verdict = judge(good_group())
    assert verdict.accepted and verdict.reason is None


@pytest.mark.parametrize(
    ("episodes", "slate", "reason", "detail"),
    [
        (good_group()[:7], SLATE, RejectReason.GROUP_SIZE, "7 episodes"),
        (good_group(), SLATE[:15], RejectReason.SLATE_MALFORMED, "15 skills"),
        (good_group(), SLATE[:15] + [("mis0", "irrelevant")], RejectReason.SLATE_MALFORMED, "repeats"),
        (
            good_group(),
            [("x", "oracle")] + SLATE[1:15] + [("y", "oracle")],
            RejectReason.SLATE_MALFORMED,
            "categories",
        ),
        (good_group(), [("other", "oracle")] + SLATE[1:], RejectReason.SLATE_MALFORMED, "gold"),
        (with_episode(3, aborted=True), SLATE, RejectReason.EPISODE_ABORTED, "episode 3"),
        (
            with_episode(2, parse_dispatch_mismatch=1),
            SLATE,
            RejectReason.PARSE_DISPATCH_MISMATCH,
            "episode 2",
        ),
        (with_episode(5, span_mismatch=2), SLATE, RejectReason.SPAN_MISMATCH, "span_mismatch=2"),
        (with_episode(7, alignment_mismatch=1), SLATE, RejectReason.ALIGNMENT_MISMATCH, "episode 7"),
        (with_episode(1, score=None), SLATE, RejectReason.MISSING_REWARD, "episode 1"),
        (with_episode(1, score=math.nan), SLATE, RejectReason.MISSING_REWARD, "episode 1"),
        (with_episode(4, credit_ok=False), SLATE, RejectReason.CREDIT_FAILED, "episode 4"),
        ([EpisodeEvidence(score=0.5)] * 8, SLATE, RejectReason.ZERO_VARIANCE, "all scores equal"),
    ],
)
def test_every_rejection_names_its_reason(episodes, slate, reason, detail):
    verdict = judge(episodes, slate)
    assert not verdict.accepted
    assert verdict.reason is reason
    assert detail in verdict.detail


def test_no_skill_groups_skip_the_slate_and_plain_profiles_keep_zero_variance():
    flat = [EpisodeEvidence(score=0.0)] * 8
    assert judge(flat, slate=None, apply_dynamic_filter=False).accepted
    assert judge(flat, slate=None).reason is RejectReason.ZERO_VARIANCE
    # without the filter a missing reward still rejects: fail closed
    assert (
        judge(with_episode(0, score=None), apply_dynamic_filter=False).reason is RejectReason.MISSING_REWARD
    )


def test_span_counters_only_checked_when_the_profile_uses_reads():
    episodes = with_episode(0, span_mismatch=1)
    assert judge(episodes, check_spans=False).accepted
    assert judge(episodes).reason is RejectReason.SPAN_MISMATCH


def test_dynamic_filter_tolerance():
    assert dynamic_filter([EpisodeEvidence(score=0.5), EpisodeEvidence(score=0.5 + 1e-13)]).reason is (
        RejectReason.ZERO_VARIANCE
    )
    assert dynamic_filter([EpisodeEvidence(score=0.5), EpisodeEvidence(score=0.5 + 1e-9)]).accepted


def test_slate_problem_accepts_well_formed_slate():
    assert slate_shape_problem(SLATE, "gold") is None
    assert slate_shape_problem(SLATE) is None


def test_count_rejections_has_every_reason():
    verdicts = [judge(good_group()), judge(good_group()[:3]), judge([EpisodeEvidence(score=1)] * 8)]
    counts = count_rejections(verdicts)
    assert set(counts) == {r.value for r in RejectReason}
    assert counts["group_size"] == 1 and counts["zero_variance"] == 1 and sum(counts.values()) == 2


def test_verdict_consistency_is_enforced():
    with pytest.raises(ValueError):
        GroupVerdict(accepted=False)
    with pytest.raises(ValueError):
        GroupVerdict(accepted=True, reason=RejectReason.GROUP_SIZE)

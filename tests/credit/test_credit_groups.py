"""Fail-closed group validation: every rejection has a reason and a detail (docs/method.md 4, 5)."""

from __future__ import annotations

import math

import pytest

from skillgate_core.credit import (
    EpisodeEvidence,
    GroupVerdict,
    RejectReason,
    RolloutStepFilter,
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
    options = {"group_size": 8, "gold_name": "gold", "check_spans": True}
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


def test_every_profile_filters_zero_variance_and_only_forcing_waives_it():
    flat = [EpisodeEvidence(score=0.0)] * 8
    assert judge(flat, slate=None).reason is RejectReason.ZERO_VARIANCE
    forced = judge(flat, slate=None, waive_zero_variance=True)
    assert forced.accepted and forced.forced
    # forcing never waives a broken group: fail closed
    assert (
        judge(with_episode(0, score=None), waive_zero_variance=True).reason is RejectReason.MISSING_REWARD
    )
    assert judge(with_episode(0, aborted=True), waive_zero_variance=True).reason is RejectReason.EPISODE_ABORTED


def _step(forces: bool, **kw) -> RolloutStepFilter:
    return RolloutStepFilter(group_size=8, check_spans=True, forces=forces, **kw)


def test_plain_profiles_force_acceptance_after_64_rejected_groups():
    flat = [EpisodeEvidence(score=1.0)] * 8
    step = _step(forces=True, force_after_samples=10**9)
    verdicts = [step.judge(flat, slate=SLATE, gold_name="gold") for _ in range(66)]
    assert [v.accepted for v in verdicts] == [False] * 64 + [True, True]
    assert verdicts[64].forced and step.rejected_groups == 64
    counts = step.counts()
    assert counts["zero_variance"] == 64 and counts["forced"] == 2 and counts["accepted"] == 2
    # a broken group is still rejected while forcing
    assert step.judge(with_episode(2, span_mismatch=1), slate=SLATE, gold_name="gold").reason is (
        RejectReason.SPAN_MISMATCH
    )


def test_plain_profiles_force_acceptance_after_300_rejected_samples():
    flat = [EpisodeEvidence(score=0.0)] * 8
    step = _step(forces=True)
    verdicts = [step.judge(flat, slate=None) for _ in range(40)]
    # 38 groups x 8 = 304 samples >= 300 (37 x 8 = 296 is not yet)
    assert [v.accepted for v in verdicts] == [False] * 38 + [True, True]
    assert step.rejected_samples == 304


def test_two_stream_and_behaviour_profiles_never_force():
    flat = [EpisodeEvidence(score=1.0)] * 8
    step = _step(forces=False)
    assert not any(step.judge(flat, slate=SLATE, gold_name="gold").accepted for _ in range(400))
    assert step.counts()["zero_variance"] == 400 and step.counts()["forced"] == 0


def test_hybrid_pairs_are_kept_or_rejected_together():
    step = _step(forces=False)
    good = good_group()
    flat = [EpisodeEvidence(score=0.0)] * 8
    assert step.judge_pair(good, good, slate=SLATE, gold_name="gold").accepted
    # zero variance is judged over the pair: a no-skill group that always fails beside a varying
    # slate group is informative (that is what the regret shift compares)...
    assert step.judge_pair(flat, good, slate=SLATE, gold_name="gold").accepted
    # ...a pair whose 16 scores are all equal is not
    v = step.judge_pair(flat, flat, slate=SLATE, gold_name="gold")
    assert v.reason is RejectReason.ZERO_VARIANCE and v.detail.startswith("pair")
    # a broken group takes its partner down with it
    v = step.judge_pair(good, with_episode(3, span_mismatch=1), slate=SLATE, gold_name="gold")
    assert v.reason is RejectReason.SPAN_MISMATCH and v.detail.startswith("slate group")
    v = step.judge_pair(with_episode(2, score=None), good, slate=SLATE, gold_name="gold")
    assert v.reason is RejectReason.MISSING_REWARD and v.detail.startswith("no-skill group")
    # the no-skill group is never span-checked (it has no slate), the slate group always is
    assert step.judge_pair(with_episode(1, span_mismatch=1), good, slate=SLATE, gold_name="gold").accepted
    counts = step.counts()
    assert counts["accepted"] == 6 and counts["zero_variance"] == 2 and counts["span_mismatch"] == 2
    assert counts["missing_reward"] == 2
    assert step.rejected_groups == 6 and step.rejected_samples == 48


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

"""Behaviour terms of the mixed_separated and hybrid_slate ablations (docs/method.md 7), hand-computed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillgate_core.credit import (
    CATEGORIES,
    episode_label,
    hybrid_regret_shift,
    hybrid_slate_advantages,
    hybrid_strata_term,
    mixed_separated_advantages,
    mixed_separated_term,
    task_advantages,
)

O, M, R, I, U = "oracle", "misleading", "relevant", "irrelevant", "unadvertised"  # noqa: E741  (docs/method.md 11 notation)


@pytest.mark.parametrize(
    ("reads", "label"),
    [
        ([], "no_read"),
        ([R, I], "other"),
        ([U], "other"),
        ([R, O], "oracle"),
        ([O, M], "misleading"),
        ([M, O], "misleading"),
    ],
)
def test_episode_label_priority(reads, label):
    assert episode_label(reads) == label


def test_mixed_separated_hand_computed():
    reads = [[O], [M], [], [O, M], [R], [O], [M], []]
    scores = [1, 1, 1, 0, 0, 0, 0, 1]
    # successes (0,1,2,7): u = 1,-1,-.25,-.25, mean -.125, max|dev| 1.125 -> scale min(.3, .356) = .3
    # failures (3,4,5,6): u = -1,-.25,1,-1, mean -.3125, max|dev| 1.3125 -> scale min(.3, .305) = .3
    expected = [0.3375, -0.2625, -0.0375, -0.20625, 0.01875, 0.39375, -0.20625, -0.0375]
    # gap = 2 * 0.935413, budget 0.935: no shrink
    assert mixed_separated_term(reads, scores) == pytest.approx(expected)
    total = mixed_separated_advantages(reads, scores)
    assert total == pytest.approx([a + t for a, t in zip(task_advantages(scores), expected, strict=True)])


def test_mixed_separated_scale_uses_span_when_deviation_is_large():
    # one stratum only (all fail): u = 1, -1 -> dev +-1, scale = min(.3, .4) = .3
    assert mixed_separated_term([[O], [M]], [0, 0]) == pytest.approx([0.3, -0.3])
    # uniform stratum: nothing to centre
    assert mixed_separated_term([[O], [O], [M]], [0, 0, 1]) == [0.0, 0.0, 0.0]


def _gap(advantages, scores):
    return min(a for a, s in zip(advantages, scores, strict=True) if s >= 1) - max(
        a for a, s in zip(advantages, scores, strict=True) if s < 1
    )


def test_mixed_separated_shrinks_only_harm_beyond_half_the_gap():
    reads = [[O], [M], [O], [], [M], [O], [], [R]]
    scores = [1, 0.98, 0, 0, 1, 0, 0.98, 0]
    advantages = task_advantages(scores)
    gap = _gap(advantages, scores)
    unshrunk = mixed_separated_term(reads, scores, gap_share=1e9)
    harm = max(t for t, x in zip(unshrunk, scores, strict=True) if x < 1) - min(
        t for t, x in zip(unshrunk, scores, strict=True) if x >= 1
    )
    assert harm > gap / 2  # the shrink binds in this group
    term = mixed_separated_term(reads, scores)
    factor = (gap / 2) / harm
    assert term == pytest.approx([u * factor for u in unshrunk])
    # at least half of the task gap survives the behaviour term
    assert _gap([a + t for a, t in zip(advantages, term, strict=True)], scores) >= gap / 2 - 1e-12


def test_mixed_separated_leaves_a_term_with_little_harm_alone():
    # One success reads the oracle and one failure a misleading skill, the rest read nothing: the
    # term is large (0.328) but barely closes the gap (harm 0.075 < gap/2 = 0.218), so it is kept
    # whole; a magnitude-based shrink would have cut it.
    reads = [[O]] + [[]] * 7 + [[M]] + [[]] * 7
    scores = [1] * 8 + [0.8] * 3 + [0] * 5
    gap = _gap(task_advantages(scores), scores)
    unshrunk = mixed_separated_term(reads, scores, gap_share=1e9)
    harm = max(unshrunk[8:]) - min(unshrunk[:8])
    assert harm == pytest.approx(0.075) and harm < gap / 2 < max(abs(t) for t in unshrunk)
    assert mixed_separated_term(reads, scores) == unshrunk


@settings(max_examples=60, deadline=None)
@given(
    group=st.lists(
        st.tuples(
            st.lists(st.sampled_from(CATEGORIES), max_size=3), st.sampled_from([0.0, 0.25, 0.5, 0.9, 1.0])
        ),
        min_size=2,
        max_size=8,
    )
)
def test_mixed_separated_never_ranks_a_failure_above_a_success(group):
    reads = [r for r, _ in group]
    scores = [s for _, s in group]
    total = mixed_separated_advantages(reads, scores)
    successes = [a for a, s in zip(total, scores, strict=True) if s >= 1]
    failures = [a for a, s in zip(total, scores, strict=True) if s < 1]
    if successes and failures:
        assert min(successes) >= max(failures) - 1e-9


def test_hybrid_regret_shift_is_clipped():
    assert hybrid_regret_shift([1, 0, 1, 0], [0, 0, 0, 1]) == pytest.approx(0.5 * 0.25)
    assert hybrid_regret_shift([3.0], [0.0]) == 0.5
    assert hybrid_regret_shift([0.0], [5.0]) == -0.5


def test_hybrid_slate_hand_computed():
    reads = [[O], [O], [M], [M], [], [], [R], [O]]
    slate_scores = [1, 1, 0, 0, 1, 0, 0, 1]
    no_skill_scores = [0, 0, 1, 0, 0, 0, 0, 0]
    # Pool E = every episode but the "other" one (index 6): mu_E = 4/7.
    # shrunk - mu_E: oracle (3 + 4/7)/4 - 4/7 = 9/28, misleading (4/7)/3 - 4/7 = -8/21,
    # no_read (1 + 4/7)/3 - 4/7 = -1/21; count-weighted mean over E = (27/28 - 16/21 - 2/21)/7 = 3/196
    centre = 3 / 196
    oracle, mis, none = 9 / 28 - centre, -8 / 21 - centre, -1 / 21 - centre
    strata = [oracle, oracle, mis, mis, none, none, 0.0, oracle]
    assert hybrid_strata_term(reads, slate_scores) == pytest.approx(strata)
    shift = 0.5 * (0.5 - 0.125)
    slate, no_skill = hybrid_slate_advantages(reads, slate_scores, no_skill_scores)
    assert slate == pytest.approx(
        [a + shift + s for a, s in zip(task_advantages(slate_scores), strata, strict=True)]
    )
    assert no_skill == pytest.approx(task_advantages(no_skill_scores))


def test_hybrid_other_episodes_do_not_move_the_term():
    # Changing the score of an "other" episode changes nothing for the pool.
    reads = [[O], [M], [], [R], [I]]
    a = hybrid_strata_term(reads, [1, 0, 0, 1, 1])
    b = hybrid_strata_term(reads, [1, 0, 0, 0, 0])
    assert a == b and a[3:] == [0.0, 0.0]


def test_hybrid_strata_scaled_to_half_and_gated_on_two_read_strata():
    reads = [[O]] * 4 + [[M]] * 4
    # deltas +-1.6 before scaling (scores above 1 make the cap bind)
    assert hybrid_strata_term(reads, [4, 4, 4, 4, 0, 0, 0, 0]) == pytest.approx([0.5] * 4 + [-0.5] * 4)
    # only oracle and "other" strata: fewer than two of oracle / misleading / no_read -> no term
    assert hybrid_strata_term([[O], [O], [R], [I]], [1, 1, 0, 0]) == [0.0] * 4
    # oracle + no_read is enough
    assert any(hybrid_strata_term([[O], [O], [], []], [1, 1, 0, 0]))


@settings(max_examples=60, deadline=None)
@given(
    group=st.lists(
        st.tuples(st.lists(st.sampled_from(CATEGORIES), max_size=3), st.floats(0, 1)), min_size=1, max_size=8
    )
)
def test_hybrid_strata_term_is_centred_and_bounded(group):
    term = hybrid_strata_term([r for r, _ in group], [s for _, s in group])
    assert abs(sum(term)) < 1e-9
    assert max(abs(t) for t in term) <= 0.5 + 1e-12

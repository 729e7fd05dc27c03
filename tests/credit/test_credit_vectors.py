"""docs/method.md 11: every test vector (1-12), to 1e-6."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from skillgate_core.credit import (
    EpisodeEvidence,
    RejectReason,
    hybrid_strata_term,
    mixed_separated_term,
    selector_advantages,
    task_advantages,
    token_weights,
    validate_group,
)
from skillgate_core.evaluation.metrics import pass_at_k
from skillgate_core.rl.loss import clipped_policy_term, low_variance_kl

O, M, R, I, U = "oracle", "misleading", "relevant", "irrelevant", "unadvertised"  # noqa: E741  (docs/method.md 11 notation)
TOL = 1e-6


def flat(nested):
    return [x for row in nested for x in row]


def approx(values, expected):
    assert len(values) == len(expected)
    for v, e in zip(values, expected, strict=True):
        assert v == pytest.approx(e, abs=TOL), (values, expected)


VECTOR1_READS = [[O], [M], [], [O, M], [O, O], [R], [I], [O]]
VECTOR1_SCORES = [1, 0, 1, 0, 1, 0, 1, 0]


def test_vector1_task_and_selector_advantages():
    approx(task_advantages(VECTOR1_SCORES), [0.935413, -0.935413] * 4)

    clean = selector_advantages(VECTOR1_READS, "clean_oracle")
    assert len(flat(clean)) == 9
    good, bad = 1 - 2 / 9, -2 / 9
    assert good == pytest.approx(0.777778, abs=TOL) and bad == pytest.approx(-0.222222, abs=TOL)
    approx(flat(clean), [good, bad, bad, bad, bad, bad, bad, bad, good])
    approx(clean[0] + clean[7], [0.777778, 0.777778])

    first = selector_advantages(VECTOR1_READS, "first_oracle")
    up, down = 0.555556, -0.444444
    #        [O]   [M]    [] [O,   M]     [O,  O]     [R]   [I]   [O]
    approx(flat(first), [up, down, up, down, up, down, down, down, up])


@pytest.mark.parametrize("utility", ["clean_oracle", "first_oracle"])
def test_vector1_token_weights_both_streams_carry_B(layout, utility):
    masks, actions = layout(VECTOR1_READS, masked_tokens=16)
    weights = token_weights(masks, actions, selector_advantages(VECTOR1_READS, utility))
    assert weights.total_mask == 128
    assert sum(w.sum() for w in weights.w_task) == pytest.approx(128, abs=1e-9)
    assert sum(w.sum() for w in weights.w_sel) == pytest.approx(128, abs=1e-9)
    assert weights.credited_actions == 9
    assert weights.task_tokens == 128 - 2 * 9
    # every identity token carries B / K = 128 / 9; call tokens carry no task weight
    for episode_actions, w_task, w_sel in zip(actions, weights.w_task, weights.w_sel, strict=True):
        for action in episode_actions:
            assert all(w_task[i] == 0 for i in action.call_token_indices)
            assert all(w_sel[i] == pytest.approx(128 / 9) for i in action.identity_token_indices)


def test_vector2():
    scores = [1, 0, 1, 0, 0, 1, 0, 0]
    reads = [[O], [O], [M], [M], [], [R, O], [O, O], [I]]
    s, f = 1.207612, -0.724567
    approx(task_advantages(scores), [s, f, s, f, f, s, f, f])

    clean = selector_advantages(reads, "clean_oracle")
    good, bad = 0.777778, -0.222222
    approx(flat(clean), [good, good, bad, bad, bad, bad, bad, bad, bad])

    first = selector_advantages(reads, "first_oracle")
    up, down = 0.555556, -0.444444
    #        [O] [O]  [M]   [M]   [] [R,    O] [O,  O]     [I]
    approx(flat(first), [up, up, down, down, down, up, up, down, down])


def test_vector3_clean_inert_but_read_calls_leave_task_stream(layout):
    reads = [[M], [M, O], [R], [], [O, I], [M], [], [I]]
    clean = selector_advantages(reads, "clean_oracle")
    assert flat(clean) == [0.0] * 8

    masks, actions = layout(reads)
    weights = token_weights(masks, actions, clean)
    assert weights.credited_actions == 0
    assert sum(w.sum() for w in weights.w_sel) == 0.0
    assert sum(w.sum() for w in weights.w_task) == pytest.approx(128)
    assert weights.task_tokens == 128 - 2 * 8
    for episode_actions, w_task in zip(actions, weights.w_task, strict=True):
        for action in episode_actions:
            assert all(w_task[i] == 0 for i in action.call_token_indices)

    first = selector_advantages(reads, "first_oracle")
    #        [M]    [M,    O]   [R]    [] [O,   I]     [M]    [] [I]
    approx(flat(first), [-0.25, -0.25, 0.75, -0.25, 0.75, -0.25, -0.25, -0.25])


@pytest.mark.parametrize("utility", ["clean_oracle", "first_oracle"])
def test_vector4_all_clean_is_inert(utility):
    reads = [[O], [O], [O], [], [], [O], [O], []]
    assert flat(selector_advantages(reads, utility)) == [0.0] * 5


def test_vector5():
    scores = [1, 0.5, 0, 0.25, 1, 0, 0.5, 1]
    reads = [[O], [M], [O], [U], [O, O], [], [R], [O]]
    approx(
        task_advantages(scores),
        [1.085766, -0.072384, -1.230534, -0.651459, 1.085766, -1.230534, -0.072384, 1.085766],
    )
    clean = selector_advantages(reads, "clean_oracle")
    assert len(flat(clean)) == 8
    g, b = 0.625, -0.375
    #        [O] [M] [O] [U] [O, O] [] [R] [O]
    approx(flat(clean), [g, b, g, b, b, b, b, g])


@pytest.mark.parametrize(
    "reads",
    [
        [[O], [M], [], [O, M], [O, O], [R], [I], [O]],
        [[]] * 8,
        [[O]] * 8,
    ],
)
@pytest.mark.parametrize("score", [0.0, 0.5, 1.0])
def test_vector6_equal_scores_reject_the_group(reads, score):
    del reads  # whatever the reads: the verdict looks at scores only
    episodes = [EpisodeEvidence(score=score) for _ in range(8)]
    verdict = validate_group(episodes, group_size=8, slate=None, check_spans=True)
    assert not verdict.accepted
    assert verdict.reason is RejectReason.ZERO_VARIANCE


@pytest.mark.parametrize("advantage", [1.0, 2.5])
def test_vector7_clip(advantage):
    def term(rho: float, a: float) -> tuple[float, float]:
        logp = torch.tensor(math.log(rho), dtype=torch.float64, requires_grad=True)
        value = clipped_policy_term(
            logp, torch.tensor(0.0, dtype=torch.float64), torch.tensor(a, dtype=torch.float64)
        )
        (grad,) = torch.autograd.grad(value, logp)
        return value.item(), grad.item()

    a = advantage
    value, grad = term(1.35, a)  # A > 0, rho above 1 + 0.28: clipped, no gradient
    assert value == pytest.approx(-1.28 * a) and grad == 0.0
    value, grad = term(0.7, a)  # A > 0, rho below 1: unclipped branch, gradient flows
    assert value == pytest.approx(-0.7 * a) and grad == pytest.approx(-0.7 * a)
    value, grad = term(0.7, -a)  # A < 0, rho below 1 - 0.2: clipped, no gradient
    assert value == pytest.approx(0.8 * a) and grad == 0.0
    value, grad = term(1.35, -a)  # A < 0, rho above 1: unclipped, gradient flows
    assert value == pytest.approx(1.35 * a) and grad == pytest.approx(1.35 * a)


def test_vector8_kl():
    kl = low_variance_kl(torch.tensor(-1.0, dtype=torch.float64), torch.tensor(-1.2, dtype=torch.float64))
    assert kl.item() == pytest.approx(0.0187308, abs=1e-7)
    assert kl.item() == pytest.approx(math.exp(-0.2) - 1 + 0.2, abs=1e-15)


def test_vector9_pass_at_k_counts_errors_as_unresolved():
    outcomes = ["resolved", "fail", "error", "fail"]
    n, c = len(outcomes), outcomes.count("resolved")
    assert pass_at_k(n, c, 1) == pytest.approx(1 / 4)  # trial success
    assert pass_at_k(n, c, 4) == 1.0
    assert np.isclose(sum(o == "resolved" for o in outcomes) / n, 0.25)


def test_vector10_mixed_separated_harm_shrink():
    reads, scores = [[O], [M], [M], [O]], [1, 1, 0, 0.5]
    approx(task_advantages(scores), [0.783348, 0.783348, -1.30558, -0.261116])
    term = mixed_separated_term(reads, scores)
    approx(term, [0.261116, -0.261116, -0.261116, 0.261116])
    total = [a + t for a, t in zip(task_advantages(scores), term, strict=True)]
    # exactly half of the gap 1.044464 survives: worst success - best failure
    assert min(total[:2]) - max(total[2:]) == pytest.approx(1.044464 / 2, abs=TOL)


def test_vector11_mixed_separated_term():
    reads = [[O], [M], [], [], [M], [O], [], []]
    scores = [1, 1, 0.95, 0.95, 0, 0, 0, 0]
    approx(
        mixed_separated_term(reads, scores),
        [0.022125, -0.022125, -0.001844, -0.001844, -0.018438, 0.025813, -0.001844, -0.001844],
    )


def test_vector12_hybrid_strata_term_leaves_other_episodes_out():
    reads = [[O], [O], [M], [M], [], [R], [I], [R]]
    scores = [1, 1, 0, 0, 0, 1, 1, 1]
    approx(hybrid_strata_term(reads, scores), [0.386667, 0.386667, -0.28, -0.28, -0.213333, 0, 0, 0])

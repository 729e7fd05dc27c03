"""Token weights: layouts, shared call spans, and every error rule of docs/method.md 6."""

from __future__ import annotations

import numpy as np
import pytest

from skillgate_core.credit import (
    SelectionAction,
    TokenWeightError,
    per_token_advantages,
    selector_advantages,
    token_weights,
)

O, M = "oracle", "misleading"  # noqa: E741  (docs/method.md 11 notation)


def action(call, identity, category=O, path_index=0) -> SelectionAction:
    return SelectionAction(
        turn_index=0,
        call_index=0,
        path_index=path_index,
        tool_name="exec",
        skill_name=category,
        category=category,
        call_token_indices=tuple(call),
        identity_token_indices=tuple(identity),
    )


def test_two_skills_in_one_exec_share_the_call_span():
    # episode 0: one exec naming oracle then misleading over call tokens 1..6; episode 1: no reads
    masks = [[0, 1, 1, 1, 1, 1, 1, 1, 1], [0, 1, 1, 1]]
    actions = [[action(range(1, 7), [2, 3], O, 0), action(range(1, 7), [5], M, 1)], []]
    sel = [[0.5, -0.5], []]
    w = token_weights(masks, actions, sel)
    b, t = 11.0, 5.0
    assert (w.total_mask, w.task_tokens, w.credited_actions) == (b, t, 2)
    np.testing.assert_allclose(w.w_task[0], [0, 0, 0, 0, 0, 0, 0, b / t, b / t])
    np.testing.assert_allclose(w.w_task[1], [0, b / t, b / t, b / t])
    # each credited action gets B/K spread over its own identity tokens
    np.testing.assert_allclose(w.w_sel[0], [0, 0, b / 4, b / 4, 0, b / 2, 0, 0, 0])
    a_task, a_sel = per_token_advantages([9, 4], [1.5, -1.5], actions, sel)
    np.testing.assert_allclose(a_task[0], [1.5] * 9)
    np.testing.assert_allclose(a_sel[0], [0, 0, 0.5, 0.5, 0, -0.5, 0, 0, 0])
    np.testing.assert_allclose(a_sel[1], [0] * 4)


def test_zero_advantage_actions_get_no_selector_weight_but_still_leave_the_task_stream():
    masks = [[1] * 6, [1] * 6]
    actions = [[action([0, 1], [1])], [action([2, 3], [3], M)]]
    w = token_weights(masks, actions, [[1.0], [0.0]])
    assert w.credited_actions == 1
    assert w.w_sel[0][1] == 12.0 and w.w_sel[1].sum() == 0
    assert w.w_task[1][2] == 0 and w.w_task[1][3] == 0


@pytest.mark.parametrize(
    ("masks", "actions", "sel", "rule"),
    [
        ([[0, 0, 0]], [[]], [[]], "B <= 0"),
        ([[1, 1]], [[action([0, 1], [1])]], [[0.0]], "T <= 0"),
        ([[1, 0, 1]], [[action([0, 1], [0])]], [[1.0]], "index outside the mask"),
        ([[1, 1, 1]], [[action([2, 3], [3])]], [[1.0]], "index outside the mask"),
        (
            [[1] * 5],
            [[action([0, 1], [1]), action([0, 1, 2], [1, 2])]],
            [[1.0, 0.0]],
            "identity token written twice",
        ),
        ([[1] * 5], [[action([0, 1], [1])]], [[1.0, 0.0]], "1 actions but 2"),
        ([[1] * 5], [[]], [[], []], "chunk shape"),
        ([[1, 2, 1]], [[]], [[]], "only 0 and 1"),
        ([[1] * 5], [[action([0, 1], [1])]], [[float("nan")]], "non-finite"),
    ],
)
def test_every_rule_violation_raises_naming_the_rule(masks, actions, sel, rule):
    with pytest.raises(TokenWeightError, match=rule):
        token_weights(masks, actions, sel)


def test_selection_action_rejects_bad_spans():
    with pytest.raises(ValueError, match="subset"):
        action([0, 1], [2])
    with pytest.raises(ValueError, match="non-empty"):
        action([0, 1], [])
    with pytest.raises(ValueError, match="category"):
        action([0], [0], "gold")


def test_selection_action_record_round_trip():
    a = action([3, 4, 5], [4], M, 1)
    assert SelectionAction.from_record(a.as_record()) == a


def test_token_weights_accept_selector_advantages_directly():
    reads = [[O], [M]]
    masks = [[1] * 4, [1] * 4]
    actions = [[action([0, 1], [1])], [action([0, 1], [1], M)]]
    w = token_weights(masks, actions, selector_advantages(reads, "clean_oracle"))
    assert w.credited_actions == 2
    assert w.w_sel[0][1] == w.w_sel[1][1] == 4.0

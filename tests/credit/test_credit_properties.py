"""Property tests (hypothesis) of the credit streams: zero-sum selector advantages, stream masses,
disjoint streams, and lambda = 0 leaving the task stream alone."""

from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from skillgate_core.credit import (
    CATEGORIES,
    SelectionAction,
    per_token_advantages,
    selector_advantages,
    task_advantages,
    token_weights,
)
from skillgate_core.rl.loss import global_token_normaliser, selector_grpo_loss

FAST = settings(max_examples=60, deadline=None)

reads_strategy = st.lists(st.lists(st.sampled_from(CATEGORIES), max_size=4), min_size=1, max_size=10)


@FAST
@given(reads=reads_strategy, utility=st.sampled_from(["clean_oracle", "first_oracle"]))
def test_selector_advantages_sum_to_zero_over_actions(reads, utility):
    advantages = selector_advantages(reads, utility)
    assert [len(a) for a in advantages] == [len(r) for r in reads]
    assert abs(math.fsum(a for row in advantages for a in row)) < 1e-9


@FAST
@given(scores=st.lists(st.floats(0, 1), min_size=2, max_size=16))
def test_task_advantages_are_centred(scores):
    assert abs(math.fsum(task_advantages(scores))) < 1e-6


@st.composite
def chunks(draw):
    """A chunk of episodes: loss masks with unmasked gaps, and read actions on masked tokens; some
    calls name two skills (two actions sharing one call span)."""
    n_episodes = draw(st.integers(1, 6))
    masks, actions, reads = [], [], []
    for _ in range(n_episodes):
        calls = draw(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 2)), max_size=3))
        mask: list[int] = [0] * draw(st.integers(0, 3))
        episode_actions: list[SelectionAction] = []
        for call_index, (call_len, names) in enumerate(calls):
            call_len = max(call_len, names)
            start = len(mask)
            mask += [1] * call_len
            call = tuple(range(start, start + call_len))
            for path_index in range(names):
                episode_actions.append(
                    SelectionAction(
                        turn_index=0,
                        call_index=call_index,
                        path_index=path_index,
                        tool_name="exec" if names > 1 else "read",
                        skill_name=f"s{path_index}",
                        category=draw(st.sampled_from(CATEGORIES)),
                        call_token_indices=call,
                        identity_token_indices=(call[path_index],),
                    )
                )
            mask += [0] * draw(st.integers(0, 2))  # an observation between turns
        mask += [1] * draw(st.integers(1, 5))  # the final answer: keeps T > 0
        masks.append(mask)
        actions.append(episode_actions)
        reads.append([a.category for a in episode_actions])
    utility = draw(st.sampled_from(["clean_oracle", "first_oracle"]))
    return masks, actions, selector_advantages(reads, utility)


@FAST
@given(chunk=chunks())
def test_each_stream_carries_mass_B_or_zero_and_streams_are_disjoint(chunk):
    masks, actions, sel = chunk
    weights = token_weights(masks, actions, sel)
    b = float(sum(sum(m) for m in masks))
    assert weights.total_mask == b
    assert math.isclose(sum(w.sum() for w in weights.w_task), b, rel_tol=1e-9)
    sel_mass = sum(w.sum() for w in weights.w_sel)
    expected = b if any(a != 0 for row in sel for a in row) else 0.0
    assert math.isclose(sel_mass, expected, rel_tol=1e-9, abs_tol=0.0)
    for w_task, w_sel, mask in zip(weights.w_task, weights.w_sel, masks, strict=True):
        assert not np.any((w_task > 0) & (w_sel > 0))
        assert np.all((w_task == 0) | (np.asarray(mask) == 1))
        assert np.all((w_sel == 0) | (np.asarray(mask) == 1))


@FAST
@given(chunk=chunks(), seed=st.integers(0, 2**31 - 1))
def test_lambda_zero_keeps_task_gradient_and_zeroes_identity_gradient(chunk, seed):
    masks, actions, sel = chunk
    weights = token_weights(masks, actions, sel)
    generator = torch.Generator().manual_seed(seed)
    lengths = [len(m) for m in masks]
    a_task_ep = torch.randn(len(masks), generator=generator, dtype=torch.float64).tolist()
    a_task, a_sel = per_token_advantages(lengths, a_task_ep, actions, sel)
    cat = np.concatenate
    n_tokens = sum(lengths)
    logp0 = -torch.rand(n_tokens, generator=generator, dtype=torch.float64) * 3
    logp_old = logp0 + 0.3 * torch.randn(n_tokens, generator=generator, dtype=torch.float64)
    normaliser = global_token_normaliser(masks)

    def grad(selector_coef: float, w_sel: np.ndarray) -> torch.Tensor:
        logp = logp0.clone().requires_grad_(True)
        out = selector_grpo_loss(
            logp,
            logp_old,
            cat(a_task),
            cat(a_sel),
            cat(weights.w_task),
            w_sel,
            cat(masks),
            normaliser,
            selector_coef=selector_coef,
            beta=0.0,
        )
        (g,) = torch.autograd.grad(out.loss, logp)
        return g

    with_selector_weights = grad(0.0, cat(weights.w_sel))
    task_only = grad(0.0, np.zeros(n_tokens))
    assert torch.equal(with_selector_weights, task_only)
    offsets = np.cumsum([0] + lengths[:-1])
    identity = [
        int(o + i)
        for o, acts in zip(offsets, actions, strict=True)
        for a in acts
        for i in a.identity_token_indices
    ]
    assert torch.all(with_selector_weights[identity] == 0)

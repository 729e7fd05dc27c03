"""Token weights of the two credit streams over one conversion chunk (docs/method.md 6).

A conversion chunk is the set of episodes converted to training samples together (seed: 4 groups
= 32 episodes). With m the loss mask and B = sum m over the chunk:

- task stream: m_task = m with every call token of every attributed action zeroed (whatever the
  action's A_sel), T = sum m_task, w_task = m_task * B / T. Outcome credit never touches a read call.
  (Identity tokens are zeroed too: the method's lie inside the call anyway; the labelled variant
  identity_first_mention puts them on the first mention of the name, which may precede the call.)
- selector stream: K = number of actions with A_sel != 0; each such action spreads B / K evenly
  over its identity (skill-name) tokens. Selector credit touches only those tokens.

So each stream carries mass B (the selector stream 0 when K = 0), and the selector coefficient
lambda alone sets their balance. Any violated rule raises `TokenWeightError` naming the rule;
the caller treats that as failed credit (the group is rejected, docs/method.md 4).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from skillgate_core.credit.actions import SelectionAction

__all__ = ["TokenWeightError", "TokenWeights", "episode_credit_problem", "per_token_advantages", "token_weights"]

_MASS_RTOL = 1e-9


class TokenWeightError(ValueError):
    """The chunk's masks, actions or advantages break a token-weight rule; the message names it."""


@dataclass(frozen=True)
class TokenWeights:
    """Per-episode weight arrays of one chunk, aligned with the episodes' loss masks."""

    w_task: tuple[NDArray[np.float64], ...]
    """Task-stream weight per token: B/T on masked tokens outside every read call, else 0."""
    w_sel: tuple[NDArray[np.float64], ...]
    """Selector-stream weight per token: (B/K)/|I_a| on identity tokens of actions with A_sel != 0."""
    total_mask: float
    """B: loss-masked tokens in the chunk (the mass of each stream)."""
    task_tokens: float
    """T: loss-masked tokens left to the task stream."""
    credited_actions: int
    """K: actions with a nonzero selector advantage."""


def _as_mask(mask: ArrayLike, episode: int) -> NDArray[np.float64]:
    array = np.asarray(mask, dtype=np.float64)
    if array.ndim != 1:
        raise TokenWeightError(f"episode {episode}: loss mask must be 1-D, got shape {array.shape}")
    if not np.all((array == 0.0) | (array == 1.0)):
        raise TokenWeightError(f"episode {episode}: loss mask must hold only 0 and 1")
    return array


def _check_in_mask(mask: NDArray[np.float64], indices: Sequence[int], episode: int, what: str) -> None:
    for i in indices:
        if not 0 <= i < mask.shape[0] or mask[i] != 1.0:
            raise TokenWeightError(
                f"index outside the mask: episode {episode} {what} token {i} "
                f"(length {mask.shape[0]}, masked={bool(0 <= i < mask.shape[0] and mask[i] == 1.0)})"
            )


def episode_credit_problem(mask: ArrayLike, actions: Sequence[SelectionAction]) -> str | None:
    """What would make one episode's credit fail in `token_weights` whatever its chunk, or None: a mask
    that is not 0/1, an action token outside the mask, an empty identity, an identity token written
    twice. The rollout checks it before the filter, so such a group is rejected as credit_failed and
    resampled instead of being dropped after acceptance."""
    try:
        array = _as_mask(mask, 0)
        seen: set[int] = set()
        for action in actions:
            _check_in_mask(array, action.call_token_indices, 0, "call")
            _check_in_mask(array, action.identity_token_indices, 0, "identity")
            if not action.identity_token_indices:
                raise TokenWeightError(f"action {action.skill_name!r} has no identity token")
            overlap = seen & set(action.identity_token_indices)
            if overlap:
                raise TokenWeightError(f"an identity token written twice: tokens {sorted(overlap)}")
            seen |= set(action.identity_token_indices)
    except TokenWeightError as exc:
        return str(exc)
    return None


def token_weights(
    masks: Sequence[ArrayLike],
    actions: Sequence[Sequence[SelectionAction]],
    selector_advantages: Sequence[Sequence[float]],
) -> TokenWeights:
    """w_task and w_sel for every episode of a chunk.

    `masks[e]` is episode e's loss mask over its response tokens, `actions[e]` its attributed read
    actions and `selector_advantages[e]` their A_sel, in the same order. Token indices in the
    actions are offsets into the same sequence as the mask.
    """
    if not len(masks) == len(actions) == len(selector_advantages):
        raise TokenWeightError(
            f"chunk shape: {len(masks)} masks, {len(actions)} action lists, "
            f"{len(selector_advantages)} advantage lists"
        )
    arrays = [_as_mask(m, e) for e, m in enumerate(masks)]
    total = float(sum(a.sum() for a in arrays))
    if total <= 0:
        raise TokenWeightError("B <= 0: the chunk has no loss-masked token")

    task_masks = [a.copy() for a in arrays]
    w_sel = [np.zeros_like(a) for a in arrays]
    credited: list[tuple[int, SelectionAction]] = []
    for e, (mask, episode_actions, advantages) in enumerate(
        zip(arrays, actions, selector_advantages, strict=True)
    ):
        if len(episode_actions) != len(advantages):
            raise TokenWeightError(
                f"episode {e}: {len(episode_actions)} actions but {len(advantages)} selector advantages"
            )
        identity_seen: set[int] = set()
        for action, advantage in zip(episode_actions, advantages, strict=True):
            _check_in_mask(mask, action.call_token_indices, e, "call")
            _check_in_mask(mask, action.identity_token_indices, e, "identity")
            # Checked for every action, credited or not: overlapping identity spans mean span
            # detection is wrong, and that must fail closed even when the selector is inert.
            overlap = identity_seen & set(action.identity_token_indices)
            if overlap:
                raise TokenWeightError(
                    f"an identity token written twice: episode {e} tokens {sorted(overlap)}"
                )
            identity_seen |= set(action.identity_token_indices)
            task_masks[e][list(action.call_token_indices)] = 0.0
            task_masks[e][list(action.identity_token_indices)] = 0.0
            if not math.isfinite(float(advantage)):
                raise TokenWeightError(f"episode {e}: non-finite selector advantage {advantage!r}")
            if advantage != 0.0:
                credited.append((e, action))

    task_total = float(sum(m.sum() for m in task_masks))
    if task_total <= 0:
        raise TokenWeightError("T <= 0: read calls cover every loss-masked token of the chunk")
    w_task = [m * (total / task_total) for m in task_masks]

    k = len(credited)
    for e, action in credited:
        share = (total / k) / len(action.identity_token_indices)
        w_sel[e][list(action.identity_token_indices)] = share

    task_mass = float(sum(w.sum() for w in w_task))
    if not math.isclose(task_mass, total, rel_tol=_MASS_RTOL):
        raise TokenWeightError(f"sum w_task != B: {task_mass} vs {total}")
    sel_mass = float(sum(w.sum() for w in w_sel))
    if not (sel_mass == 0.0 or math.isclose(sel_mass, total, rel_tol=_MASS_RTOL)):
        raise TokenWeightError(f"sum w_sel not in {{0, B}}: {sel_mass} vs B = {total}")
    for e, (wt, ws) in enumerate(zip(w_task, w_sel, strict=True)):
        both = np.flatnonzero((wt > 0) & (ws > 0))
        if both.size:
            raise TokenWeightError(f"a token with both weights > 0: episode {e} tokens {both.tolist()}")

    return TokenWeights(
        w_task=tuple(w_task),
        w_sel=tuple(w_sel),
        total_mask=total,
        task_tokens=task_total,
        credited_actions=k,
    )


def per_token_advantages(
    lengths: Sequence[int],
    task_advantages: Sequence[float],
    actions: Sequence[Sequence[SelectionAction]],
    selector_advantages: Sequence[Sequence[float]],
) -> tuple[tuple[NDArray[np.float64], ...], tuple[NDArray[np.float64], ...]]:
    """(A_task per token, A_sel per token) for each episode of a chunk.

    A_task broadcasts the episode's advantage to all its tokens (the weights decide which count);
    A_sel holds each action's advantage on its identity tokens and 0 elsewhere.
    """
    if not len(lengths) == len(task_advantages) == len(actions) == len(selector_advantages):
        raise ValueError("lengths, task advantages, actions and selector advantages differ in length")
    a_task: list[NDArray[np.float64]] = []
    a_sel: list[NDArray[np.float64]] = []
    for e, (n, advantage, episode_actions, sel) in enumerate(
        zip(lengths, task_advantages, actions, selector_advantages, strict=True)
    ):
        if len(episode_actions) != len(sel):
            raise ValueError(
                f"episode {e}: {len(episode_actions)} actions but {len(sel)} selector advantages"
            )
        a_task.append(np.full(int(n), float(advantage), dtype=np.float64))
        tokens = np.zeros(int(n), dtype=np.float64)
        for action, value in zip(episode_actions, sel, strict=True):
            if max(action.identity_token_indices) >= n:
                raise ValueError(f"episode {e}: identity token beyond length {n}")
            tokens[list(action.identity_token_indices)] = float(value)
        a_sel.append(tokens)
    return tuple(a_task), tuple(a_sel)

"""Shared builders for the credit and loss tests: synthetic episodes with known token layouts."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from skillgate_core.credit import SelectionAction

PROMPT_TOKENS = 4
"""Unmasked tokens at the start of every synthetic episode (stand-in for an assistant header)."""


def layout_episode(
    categories: Sequence[str], masked_tokens: int = 16
) -> tuple[list[int], list[SelectionAction]]:
    """One episode: PROMPT_TOKENS unmasked tokens, then `masked_tokens` masked ones; action j owns
    call tokens (p + 2j, p + 2j + 1) and identity token p + 2j + 1."""
    mask = [0] * PROMPT_TOKENS + [1] * masked_tokens
    actions = []
    for j, category in enumerate(categories):
        start = PROMPT_TOKENS + 2 * j
        actions.append(
            SelectionAction(
                turn_index=0,
                call_index=j,
                path_index=0,
                tool_name="read",
                skill_name=f"skill-{category}-{j}",
                category=category,  # type: ignore[arg-type]
                call_token_indices=(start, start + 1),
                identity_token_indices=(start + 1,),
            )
        )
    return mask, actions


@pytest.fixture
def layout() -> Callable[..., tuple[list[list[int]], list[list[SelectionAction]]]]:
    """Build a chunk (masks, actions) from per-episode read categories."""

    def build(reads: Sequence[Sequence[str]], masked_tokens: int = 16):
        episodes = [layout_episode(r, masked_tokens) for r in reads]
        return [m for m, _ in episodes], [a for _, a in episodes]

    return build

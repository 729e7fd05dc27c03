"""Accepted groups -> training samples: advantages per profile, token weights per conversion chunk.

Per group (docs/method.md 5, 7): the task advantage on raw scores, plus the profile's episode-level
behaviour term (mixed_separated, hybrid_slate) or its selector advantages per read action (the
two-stream profiles). Per conversion chunk (`chunk_groups` groups converted together, seed 4):
token weights (docs/method.md 6), so each stream carries the chunk's mass B. A chunk whose weights break
a rule (`TokenWeightError`) is dropped whole and counted as credit_failed: fail closed.

Every per-token array is aligned with the episode's response ids (prompt excluded), float64 here;
the loss casts to float32.

    samples, facts = build_samples(groups, profile, chunk_groups=4)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from skillgate_core.credit import (
    TokenWeightError,
    action_selector_advantages,
    hybrid_slate_advantages,
    kept_reward,
    mixed_separated_advantages,
    per_token_advantages,
    task_advantages,
    token_weights,
)
from skillgate_core.credit.actions import SelectionAction
from skillgate_core.rl.profiles import Profile
from skillgate_core.rl.rollouts import Episode, Group

__all__ = ["TOKEN_FIELDS", "ChunkFacts", "CreditedSample", "build_samples"]


@dataclass(frozen=True)
class CreditedSample:
    """One episode ready for the loss, packed as it is (rl/engine/packing.py): its ids, then its per-token arrays."""

    task_id: str
    """The task it came from."""
    prompt_ids: tuple[int, ...]
    """Prompt token ids (no loss)."""
    response_ids: tuple[int, ...]
    """Response token ids as sampled, observations included (mask 0 there)."""
    mask: NDArray[np.float64]
    """Loss mask m over the response ids."""
    a_task: NDArray[np.float64]
    """Task advantage on every response token (the weights decide which count)."""
    a_sel: NDArray[np.float64]
    """Selector advantage on identity tokens, 0 elsewhere."""
    w_task: NDArray[np.float64]
    """Task-stream weights (= mask for the plain profiles)."""
    w_sel: NDArray[np.float64]
    """Selector-stream weights (0 for the plain profiles)."""

    @property
    def fields(self) -> dict[str, NDArray[np.float64]]:
        """The per-response-token arrays by name (what the packer carries into micro-batches)."""
        return {name: getattr(self, name) for name in TOKEN_FIELDS}


TOKEN_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(CreditedSample))[3:]
"""The names of CreditedSample's per-response-token arrays: every field after the three ids."""


@dataclass
class ChunkFacts:
    """What conversion saw, for the step's metrics."""

    total_mask: float = 0.0
    """Sum of B over chunks: loss-masked tokens."""
    task_mass: float = 0.0
    """Sum of w_task."""
    selector_mass: float = 0.0
    """Sum of w_sel (B per chunk with an active selector, else 0)."""
    identity_tokens: int = 0
    """Skill-name tokens of read actions whose credit is nonzero: A_sel for the two-stream profiles; for
    the plain ones the episode's advantage, which every token of theirs, the read call's too, carries."""
    read_call_tokens: int = 0
    """Tokens of the trained episodes' read calls (two-stream: taken out of the task stream; plain:
    trained like every other token)."""
    groups: int = 0
    """Groups converted."""
    selector_active_groups: int = 0
    """Groups with at least one nonzero selector advantage."""
    credit_failed_groups: int = 0
    """Groups dropped because their chunk's token weights broke a rule."""
    oracle_negative_actions: int = 0
    """Oracle read actions whose credit (as for identity_tokens) is negative: the credit-starvation
    figure's rate; under an outcome reward, an oracle read in a failed episode."""
    oracle_actions: int = 0
    """Oracle read actions."""
    task_push: float = 0.0
    """Sum of w_task * |A_task|: divided by N, the L1 size of the task stream's gradient with respect to
    the token log-probs at rho = 1 (what the loss VALUE, a signed sum that centring cancels, hides)."""
    selector_push: float = 0.0
    """Sum of w_sel * |A_sel|: the selector stream's size the same way, before lambda. Its loss value at
    rho = 1 is -sum w_sel A_sel / N = 0 by construction (every credited action carries B/K and the
    A_sel of a group sum to 0), so this, not the value, says how hard the selector pushed."""
    errors: list[str] = field(default_factory=list)
    """Messages of the TokenWeightErrors that dropped chunks."""
    episodes: list[dict[str, int]] = field(default_factory=list)
    """Per trained episode: response/loss/read-call/identity token counts and oracle actions (the
    credit-starvation-by-length figure bins these)."""


def _reads(episodes: Sequence[Episode]) -> list[list[str]]:
    """Every read of each episode, attributed or not, in order (the utilities' and behaviour terms' input)."""
    return [e.spans.reads() for e in episodes]


def _action_selector(episodes: Sequence[Episode], utility: str) -> list[list[float]]:
    """A_sel per action: the utility over every read (unattributed ones included) and every consulted
    skill (the clean test: docs/reads.md), kept on the actions."""
    return action_selector_advantages([e.spans for e in episodes], utility)


def _scores(episodes: Sequence[Episode]) -> list[float]:
    # Groups reaching conversion passed the filter: every episode has a reward.
    return [kept_reward(e.score) for e in episodes]


def _group_credit(group: Group, profile: Profile) -> list[tuple[Episode, float, list[float]]]:
    """(episode, episode advantage, selector advantage per action) for every trained episode."""
    episodes = list(group.episodes)
    scores = _scores(episodes)
    zero_sel = [[0.0] * len(e.spans.actions) for e in episodes]
    if profile.behaviour == "hybrid_slate":
        partner = list(group.partner)
        slate_adv, plain_adv = hybrid_slate_advantages(_reads(episodes), scores, _scores(partner))
        return [(e, a, s) for e, a, s in zip(episodes, slate_adv, zero_sel, strict=True)] + [
            (e, a, [0.0] * len(e.spans.actions)) for e, a in zip(partner, plain_adv, strict=True)
        ]
    if profile.behaviour == "mixed_separated":
        advantages = mixed_separated_advantages(_reads(episodes), scores)
    elif group.verdict.selector_only:  # the labelled variant: a zero-variance group trains the selector only
        advantages = [0.0] * len(episodes)
    else:
        advantages = task_advantages(scores)
    selector = _action_selector(episodes, profile.utility) if profile.utility else zero_sel
    return list(zip(episodes, advantages, selector, strict=True))


def _chunk_samples(
    rows: list[tuple[Episode, float, list[float]]], profile: Profile, facts: ChunkFacts
) -> list[CreditedSample]:
    masks = [np.asarray(e.trajectory.loss_mask, dtype=np.float64) for e, _, _ in rows]
    two_stream = profile.loss == "two_stream"
    # The plain profiles train on every masked token: their read calls keep outcome credit.
    actions: list[Sequence[SelectionAction]] = [e.spans.actions if two_stream else () for e, _, _ in rows]
    sel = [s if two_stream else [] for _, _, s in rows]
    weights = token_weights(masks, actions, sel) if two_stream else None
    a_task, a_sel = per_token_advantages([len(m) for m in masks], [a for _, a, _ in rows], actions, sel)
    out = []
    pending: list[dict[str, int]] = []
    for k, (episode, _, _) in enumerate(rows):
        t = episode.trajectory
        w_task = weights.w_task[k] if weights else masks[k]
        w_sel = weights.w_sel[k] if weights else np.zeros_like(masks[k])
        out.append(CreditedSample(t.task_id, t.prompt_ids, t.response_ids, masks[k], a_task[k], a_sel[k], w_task, w_sel))
        record = {"response_tokens": len(t.response_ids), "loss_tokens": int(masks[k].sum()), "read_call_tokens": 0,
                  "identity_tokens": 0, "oracle_actions": 0, "oracle_negative_actions": 0}
        # what reaches each read action: its selector advantage (two-stream), else the episode's advantage
        credit = sel[k] if two_stream else [rows[k][1]] * len(episode.spans.actions)
        read_actions = actions[k] if two_stream else episode.spans.actions
        for action, value in zip(read_actions, credit, strict=True):
            record["read_call_tokens"] += len(action.call_token_indices)
            if value != 0.0:
                record["identity_tokens"] += len(action.identity_token_indices)
            if action.category == "oracle":
                record["oracle_actions"] += 1
                record["oracle_negative_actions"] += int(value < 0)
        pending.append(record)
    for record in pending:
        facts.read_call_tokens += record["read_call_tokens"]
        facts.identity_tokens += record["identity_tokens"]
        facts.oracle_actions += record["oracle_actions"]
        facts.oracle_negative_actions += record["oracle_negative_actions"]
    facts.episodes += pending
    facts.total_mask += float(sum(m.sum() for m in masks))
    facts.task_mass += float(sum(s.w_task.sum() for s in out))
    facts.selector_mass += float(sum(s.w_sel.sum() for s in out))
    facts.task_push += float(sum((s.w_task * np.abs(s.a_task)).sum() for s in out))
    facts.selector_push += float(sum((s.w_sel * np.abs(s.a_sel)).sum() for s in out))
    return out


def build_samples(
    groups: Sequence[Group], profile: Profile, *, chunk_groups: int
) -> tuple[list[CreditedSample], ChunkFacts]:
    """Training samples of every accepted group, in group order, and the facts for metrics."""
    facts = ChunkFacts()
    samples: list[CreditedSample] = []
    for start in range(0, len(groups), chunk_groups):
        chunk = groups[start : start + chunk_groups]
        per_group = [_group_credit(g, profile) for g in chunk]
        rows = [row for group_rows in per_group for row in group_rows]
        try:
            samples += _chunk_samples(rows, profile, facts)
        except TokenWeightError as exc:
            facts.credit_failed_groups += len(chunk)
            facts.errors.append(f"chunk of {[g.task.task_id for g in chunk]}: {exc}")
            continue
        facts.groups += len(chunk)
        facts.selector_active_groups += sum(any(any(v != 0 for v in s) for _, _, s in g) for g in per_group)
    return samples, facts

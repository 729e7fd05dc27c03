"""Task advantages, selection utilities and selector advantages for one group (docs/method.md 5).

A group is one prompt's G rollouts. The task stream is plain GRPO on the episode score. The
selector stream scores each read *action* with a utility u in {0, 1} and centres it on the mean
utility over all actions of the group; there is no std scaling, so an action's advantage is the
difference between its utility and the group's read quality.

Reads are given per episode as the categories of its reads in order (see `actions.CATEGORIES`):
every skill the environment saw opened, attributed or not (docs/reads.md). `attributed` (aligned
with `reads`; None = every read attributed) says which reads are actions with tokens to credit. An
unattributed read counts like any other read: it is in the baseline, and an episode holding one is
not clean; it just has no tokens, so its own advantage reaches no token (the caller keeps only the
attributed reads' values: `SpanReport.action_values`).

Consultation (docs/reads.md): `consulted` (per episode, the categories of every skill any file of which
the episode opened or executed, reads included; None = only the read skills) enters the clean test only.
An episode that consulted a skill other than the oracle (ran its script, read its data) is not clean,
whatever it read; running the oracle's own scripts after reading it stays clean. Consulting is not a
read: it adds no entry to the reads, so the baseline and the first-oracle utility do not change.
`action_selector_advantages` takes the span reports themselves: what the trainer puts on tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal

from skillgate_core.credit.actions import CATEGORIES
from skillgate_core.credit.spans import SpanReport

__all__ = [
    "STD_EPSILON",
    "action_selector_advantages",
    "UTILITIES",
    "Utility",
    "clean_oracle_utility",
    "first_oracle_utility",
    "selector_advantages",
    "selector_advantages_from_utilities",
    "task_advantages",
    "validate_reads",
]

STD_EPSILON = 1e-6
"""Added to the sample standard deviation so a near-constant group does not blow up."""

Utility = Literal["clean_oracle", "first_oracle"]
"""clean_oracle = SkillGate; first_oracle = the non-clean ablation `selector_action_credit`."""


def task_advantages(scores: Sequence[float]) -> list[float]:
    """GRPO advantages: (r_i - mean r) / (sample std(r) + 1e-6).

    The std is the sample standard deviation (ddof = 1, i.e. divide by n - 1); docs/method.md 11
    vectors 1, 2 and 5 pin this reading to 1e-6. A group of one has no spread: all zeros.
    """
    n = len(scores)
    if n == 0:
        return []
    values = [float(s) for s in scores]
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"scores must be finite, got {values}")
    mean = math.fsum(values) / n
    if n == 1:
        return [0.0]
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    return [(v - mean) / (std + STD_EPSILON) for v in values]


def _flags(reads: Sequence[Sequence[str]], attributed: Sequence[Sequence[bool]] | None) -> list[list[bool]]:
    """Per read, whether it is attributed; every read when `attributed` is None."""
    if attributed is None:
        return [[True] * len(episode) for episode in reads]
    if len(attributed) != len(reads) or any(len(a) != len(r) for a, r in zip(attributed, reads, strict=False)):
        raise ValueError(f"attributed must align with reads: {[len(a) for a in attributed]} flags for "
                         f"{[len(r) for r in reads]} reads")
    return [[bool(f) for f in episode] for episode in attributed]


def validate_reads(reads: Sequence[Sequence[str]]) -> None:
    """Raise unless `reads` is a list (per episode) of lists of known read categories."""
    for i, episode in enumerate(reads):
        if isinstance(episode, str):
            raise TypeError(f"episode {i}: reads must be a sequence of categories, not a string")
        for c in episode:
            if c not in CATEGORIES:
                raise ValueError(f"episode {i}: unknown read category {c!r}; expected one of {CATEGORIES}")


def _consulted(reads: Sequence[Sequence[str]], consulted: Sequence[Sequence[str]] | None) -> list[list[str]]:
    """Per episode, the categories of the skills it consulted; its reads when `consulted` is None."""
    if consulted is None:
        return [list(episode) for episode in reads]
    if len(consulted) != len(reads):
        raise ValueError(f"consulted must hold one list per episode: {len(consulted)} for {len(reads)} episodes")
    validate_reads(consulted)
    return [list(episode) for episode in consulted]


def clean_oracle_utility(reads: Sequence[Sequence[str]], attributed: Sequence[Sequence[bool]] | None = None,
                         consulted: Sequence[Sequence[str]] | None = None) -> list[list[float]]:
    """u = 1 for the single read of an episode whose only read is an attributed oracle read and which
    consulted no other skill; 0 for every other read.

    A multi-read episode earns nothing even when it contains the oracle ([O,O], [O,M]): reading
    extra skills is what the clean utility refuses to reward. An unattributed read (a glob, a
    relative path) is a read too: its episode is not clean. So is an episode that consulted another
    skill's files (`consulted`: its scripts run or read, its data) before or after its one read.
    """
    validate_reads(reads)
    flags = _flags(reads, attributed)
    seen = _consulted(reads, consulted)
    return [[1.0] if list(episode) == ["oracle"] and all(f) and all(c == "oracle" for c in other)
            else [0.0] * len(episode)
            for episode, f, other in zip(reads, flags, seen, strict=True)]


def first_oracle_utility(reads: Sequence[Sequence[str]], attributed: Sequence[Sequence[bool]] | None = None,
                         consulted: Sequence[Sequence[str]] | None = None) -> list[list[float]]:
    """u = 1 for the first oracle read of each episode (attributed or not: an oracle already read through
    a glob is not chosen again by naming it), 0 for all other reads. Not a clean test: consultation
    (checked, then ignored) changes nothing."""
    validate_reads(reads)
    _flags(reads, attributed)
    _consulted(reads, consulted)
    utilities: list[list[float]] = []
    for episode in reads:
        first = next((j for j, c in enumerate(episode) if c == "oracle"), None)
        utilities.append([1.0 if j == first else 0.0 for j in range(len(episode))])
    return utilities


_UtilityFn = Callable[[Sequence[Sequence[str]], Sequence[Sequence[bool]] | None, Sequence[Sequence[str]] | None],
                      list[list[float]]]

UTILITIES: dict[str, _UtilityFn] = {
    "clean_oracle": clean_oracle_utility,
    "first_oracle": first_oracle_utility,
}


def selector_advantages_from_utilities(utilities: Sequence[Sequence[float]]) -> list[list[float]]:
    """A_sel(a) = u(a) - b with b = mean u over the group's reads (0 if none).

    Everything is zero unless the group holds both u = 1 and u = 0 actions. With u in {0, 1} that
    is what centring gives anyway; stating it keeps the inert cases (nobody reads, nobody reads
    cleanly, every read clean) exactly zero rather than rounding residue.
    """
    flat = [float(u) for episode in utilities for u in episode]
    if any(u not in (0.0, 1.0) for u in flat):
        raise ValueError(f"utilities must be 0 or 1, got {sorted(set(flat))}")
    if not (1.0 in flat and 0.0 in flat):
        return [[0.0] * len(episode) for episode in utilities]
    baseline = math.fsum(flat) / len(flat)
    return [[float(u) - baseline for u in episode] for episode in utilities]


def selector_advantages(reads: Sequence[Sequence[str]], utility: str,
                        attributed: Sequence[Sequence[bool]] | None = None,
                        consulted: Sequence[Sequence[str]] | None = None) -> list[list[float]]:
    """Per episode, the selector advantage of each of its reads, in order.

    `reads[i]` lists the categories of episode i's reads; `utility` is "clean_oracle" or
    "first_oracle"; `attributed` (None: all) marks the reads that are actions; `consulted[i]` the
    categories of every skill episode i consulted (None: its reads). The advantages of a group sum to
    zero over reads; only the attributed reads' values reach tokens.
    """
    try:
        utility_fn = UTILITIES[utility]
    except KeyError:
        raise ValueError(f"unknown utility {utility!r}; expected one of {sorted(UTILITIES)}") from None
    return selector_advantages_from_utilities(utility_fn(reads, attributed, consulted))


def action_selector_advantages(reports: Sequence[SpanReport], utility: str) -> list[list[float]]:
    """Per episode of a group, the selector advantage of each of its actions (the attributed reads, in
    action order): the utility over every read and every consulted skill of each report, kept on the
    actions. What the trainer puts on identity tokens."""
    per_read = selector_advantages([r.reads() for r in reports], utility, [r.attributed() for r in reports],
                                   [r.consulted_categories() for r in reports])
    return [r.action_values(values) for r, values in zip(reports, per_read, strict=True)]

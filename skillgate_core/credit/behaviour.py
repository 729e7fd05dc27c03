"""Episode-level behaviour terms of the two behaviour-shaping ablations (docs/method.md 7).

Both terms are added to an episode's task advantage, so they reach every token of the episode
(unlike the selector stream, which reaches only skill-name tokens). They exist to show that
outcome-level behaviour shaping is diluted; they are baselines, not the method.

- `mixed_separated_term`: one slate group; utilities by the episode's read label, centred and
  scaled within each outcome stratum, then shrunk so it cannot reorder successes and failures.
- `hybrid_slate_advantages`: a pair of groups for one task (no skills, 16-skill slate); a regret
  shift on the slate group plus a stratified behaviour term from shrunk per-label mean scores.

Scores here are the scores the task advantage uses (raw_score, docs/method.md 5); success = score >= 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from skillgate_core.credit.advantages import task_advantages, validate_reads

__all__ = [
    "EpisodeLabel",
    "SEPARATED_UTILITY",
    "episode_label",
    "hybrid_regret_shift",
    "hybrid_slate_advantages",
    "hybrid_strata_term",
    "mixed_separated_advantages",
    "mixed_separated_term",
]

EpisodeLabel = Literal["misleading", "oracle", "other", "no_read"]
"""An episode's read behaviour, attributed with priority misleading > oracle > other; no_read if none."""

SEPARATED_UTILITY: dict[str, float] = {"oracle": 1.0, "misleading": -1.0, "other": -0.25, "no_read": -0.25}
"""mixed_separated episode utility per label."""

SUCCESS_THRESHOLD = 1.0
"""Resolved = score >= 1 (docs/method.md 3)."""

_TINY = 1e-12

_POOL_LABELS: tuple[EpisodeLabel, ...] = ("oracle", "misleading", "no_read")
"""hybrid_slate's pool E: the read choices it contrasts; "other" episodes stay out of it."""


def episode_label(reads: Sequence[str]) -> EpisodeLabel:
    """Attribute one episode's reads: any misleading read wins, then any oracle read, then any read."""
    validate_reads([reads])
    if "misleading" in reads:
        return "misleading"
    if "oracle" in reads:
        return "oracle"
    return "other" if len(reads) else "no_read"


def _check_group(reads: Sequence[Sequence[str]], scores: Sequence[float]) -> list[float]:
    if len(reads) != len(scores):
        raise ValueError(f"{len(reads)} read lists for {len(scores)} scores")
    values = [float(s) for s in scores]
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"scores must be finite, got {values}")
    return values


def mixed_separated_term(
    reads: Sequence[Sequence[str]],
    scores: Sequence[float],
    *,
    stratum_cap: float = 0.30,
    stratum_span: float = 0.40,
    gap_share: float = 0.5,
) -> list[float]:
    """The outcome-stratified behaviour term of `mixed_separated`, one value per episode.

    Within each outcome stratum (success / failure) the label utilities are centred and multiplied
    by min(stratum_cap, stratum_span / max|dev|) (0 when the stratum is uniform). When the group
    has both successes S and failures F, with gap = min_S A_task - max_F A_task and
    harm = max_F term - min_S term (how far the term closes the gap), the whole term is multiplied by
    (gap_share * gap) / harm only if harm > gap_share * gap. So at least half the task gap always
    survives, and a term that already orders successes above failures (harm <= 0) is left alone.
    """
    values = _check_group(reads, scores)
    utilities = [SEPARATED_UTILITY[episode_label(r)] for r in reads]
    success = [v >= SUCCESS_THRESHOLD for v in values]
    term = [0.0] * len(values)
    for stratum in (True, False):
        members = [i for i, s in enumerate(success) if s == stratum]
        if not members:
            continue
        mean = math.fsum(utilities[i] for i in members) / len(members)
        devs = {i: utilities[i] - mean for i in members}
        max_dev = max(abs(d) for d in devs.values())
        if max_dev <= _TINY:
            continue
        scale = min(stratum_cap, stratum_span / max_dev)
        for i, d in devs.items():
            term[i] = d * scale
    if any(success) and not all(success):
        advantages = task_advantages(values)
        gap = min(a for a, s in zip(advantages, success, strict=True) if s) - max(
            a for a, s in zip(advantages, success, strict=True) if not s
        )
        harm = max(t for t, s in zip(term, success, strict=True) if not s) - min(
            t for t, s in zip(term, success, strict=True) if s
        )
        budget = gap_share * max(gap, 0.0)
        if harm > budget:
            term = [t * (budget / harm) for t in term]
    return term


def mixed_separated_advantages(reads: Sequence[Sequence[str]], scores: Sequence[float]) -> list[float]:
    """Episode advantages of `mixed_separated`: GRPO task advantage + the behaviour term."""
    return [a + t for a, t in zip(task_advantages(scores), mixed_separated_term(reads, scores), strict=True)]


def hybrid_regret_shift(
    slate_scores: Sequence[float], no_skill_scores: Sequence[float], *, coef: float = 0.5
) -> float:
    """coef * clip(mean(slate scores) - mean(no-skill scores), -1, 1): the slate's gain over no skills."""
    if not slate_scores or not no_skill_scores:
        raise ValueError("both groups of the pair need scores")
    gain = math.fsum(slate_scores) / len(slate_scores) - math.fsum(no_skill_scores) / len(no_skill_scores)
    return coef * min(1.0, max(-1.0, gain))


# Alike in signature only to mixed_separated_term: a group's reads and scores, then its own knobs.
def hybrid_strata_term(
    reads: Sequence[Sequence[str]],
    scores: Sequence[float],
    *,
    tau: float = 1.0,
    max_abs: float = 0.5,
    coef: float = 1.0,
) -> list[float]:
    """The stratified behaviour term of `hybrid_slate`, one value per slate-group episode.

    Episodes are labelled by `episode_label` (misleading first, then oracle, no-read, other). The
    pool E holds the episodes labelled oracle, misleading or no_read; "other" episodes (reads of
    relevant / irrelevant / unadvertised skills only) stay out of E, out of every mean and of the
    re-centring, and get 0. Over E: each present stratum s gets its shrunk mean score
    (n_s mu_s + tau mu_E) / (n_s + tau) minus the pool mean mu_E; those deltas are re-centred with
    count weights (so the term sums to zero over E), scaled down so max|delta| <= max_abs, and
    multiplied by coef. Zero unless at least two of the three strata are present: without a
    contrast between read choices there is no behaviour evidence.
    """
    values = _check_group(reads, scores)
    labels = [episode_label(r) for r in reads]
    pooled = [(v, lab) for v, lab in zip(values, labels, strict=True) if lab in _POOL_LABELS]
    if len({lab for _, lab in pooled}) < 2:
        return [0.0] * len(values)
    n = len(pooled)
    mu_e = math.fsum(v for v, _ in pooled) / n
    delta: dict[str, float] = {}
    counts: dict[str, int] = {}
    for label in _POOL_LABELS:
        members = [v for v, lab in pooled if lab == label]
        if not members:
            continue
        counts[label] = len(members)
        mu_s = math.fsum(members) / len(members)
        delta[label] = (len(members) * mu_s + tau * mu_e) / (len(members) + tau) - mu_e
    centre = math.fsum(counts[s] * delta[s] for s in delta) / n
    delta = {s: d - centre for s, d in delta.items()}
    largest = max(abs(d) for d in delta.values())
    scale = max_abs / largest if largest > max_abs else 1.0
    return [coef * scale * delta[lab] if lab in delta else 0.0 for lab in labels]


def hybrid_slate_advantages(
    slate_reads: Sequence[Sequence[str]],
    slate_scores: Sequence[float],
    no_skill_scores: Sequence[float],
) -> tuple[list[float], list[float]]:
    """(slate-group advantages, no-skill-group advantages) of one `hybrid_slate` pair.

    The no-skill group is plain GRPO. The slate group is GRPO, then the regret shift added to every
    episode after centring, then the strata term.
    """
    shift = hybrid_regret_shift(slate_scores, no_skill_scores)
    strata = hybrid_strata_term(slate_reads, slate_scores)
    slate = [a + shift + s for a, s in zip(task_advantages(slate_scores), strata, strict=True)]
    return slate, task_advantages(no_skill_scores)

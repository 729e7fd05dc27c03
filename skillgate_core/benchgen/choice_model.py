"""A smoothed-frequency (naive-Bayes) model of which candidate of a choice set is the right one.

    model = fit_choices(train)                   # train: [Choice(tokens per candidate, answer index)]
    expected_accuracy(model, choice)             # 1/|ties| if the answer is among the top scores, else 0

Each candidate is a bag of tokens (a suffix, a length, an n-gram, a slate position, ...). Fitting counts,
per token, how often a candidate holding it was the answer (`hits`) and how often one was offered
(`seen`). A candidate's score is the sum over its tokens of log(rate / base): the token's answer rate,
`(hits + alpha * base) / (seen + alpha)`, against the base rate of the fit (all answers over all offered
candidates); a token never seen weighs 0, one never the answer -inf. The prediction is the highest score;
ties are counted fractionally (the expected accuracy of breaking them at random), so where every token
a choice's candidates hold has the same rate, they tie and the choice scores exactly chance,
1/|candidates|. Scores within TIE_TOLERANCE of the best count as tied.

`alpha` is 0 (maximum likelihood) by default, and the audit keeps it there: smoothing pulls a token seen
less often further toward the base, so two tokens with the same rate would score apart (`-planner`, a
suffix of two families, is offered twice as often as the others and would win every tie).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

__all__ = ["TIE_TOLERANCE", "Choice", "ChoiceModel", "expected_accuracy", "fit_choices", "scores"]

TIE_TOLERANCE = 1e-9
"""Scores this close to the best are tied (float rounding of equal rates is ~1e-15)."""


# Declarations below, not logic: each field documented where it is declared (docs/design.md, Style).
@dataclass(frozen=True)
class Choice:
    """One decision: what each candidate shows, and which candidate is right."""

    candidates: tuple[frozenset[Hashable], ...]
    """Per candidate, its tokens (a bag without repeats)."""
    answer: int
    """Index of the right candidate."""


@dataclass(frozen=True)
class ChoiceModel:
    """Answer and offer counts per token, fitted on a list of choices."""

    hits: Counter
    """token -> how often a candidate holding it was the answer."""
    seen: Counter
    """token -> how often a candidate holding it was offered."""
    base: float
    """Answers over offered candidates in the fit (1/|candidates| when every choice has as many)."""
    alpha: float
    """Smoothing pseudo-count toward the base rate (0: maximum likelihood, module docstring)."""
    weights: dict[Hashable, float]
    """token -> log(smoothed rate / base), for every token seen (an unseen one weighs 0)."""


def fit_choices(choices: Iterable[Choice], alpha: float = 0.0) -> ChoiceModel:
    """Count every token of every candidate; refuses an empty fit (there is no base rate)."""
    hits: Counter = Counter()
    seen: Counter = Counter()
    answers = offered = 0
    for choice in choices:
        answers += 1
        offered += len(choice.candidates)
        for i, tokens in enumerate(choice.candidates):
            seen.update(tokens)
            if i == choice.answer:
                hits.update(tokens)
    if not answers:
        raise ValueError("fit_choices: no choices to fit")
    base = answers / offered
    rates = {t: (hits[t] + alpha * base) / (n + alpha) for t, n in seen.items()}
    weights = {t: math.log(rate / base) if rate > 0 else -math.inf for t, rate in rates.items()}
    return ChoiceModel(hits=hits, seen=seen, base=base, alpha=alpha, weights=weights)


def scores(model: ChoiceModel, candidates: Sequence[frozenset[Hashable]]) -> list[float]:
    """Each candidate's score: the sum of log(smoothed rate / base) over its tokens (module docstring)."""
    # fsum is exactly rounded: the same score whatever order a set yields its tokens in (string hashes
    # differ between processes)
    return [math.fsum(model.weights.get(t, 0.0) for t in tokens) for tokens in candidates]


def expected_accuracy(model: ChoiceModel, choice: Choice) -> float:
    """1/|ties| when the answer is among the top-scoring candidates, else 0."""
    values = scores(model, choice.candidates)
    best = max(values)
    tied = [i for i, v in enumerate(values) if v >= best - TIE_TOLERANCE]
    return 1.0 / len(tied) if choice.answer in tied else 0.0

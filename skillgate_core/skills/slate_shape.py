"""The shape of a well-formed slate (docs/method.md 1, 4): 16 unique names, 1 oracle and 5/5/5.

The one rule that both building a slate (skills.slates) and judging a training group
(credit.groups) apply, kept below both.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

__all__ = ["SLATE_SHAPE", "slate_shape_problem"]

SLATE_SHAPE: dict[str, int] = {"oracle": 1, "misleading": 5, "relevant": 5, "irrelevant": 5}
"""Members per category of a well-formed slate (16 in all)."""


def slate_shape_problem(slate: Sequence[tuple[str, str]], gold_name: str | None = None) -> str | None:
    """None if `slate` ((name, category) pairs) is well formed, else what is wrong with it."""
    names = [name for name, _ in slate]
    expected = sum(SLATE_SHAPE.values())
    if len(names) != expected:
        return f"slate has {len(names)} skills, expected {expected}"
    duplicates = sorted(n for n, k in Counter(names).items() if k > 1)
    if duplicates:
        return f"slate repeats skill names {duplicates}"
    counts = Counter(category for _, category in slate)
    if dict(counts) != SLATE_SHAPE:
        return f"slate categories {dict(counts)}, expected {SLATE_SHAPE}"
    if gold_name is not None:
        oracle = next(name for name, category in slate if category == "oracle")
        if oracle != gold_name:
            return f"slate oracle {oracle!r} is not the task's gold skill {gold_name!r}"
    return None

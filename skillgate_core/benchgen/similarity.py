"""Description similarity, the measure behind "misleading descriptions <= 0.92 similar to the oracle".

    description_similarity(a, b) = max(SequenceMatcher(a', b').ratio(), SequenceMatcher(b', a').ratio())

where a', b' are the descriptions lower-cased with whitespace runs collapsed. difflib's ratio is
2*M/T (M matched characters, T total characters): 1.0 for equal texts, near 0 for unrelated ones.
It is order-sensitive and not quite symmetric, hence the max of both directions; autojunk is off so
the result does not depend on text length quirks. Pure standard library, so anyone can recompute it.
"""

from __future__ import annotations

from difflib import SequenceMatcher

__all__ = ["MAX_MISLEADING_SIMILARITY", "MIN_MISLEADING_SIMILARITY", "description_similarity"]

MAX_MISLEADING_SIMILARITY = 0.92
"""A lookalike's description may be at most this similar to its oracle's (docs/method.md 8)."""
MIN_MISLEADING_SIMILARITY = 0.25
"""...and at least this similar: a lookalike must look like the oracle to mislead."""


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def description_similarity(a: str, b: str) -> float:
    """Character-level difflib ratio of the normalised texts, the larger of both directions."""
    x, y = _norm(a), _norm(b)
    return max(SequenceMatcher(None, x, y, autojunk=False).ratio(),
               SequenceMatcher(None, y, x, autojunk=False).ratio())

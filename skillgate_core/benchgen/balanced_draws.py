"""Balanced draws: which of its family's six suffixes, and which of the six description templates, an oracle gets.

    deal = balanced_deal([6, 6, 6, 6], 6, tag="0:oracle-suffix:planning:train")
    deal[cell][k]      # -> the value index (0..5) of the k-th skill of that cell

An oracle and its five lookalikes share codename and noun and differ in the suffix, so the suffix is
the one part of a name that could mark the oracle (and the template index the one such part of a
description). Drawn independently per skill, each is uniform, yet over a split's few skills the draws
are skewed: on the old bench `-steps` named 33% of the training planning oracles and none of
eval70_v1's, which planning evaluation oracles got `-planner` 53% of the time, and a GRPO policy learned
exactly that. So the values are dealt instead, per (family, split): a seeded shuffle of the six values,
cycled over the split's skills taken cell by cell (the (family, domain) cells in a seeded order, each
cell's skills in a seeded order). Over n skills each value then goes to floor(n/6) or ceil(n/6) of
them, and since a cell's skills are consecutive in the cycle, the same holds inside every cell (the
default suite's six held-in skills per cell get all six suffixes once). A cell of fewer than six skills
cannot hold every value; the family's split still spreads them as evenly as it can (eval70_v1's four
planning skills get four different suffixes).

A pure function of the tag: every process that re-plans the suite deals the same values.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

__all__ = ["balanced_deal"]


def balanced_deal(cell_sizes: Sequence[int], values: int, tag: str) -> list[list[int]]:
    """Per cell, per skill, a value index in 0..values-1: a seeded shuffle of the values cycled over every
    cell's skills, cells and skills taken in seeded orders (module docstring)."""
    if values < 1:
        raise ValueError(f"balanced_deal: expected at least one value, got {values}")
    rng = random.Random(tag)
    cycle = list(range(values))
    rng.shuffle(cycle)
    cells = list(range(len(cell_sizes)))
    rng.shuffle(cells)
    dealt: list[list[int]] = [[0] * n for n in cell_sizes]
    k = 0
    for cell in cells:
        slots = list(range(cell_sizes[cell]))
        rng.shuffle(slots)
        for slot in slots:
            dealt[cell][slot] = cycle[k % values]
            k += 1
    return dealt

"""Which rows the paper build compares with which, when arms were trained at several seeds (docs/method.md 9).

An arm's rows are labelled PROFILE[+VARIANT...][@sN] (`arm_label`). A seed's comparison pairs the arm
at seed N with the baseline at seed N (`X@s1` - `mixed_task_reward@s1`); a label without the arm shape
(`sft`) is at seed 0, so it meets the seed-0 baseline. An arm with rows at two or more seeds that the
baseline has too is also compared with its seeds pooled (`PooledArm`):

    pairs = seed_pairs(methods, "selector_clean_oracle_action_credit", "mixed_task_reward")
    pooled = pooled_arms(methods, "selector_clean_oracle_action_credit", "mixed_task_reward")

The baseline's own arm (any seed) is the reference, never a compared method; a variant of the
baseline's profile is an arm of its own.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from skillgate_core.evaluation.arm_label import parse_arm_label, seed_label
from skillgate_core.evaluation.rows import MethodTrials

__all__ = ["PooledArm", "SeedPair", "arm_seeds", "pooled_arms", "seed_pairs"]


@dataclass(frozen=True)
class SeedPair:
    """One method's rows and the baseline rows of its seed (None when that seed's baseline has none)."""

    method: MethodTrials
    """The compared method's rows (one label: one arm at one seed)."""
    seed: int
    """Its seed (0 for a bare label)."""
    baseline_label: str
    """The label of the baseline at that seed (whether or not it has rows)."""
    baseline: MethodTrials | None
    """The baseline's rows at that seed, None when it has none."""


@dataclass(frozen=True)
class PooledArm:
    """One arm with rows at two or more seeds, and the baseline's rows at the seeds it shares."""

    arm: str
    """PROFILE[+VARIANT...]: the label without its seed."""
    baseline_arm: str
    """The baseline's label without its seed."""
    method_seeds: tuple[int, ...]
    """Every seed the arm has rows at, ascending."""
    seeds: tuple[int, ...]
    """The seeds both the arm and the baseline have rows at, ascending: what is pooled."""
    methods: tuple[MethodTrials, ...]
    """The arm's rows at each of `seeds`."""
    baselines: tuple[MethodTrials, ...]
    """The baseline's rows at each of `seeds`."""

    @property
    def poolable(self) -> bool:
        """Two or more shared seeds: one seed is the per-seed comparison already."""
        return len(self.seeds) >= 2


def arm_seeds(methods: Sequence[MethodTrials]) -> dict[str, dict[int, MethodTrials]]:
    """arm (PROFILE[+VARIANT...]) -> seed -> its rows, arms and seeds in sorted order."""
    by: dict[str, dict[int, MethodTrials]] = defaultdict(dict)
    for m in methods:
        label = parse_arm_label(m.method)
        by[label.arm][label.seed] = m  # labels are unique per section, so (arm, seed) is too
    return {arm: dict(sorted(seeds.items())) for arm, seeds in sorted(by.items())}


def _compared(methods: Sequence[MethodTrials], method: str, baseline: str) -> list[MethodTrials]:
    """Every method but the baseline's arm: `method`'s arm first (seeds ascending), the rest by arm then seed
    (without seeds, the sorted labels: the order of before)."""
    skillgate, reference = parse_arm_label(method).arm, parse_arm_label(baseline).arm

    def key(m: MethodTrials) -> tuple[bool, str, int]:
        label = parse_arm_label(m.method)
        return label.arm != skillgate, label.arm, label.seed

    return sorted((m for m in methods if parse_arm_label(m.method).arm != reference), key=key)


def seed_pairs(methods: Sequence[MethodTrials], method: str, baseline: str) -> list[SeedPair]:
    """Every compared method with the baseline at its seed (`method` names SkillGate, first in the order)."""
    reference = arm_seeds(methods).get(parse_arm_label(baseline).arm, {})
    pairs = []
    for m in _compared(methods, method, baseline):
        seed = parse_arm_label(m.method).seed
        pairs.append(SeedPair(m, seed, seed_label(parse_arm_label(baseline).arm, seed), reference.get(seed)))
    return pairs


def pooled_arms(methods: Sequence[MethodTrials], method: str, baseline: str) -> list[PooledArm]:
    """Every compared arm with rows at two or more seeds (poolable or not), `method`'s arm first."""
    by = arm_seeds(methods)
    reference_arm = parse_arm_label(baseline).arm
    reference = by.get(reference_arm, {})
    out, seen = [], set()
    for m in _compared(methods, method, baseline):
        arm = parse_arm_label(m.method).arm
        if arm in seen or len(by[arm]) < 2:
            continue
        seen.add(arm)
        shared = tuple(s for s in by[arm] if s in reference)
        out.append(PooledArm(arm=arm, baseline_arm=reference_arm, method_seeds=tuple(by[arm]), seeds=shared,
                             methods=tuple(by[arm][s] for s in shared),
                             baselines=tuple(reference[s] for s in shared)))
    return out

"""The paper build's frozen config (stage `paper-tables`, `skillgate paper build`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from skillgate_core.base.config_ranges import NonNegativeInt, PositiveInt, Range, check_ranges
from skillgate_core.evaluation.arm_label import parse_arm_label

__all__ = ["ABLATION_DESIGNS", "PaperConfig"]

ABLATION_DESIGNS: dict[str, str] = {
    "mixed_task_reward": "outcome reward only (no selection credit)",
    "selector_clean_oracle_masked_task_only": "task-only: read call masked, no selector credit",
    "hybrid_slate": "regret: paired no-skill group, regret shift",
    "mixed_separated": "behaviour bonus: outcome-stratified read utility",
    "selector_action_credit": "non-clean: first-oracle selector credit",
    "selector_clean_oracle_action_credit": "SkillGate: clean-oracle selector credit",
}
"""What each credit design changes, for the ablation table (docs/method.md 7)."""


@dataclass(frozen=True)
class PaperConfig:
    """Which methods the paper compares and how its statistics are computed."""

    method: str = "selector_clean_oracle_action_credit"
    """The seed-0 `method` label of SkillGate: the method side of the per-benchmark paired bootstrap (seed 0)
    and of the claim check (both skipped when it or the baseline has no rows). Its other seeds' rows are
    labelled METHOD@sN (evaluation/arm_label.py); with two or more seeds shared with the baseline the claim
    check pools them."""
    baseline: str = "mixed_task_reward"
    """The seed-0 `method` label every paired bootstrap compares against, at the compared arm's seed
    (BASELINE@sN for an arm at seed N): SkillGate's, and every other method's with rows (none without
    baseline rows)."""
    ablation_methods: tuple[str, ...] = (
        "selector_clean_oracle_masked_task_only",
        "hybrid_slate",
        "mixed_separated",
        "selector_action_credit",
        "selector_clean_oracle_action_credit",
    )
    """Rows of the credit-design ablation, in order (methods without rows are listed as absent)."""
    k: PositiveInt = 4
    """pass@k reported in the tables and the bootstrap."""
    bootstrap_resamples: Annotated[int, Range(ge=10_000)] = 10_000
    """Task-cluster resamples of the paired bootstrap."""
    bootstrap_seed: NonNegativeInt = 0
    """Seed of the bootstrap's resampling."""
    confidence: Annotated[float, Range(gt=0, lt=1)] = 0.95
    """Coverage of the percentile interval."""
    max_strata: PositiveInt = 10
    """Read sequences shown in the strata table (most frequent first); the rest are pooled as 'other'."""
    first_length_bin: PositiveInt = 1024
    """Response tokens of the first credit-starvation bin [0, first); each next bin doubles its upper edge."""
    length_bins: Annotated[int, Range(ge=2)] = 5
    """Response-length bins, the last one open: 1024 and 5 give 0-1023, -2047, -4095, -8191, >= 8192."""
    training_window: PositiveInt = 10
    """Last optimizer steps averaged in the training summary table."""
    dpi: Annotated[int, Range(ge=50, le=400)] = 110
    """Resolution of the PNG figures."""
    exclude_tags: tuple[str, ...] = ("nightly-*",)
    """Evaluations whose tag matches one of these shell patterns are left out (listed in paper.json and
    the command's output): by default the nightly regression's, which re-evaluate the exports a paper
    reports under the same protocol and would repeat their trials; () keeps every evaluation."""

    def __post_init__(self) -> None:
        check_ranges(self)
        if self.method == self.baseline:
            raise ValueError(f"method and baseline are both {self.method!r}")
        for name in ("method", "baseline"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"PaperConfig.{name} must be a non-empty method label, got {value!r}")
            label = parse_arm_label(value)
            # The build pairs each seed itself; a seed here would pair one arm's seed N with the other's
            # seed 0 in the SkillGate table.
            if label.seed:
                raise ValueError(f"PaperConfig.{name}: {label.label!r} names seed {label.seed}; give the seed-0 "
                                 f"label {label.arm!r} (each seed's rows are paired with the baseline's at it)")

    @property
    def length_bin_edges(self) -> tuple[int, ...]:
        """Lower edges of the response-length bins (tokens): 0, first, 2 first, 4 first, ..."""
        return (0, *(self.first_length_bin * 2**i for i in range(self.length_bins - 1)))

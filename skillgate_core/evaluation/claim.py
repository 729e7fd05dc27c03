"""The paper's claim check, read off the paired bootstrap of SkillGate - the baseline (docs/method.md 9).

SkillGate's claim is about selection without a cost in outcome: against mixed_task_reward it should
read the oracle more often (oracle exposure), read only the oracle more often (clean-oracle rate), and
not resolve fewer trials. With the paired task-cluster bootstrap's percentile intervals:

    oracle exposure    difference interval above 0     (its lower end > 0)
    clean-oracle rate  difference interval above 0     (its lower end > 0)
    trial success      difference interval not below 0 (its upper end >= 0: no significant loss)

The claim holds when all three are met. Nothing is hard-coded: every verdict comes from the intervals.
When both arms were trained at two or more shared seeds, the paper build asks it of the seeds pooled
(bootstrap.pooled_paired_bootstrap) and lists each seed's own check beside it; the line says which
seeds it pooled.

    check = claim_check(result)   # result: PairedBootstrap of SkillGate - mixed_task_reward, all tasks
    check.holds, check.line()
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from skillgate_core.evaluation.bootstrap import BootstrapInterval, PairedBootstrap

__all__ = ["CLAIM_CRITERIA", "ClaimCheck", "Criterion", "CriterionCheck", "claim_check"]

Requirement = Literal["above_zero", "not_below_zero"]


@dataclass(frozen=True)
class Criterion:
    """One condition of the claim on one bootstrap statistic."""

    statistic: str
    """The bootstrap statistic (BootstrapInterval.statistic)."""
    label: str
    """How the report names it."""
    requirement: Requirement
    """above_zero: the interval's lower end > 0; not_below_zero: its upper end >= 0."""


CLAIM_CRITERIA: tuple[Criterion, ...] = (
    Criterion("oracle_exposure", "oracle exposure", "above_zero"),
    Criterion("clean_oracle_rate", "clean-oracle", "above_zero"),
    Criterion("trial_success", "trial success", "not_below_zero"),
)
"""What SkillGate - mixed_task_reward must show for the claim to hold, in the order the line prints them."""

_REQUIREMENT_TEXT: dict[Requirement, str] = {
    "above_zero": "interval above 0",
    "not_below_zero": "interval not wholly below 0",
}


def _met(interval: BootstrapInterval, requirement: Requirement) -> bool:
    if requirement == "above_zero":
        return interval.ci_low > 0
    return interval.ci_high >= 0


@dataclass(frozen=True)
class CriterionCheck:
    """One criterion against one interval."""

    criterion: Criterion
    """What was asked."""
    interval: BootstrapInterval
    """The bootstrap interval it was asked of."""
    met: bool
    """Whether the interval meets it."""

    def text(self) -> str:
        i = self.interval
        return (f"{self.criterion.label} {100 * i.difference:+.1f} pp [{100 * i.ci_low:+.1f}, {100 * i.ci_high:+.1f}] "
                f"(needs the {_REQUIREMENT_TEXT[self.criterion.requirement]}: {'yes' if self.met else 'no'})")


@dataclass(frozen=True)
class ClaimCheck:
    """The claim's verdict on one paired bootstrap."""

    method: str
    """The method the claim is about (SkillGate)."""
    baseline: str
    """What it is compared against."""
    confidence: float
    """Coverage of the intervals read."""
    checks: tuple[CriterionCheck, ...]
    """One per criterion, in CLAIM_CRITERIA order."""
    seeds: tuple[int, ...] = ()
    """Training seeds of the arms whose trials the bootstrap compared (several: pooled)."""

    @property
    def holds(self) -> bool:
        return all(c.met for c in self.checks)

    def line(self, title: str = "**Claim check**") -> str:
        """The report's one line: verdict first, then every interval it rests on; `title` opens it."""
        verdict = "holds" if self.holds else "does not hold"
        pooled = f"seeds {', '.join(map(str, self.seeds))} pooled, " if len(self.seeds) > 1 else ""
        return (f"{title} ({self.method} - {self.baseline}, {pooled}all tasks, {100 * self.confidence:g}% "
                f"intervals): **{verdict}**. " + "; ".join(c.text() for c in self.checks) + ".")

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, "baseline": self.baseline, "confidence": self.confidence,
                "seeds": list(self.seeds), "holds": self.holds,
                "criteria": [{"statistic": c.criterion.statistic, "requirement": c.criterion.requirement,
                              "difference": c.interval.difference, "ci_low": c.interval.ci_low,
                              "ci_high": c.interval.ci_high, "met": c.met} for c in self.checks]}


def claim_check(result: PairedBootstrap, criteria: tuple[Criterion, ...] = CLAIM_CRITERIA) -> ClaimCheck:
    """Every criterion against `result`'s intervals (KeyError when the result lacks a statistic)."""
    checks = []
    for criterion in criteria:
        interval = result.interval(criterion.statistic)
        checks.append(CriterionCheck(criterion, interval, _met(interval, criterion.requirement)))
    return ClaimCheck(method=result.method, baseline=result.baseline, confidence=result.confidence,
                      checks=tuple(checks), seeds=result.arm_seeds)

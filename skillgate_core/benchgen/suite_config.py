"""BenchBuildConfig: the size and seed of the bundled benchmark suite (stage `bench-build`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from skillgate_core.base.config_ranges import (
    NonNegativeFloat,
    NonNegativeInt,
    PositiveInt,
    Probability,
    check_ranges,
)
from skillgate_core.benchgen.engines.steps import MAX_STEPS
from skillgate_core.benchgen.families import FAMILIES
from skillgate_core.envs.backend_registry import Backend

__all__ = ["FAMILY_NAMES", "DOMAIN_NAMES", "SPLITS", "BenchBuildConfig"]

FAMILY_NAMES: tuple[str, ...] = tuple(FAMILIES)
"""The registered families (benchgen.families.FAMILIES), in registry order: the default of `families`."""
DOMAIN_NAMES = ("data-formats", "service-config", "scheduling", "deploy-runbooks")
"""The four domains every family covers."""
SPLITS = ("train", "eval70_v1", "slate147")
"""Suite splits: training tasks (held-in skills), eval70_v1 and the 147-task slate (held-out skills)."""


@dataclass(frozen=True)
class BenchBuildConfig:
    """The bundled suite: four families x four domains, held-in skills for training, held-out for evaluation."""

    seed: NonNegativeInt = 0
    """Suite seed: the same seed writes a byte-identical suite."""
    families: tuple[str, ...] = FAMILY_NAMES
    """Families to generate (subset of procedural, diagnosis, constraints, planning)."""
    domains: tuple[str, ...] = DOMAIN_NAMES
    """Domains to generate (subset of data-formats, service-config, scheduling, deploy-runbooks)."""
    train_skills_per_cell: PositiveInt = 6
    """Held-in oracle skills per (family, domain) cell; each brings five lookalikes."""
    train_tasks_per_skill: PositiveInt = 11
    """Training tasks per held-in skill (4 x 4 x 6 x 11 = 1,056 by default)."""
    eval_skills_per_cell: PositiveInt = 1
    """Held-out oracle skills per cell for eval70_v1 (never used in training)."""
    eval_tasks: NonNegativeInt = 70
    """Tasks of eval70_v1, spread evenly over families, domains and eval skills."""
    slate_skills_per_cell: PositiveInt = 1
    """Held-out oracle skills per cell for the independent slate (disjoint from eval70's)."""
    slate_tasks: NonNegativeInt = 147
    """Tasks of the independent slate (the seed's Claw-147)."""
    max_attempts: PositiveInt = 20
    """Input draws per task before giving up: a draw must let the oracle pass and every lookalike fail."""
    gate: Literal["none", "sample", "all"] = "none"
    """Validity gate after writing: none, a sample per family and split, or every task."""
    gate_sample_per_family: NonNegativeInt = 2
    """With gate=sample: tasks per family and split that are gated."""
    gate_backend: Backend = "bwrap"
    """Sandbox backend of the gate (bubblewrap: ~12 ms a command)."""
    procedure_steps: NonNegativeInt = 0
    """K, the length knob of every family's procedure (docs/benchmarks.md, Stepped procedures). 0: a skill's
    procedure is one run of its script, which solves the task (the suite eval70_v1 was frozen on). K in
    1..8: K dependent commands the agent carries out itself, each copying a code from the SKILL.md and the
    work order from the instruction or the ticket the step before printed; the script alone solves nothing,
    one wrong step scores 0, and an episode grows by one tool call per step."""
    audit_margin: NonNegativeFloat = 0.05
    """Shortcut audit (benchgen.audit, every build): how far over chance a name-only or position-only
    predictor's accuracy must be to count as a shortcut, 5 points (a 30% lift over a chance of 1/6). A
    predictor fails a split when it exceeds chance by more than this AND chance would reach its hits with
    probability below audit_alpha. The margin binds where units are many (the 1,056 training slates: 0.05 is
    4-7 standard errors of chance); on eval70_v1's 70 slates a predictor that knows nothing clears it by luck
    in 7-11% of suites, and there the p-value binds."""
    audit_alpha: Probability = 0.001
    """The binomial tail probability under chance below which an excess over audit_margin fails the audit:
    each check of a shortcut-free suite fails with probability under 0.001, while a planted leak (every
    oracle one suffix) has p < 1e-12 on the default held-out splits (16 skills each)."""

    def __post_init__(self) -> None:
        check_ranges(self)
        if self.procedure_steps > MAX_STEPS:
            raise ValueError(f"procedure_steps: expected 0..{MAX_STEPS}, got {self.procedure_steps}")
        for name, allowed in (("families", FAMILY_NAMES), ("domains", DOMAIN_NAMES)):
            values = getattr(self, name)
            bad = [v for v in values if v not in allowed]
            if bad or not values or len(set(values)) != len(values):
                raise ValueError(f"{name}: expected distinct values from {allowed}, got {values}")

"""The bundled benchmark suite and SkillGym-style environment generation.

- `families/`: four task families, one per reasoning structure (procedural execution, abductive
  diagnosis, constraint satisfaction, partial-order planning), each over four domains; a skill is
  a seeded house procedure, each with five lookalikes (one per misleading strategy).
- `engines/`: the stdlib-only solvers and verifiers pasted into skills, solutions and tests.
- `suite`: the whole suite (training tasks on held-in skills, eval70_v1 and the 147-task slate on
  held-out skills), deterministic for a seed; `gate`: the validity gate over it; `stats`: counts.
- how the suite is made: `suite_config` (BenchBuildConfig), `skill_plan` (which skills: held-in and
  held-out oracles, five lookalikes each, the `filler` library), `naming`, `balanced_draws` (the oracle's
  suffix and template, dealt evenly), `skill_files` (one skill folder), `task_gen` (one task, checked
  in-process), `package` (its Harbor-layout folder), `similarity` (how close a lookalike's description
  may come to the oracle's), `stepped` (a skill's stepped procedure: its codes, its SKILL.md section,
  each task's work order and seal); `stage`: `bench-build`.
- `audit`: the shortcut audit every build runs (can names alone, or positions alone, find the oracle?):
  `audit_predictors` (what each predictor sees), `choice_model` (their frequency model), `audit_balance`
  (the oracle-suffix counts).
- `agents` + `criticality`: scripted oracle / lookalike / no-skill agents through real sandboxes.
- `skillgym/`: the builder/reviewer loop that turns real skills into tasks via any
  OpenAI-compatible endpoint.

    from skillgate_core.benchgen import BenchBuildConfig, build_suite
    summary = build_suite(BenchBuildConfig(seed=0), Path("bench"))
"""

from skillgate_core.benchgen.criticality import (
    criticality_markdown,
    criticality_problems,
    measure_criticality,
)
from skillgate_core.benchgen.families import FAMILIES, STRATEGIES, STRATEGY_LABELS
from skillgate_core.benchgen.gate import gate_suite
from skillgate_core.benchgen.similarity import MAX_MISLEADING_SIMILARITY, description_similarity
from skillgate_core.benchgen.stage import build_bench
from skillgate_core.benchgen.stats import suite_stats
from skillgate_core.benchgen.suite import SuiteSummary, build_suite, suite_digest
from skillgate_core.benchgen.suite_config import DOMAIN_NAMES, FAMILY_NAMES, SPLITS, BenchBuildConfig

__all__ = [
    "DOMAIN_NAMES",
    "FAMILIES",
    "FAMILY_NAMES",
    "MAX_MISLEADING_SIMILARITY",
    "SPLITS",
    "STRATEGIES",
    "STRATEGY_LABELS",
    "BenchBuildConfig",
    "SuiteSummary",
    "build_bench",
    "build_suite",
    "criticality_markdown",
    "criticality_problems",
    "description_similarity",
    "gate_suite",
    "measure_criticality",
    "suite_digest",
    "suite_stats",
]

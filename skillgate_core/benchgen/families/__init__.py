"""The task families, one per reasoning structure (SkillGym's task profiles), and FAMILIES, their one registry.

A new family is its module here (ending in `FAMILY = declare_family(globals(), engine=..., ...)`), its engine
(benchgen/engines/<name>.py, named in that package's face) and one entry in FAMILIES below; the suite's
default families, the config check and the script embedding all read FAMILIES.

| family      | structure               | the skill holds                                  | verifier checks |
|-------------|-------------------------|--------------------------------------------------|-----------------|
| procedural  | procedural execution    | a house interchange format                       | exact file      |
| diagnosis   | abductive diagnosis     | a symptom -> cause table with priorities         | every cause     |
| constraints | constraint satisfaction | a placement policy (headroom, spread, pinning)   | every rule      |
| planning    | partial-order planning  | ordering rules within and across components      | every rule      |
"""

from skillgate_core.benchgen.families import constraints, diagnosis, planning, procedural
from skillgate_core.benchgen.families.base import STRATEGIES, STRATEGY_LABELS, Cue, Family, SkillDraft

FAMILIES: dict[str, Family] = {
    f.name: f for f in (procedural.FAMILY, diagnosis.FAMILY, constraints.FAMILY, planning.FAMILY)
}
"""Family name -> its generator (and, as `.engine`, its solver and checker); the one registration."""

__all__ = ["FAMILIES", "STRATEGIES", "STRATEGY_LABELS", "Cue", "Family", "SkillDraft"]

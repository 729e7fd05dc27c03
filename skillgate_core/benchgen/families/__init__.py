"""The four task families, one per reasoning structure (SkillGym's task profiles).

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
"""Family name -> its generator."""

__all__ = ["FAMILIES", "STRATEGIES", "STRATEGY_LABELS", "Cue", "Family", "SkillDraft"]

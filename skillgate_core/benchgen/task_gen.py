"""Generate one task of a skill: seeded inputs that make the skill critical, checked in-process.

A draw of inputs is kept only when, run in-process on exactly those inputs, the oracle's procedure
passes the task's verifier and every lookalike's procedure fails it; otherwise the next draw
(`attempt`) is tried. The instruction is checked never to name a skill of the set.
"""

from __future__ import annotations

import random
import re

from skillgate_core.benchgen.engines import ENGINES
from skillgate_core.benchgen.families import FAMILIES
from skillgate_core.benchgen.package import TaskPlan
from skillgate_core.benchgen.skill_plan import GenerationError, SkillSet

__all__ = ["generate_task", "instruction_problem"]


def instruction_problem(instruction: str, skills: SkillSet) -> str | None:
    """Why the instruction gives a skill away (a name, or the shared codename), else None."""
    text = instruction.lower()
    for name in (skills.oracle.name, *skills.misleading_names):
        if name in text or name.replace("-", " ") in text:
            return f"names the skill {name!r}"
    if re.search(rf"\b{re.escape(skills.codename)}\b", text):
        return f"names the codename {skills.codename!r}"
    return None


def generate_task(seed: int, skills: SkillSet, task_id: str, max_attempts: int) -> TaskPlan:
    """The task `task_id` of `skills`: the first input draw where the skill is critical."""
    family = FAMILIES[skills.family]
    engine = ENGINES[skills.family]
    params = dict(skills.draft.params)
    for attempt in range(max_attempts):
        rng = random.Random(f"{seed}:task:{task_id}:{attempt}")
        files = family.inputs(rng, skills.draft)
        check = engine.checker(params, files)
        if check({**files, **engine.solve(params, files)}):
            continue
        if any(not check({**files, **engine.solve(dict(d.params), files)}) for d in skills.lookalike_drafts):
            continue
        instruction = family.instruction(rng, skills.draft, files)
        problem = instruction_problem(instruction, skills)
        if problem:
            raise GenerationError(f"{task_id}: the instruction {problem}")
        return TaskPlan(task_id=task_id, family=skills.family, domain=skills.domain, split=skills.split,
                        oracle=skills.oracle.name, misleading=skills.misleading_names, instruction=instruction,
                        files=files, params=params, attempt=attempt)
    raise GenerationError(f"{task_id}: no input draw in {max_attempts} attempts let {skills.oracle.name} pass and "
                          "every lookalike fail")

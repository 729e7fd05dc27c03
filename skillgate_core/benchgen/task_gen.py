"""Generate one task of a skill: seeded inputs that make the skill critical, checked in-process.

A draw of inputs is kept only when, run in-process on exactly those inputs, the oracle's procedure
passes the task's verifier and every lookalike's procedure fails it; otherwise the next draw
(`attempt`) is tried. The instruction is checked never to name a skill of the set.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

from skillgate_core.benchgen.engines.steps import seal_problems
from skillgate_core.benchgen.families import FAMILIES
from skillgate_core.benchgen.package import TaskPlan
from skillgate_core.benchgen.skill_plan import GenerationError, SkillSet
from skillgate_core.benchgen.stepped import task_seal, work_order, work_order_line

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


def _sealed(outputs: dict[str, str], order: str, codes: tuple[str, ...], output: str) -> dict[str, str]:
    """A skill's outputs plus the seal its steps write, carried out perfectly (none without steps)."""
    if not codes:
        return outputs
    seal = task_seal(order, codes, output)
    return {**outputs, seal["path"]: seal["ticket"] + "\n"}


def _task_checker(check: Callable[[dict[str, str]], list[str]], seal: dict[str, str] | None):
    """The family's checker of one draw's outputs, plus the seal's problems (what tests/check.py runs)."""
    if seal is None:
        return check
    return lambda files: [*check(files), *seal_problems(seal, files)]


def generate_task(seed: int, skills: SkillSet, task_id: str, max_attempts: int) -> TaskPlan:
    """The task `task_id` of `skills`: the first input draw where the skill is critical. With a stepped
    procedure (the skills carry step codes) the task states a work order, and the check includes the seal:
    the oracle's steps carried out perfectly pass, every lookalike's fail, and so does the oracle's with
    one step's code miscopied."""
    family = FAMILIES[skills.family]
    engine = family.engine
    params = dict(skills.draft.params)
    codes = skills.oracle.codes
    # its own rng: a bench without steps draws exactly what it drew before the option existed
    order = work_order(random.Random(f"{seed}:order:{task_id}")) if codes else ""
    seal = task_seal(order, codes, params["output"]) if codes else None
    for attempt in range(max_attempts):
        rng = random.Random(f"{seed}:task:{task_id}:{attempt}")
        files = family.inputs(rng, skills.draft)
        check = _task_checker(engine.checker(params, files), seal)
        if check({**files, **_sealed(engine.solve(params, files), order, codes, params["output"])}):
            continue
        if any(not check({**files, **_sealed(engine.solve(dict(d.params), files), order, e.codes,
                                             d.params["output"])})
               for d, e in zip(skills.lookalike_drafts, skills.lookalikes, strict=True)):
            continue
        if codes and not check({**files, **_sealed(engine.solve(params, files), order,
                                                   (codes[0] + "x", *codes[1:]), params["output"])}):
            raise GenerationError(f"{task_id}: a miscopied step code still passes the verifier")
        instruction = family.instruction(rng, skills.draft, files)
        if codes:
            instruction += "\n" + work_order_line(order)
        problem = instruction_problem(instruction, skills)
        if problem:
            raise GenerationError(f"{task_id}: the instruction {problem}")
        return TaskPlan(task_id=task_id, family=skills.family, domain=skills.domain, split=skills.split,
                        oracle=skills.oracle.name, misleading=skills.misleading_names, instruction=instruction,
                        files=files, params=params, attempt=attempt, seal=seal, cue=skills.draft.cue)
    raise GenerationError(f"{task_id}: no input draw in {max_attempts} attempts let {skills.oracle.name} pass and "
                          "every lookalike fail")

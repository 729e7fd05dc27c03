"""Stepped procedures in the bundled skills (bench-build `procedure_steps` K >= 1): the codes each skill's
steps take, its SKILL.md `## Procedure` section, and the work order and seal of each task.

    codes = procedure_codes(random.Random("steps:..."), 4)       # ("amber-38", "onyx-07", ...)
    body = with_stepped_procedure(body, name, "export_records.py", "export/ledger.dat", codes)
    seal = task_seal("WO-48213", codes, "export/ledger.dat")      # {"path": ..., "ticket": ...}

What the steps compute lives in engines/steps.py (pasted into the scripts); this module writes the
texts around them. Every skill draws its own codes (a lookalike's differ from its oracle's), so
carrying out a lookalike's steps perfectly still seals the output wrongly.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from skillgate_core.benchgen.engines.steps import MAX_STEPS, SEAL_SUFFIX, STEP_LABELS, chain_tickets

__all__ = ["CODE_WORDS", "MAX_STEPS", "procedure_codes", "task_seal", "with_stepped_procedure", "work_order",
           "work_order_line"]

CODE_WORDS: tuple[str, ...] = (
    "amber", "basalt", "cobalt", "dune", "ember", "flint", "garnet", "indigo", "jasper", "kelp", "lumen",
    "marble", "nickel", "onyx", "pearl", "quartz", "russet", "topaz", "umber", "violet", "zinc", "coral",
    "fennel", "glacier", "saffron", "tundra", "velvet", "cinder", "meadow", "copper",
)
"""Words of step codes (`amber-38`): none is a reader command (cat, head, more, ...), a codename or a
name part, so a code never changes how a call is read (docs/reads.md) or renamed (skills.aliases)."""
_SECTION = re.compile(r"^## Procedure\n", re.MULTILINE)


def procedure_codes(rng: random.Random, steps: int) -> tuple[str, ...]:
    """`steps` distinct codes `word-NN`, one per step."""
    if not 1 <= steps <= MAX_STEPS:
        raise ValueError(f"procedure_steps: expected 1..{MAX_STEPS}, got {steps}")
    words = rng.sample(CODE_WORDS, steps)
    return tuple(f"{w}-{rng.randint(10, 99)}" for w in words)


def work_order(rng: random.Random) -> str:
    """A task's work order (`WO-48213`): stated in its instruction, the value step 1 takes."""
    return f"WO-{rng.randint(10000, 99999)}"


def work_order_line(order: str) -> str:
    """The instruction line that states the work order."""
    return f"Work order: `{order}`\n"


def task_seal(order: str, codes: Sequence[str], output: str) -> dict[str, str]:
    """The seal the verifier expects: {"path": OUTPUT.seal, "ticket": the last step's ticket}."""
    return {"path": output + SEAL_SUFFIX, "ticket": chain_tickets(order, list(codes))[-1]}


def _section(name: str, tool_file: str, output: str, codes: Sequence[str]) -> str:
    script = f"/skills/{name}/scripts/{tool_file}"
    lines = []
    for index, code in enumerate(codes, start=1):
        source = "--order WORK_ORDER" if index == 1 else "--ticket TICKET"
        lines.append(f"{script} step {index} {source} --code {code}")
    labels = ", ".join(STEP_LABELS[: len(codes)])
    return (
        f"## Procedure\n\nCarry out these {len(codes)} steps ({labels}) in order from the task's working "
        "directory, one command at a time (python3 standard library only). In step 1, WORK_ORDER is the work "
        "order the task states; in every later step, TICKET is the ticket the step before it printed. Copy "
        "each step's code exactly: the steps accept any value, and only the right ones seal the result.\n\n"
        "```bash\n" + "\n".join(lines) + "\n```\n\n"
        f"The last step writes `{output}` and its seal `{output}{SEAL_SUFFIX}`; the importer rejects an "
        "output whose seal does not match.\n"
    )


def with_stepped_procedure(body: str, name: str, tool_file: str, output: str, codes: Sequence[str]) -> str:
    """`body` (a family's SKILL.md body, which ends with its `## Procedure` section) with that section
    replaced by the stepped one."""
    found = list(_SECTION.finditer(body))
    if not found:
        raise ValueError(f"{name}: the SKILL.md body has no '## Procedure' section to replace")
    return body[: found[-1].start()] + _section(name, tool_file, output, codes)

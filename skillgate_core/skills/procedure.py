"""A skill's procedure: the first ```bash (or ```sh) block of its SKILL.md body.

The scripted followers (benchgen criticality) and the reference teacher (agent) both carry it out.
A bundled skill's block is either its whole procedure in one run, or (bench-build `procedure_steps`,
docs/benchmarks.md) one command per step, with two placeholders the follower fills in itself:
WORK_ORDER, the work order the task's instruction states, and TICKET, the ticket the step before
printed. `procedure_steps` splits a stepped block into its commands, `fill_step` fills one.
"""

from __future__ import annotations

import re

__all__ = ["extract_procedure", "fill_step", "is_stepped", "printed_ticket", "procedure_steps", "task_work_order"]

_BASH_BLOCK = re.compile(r"^```(?:bash|sh)[ \t]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
_WORK_ORDER = re.compile(r"^Work order: `([^`\n]+)`", re.MULTILINE)
_TICKET = re.compile(r"\bticket: ([0-9A-F]{8})\b")
WORK_ORDER, TICKET = "WORK_ORDER", "TICKET"


def extract_procedure(skill_md: str) -> str | None:
    """The first ```bash (or ```sh) block of a SKILL.md, or None when it has none."""
    m = _BASH_BLOCK.search(skill_md)
    return m.group(1) if m else None


def is_stepped(procedure: str) -> bool:
    """Whether a procedure block is a stepped one (its commands take WORK_ORDER or TICKET)."""
    return bool(re.search(rf"\b(?:{WORK_ORDER}|{TICKET})\b", procedure))


def procedure_steps(procedure: str) -> list[str]:
    """The commands of a procedure block, one per non-blank line, in order."""
    return [line.strip() for line in procedure.splitlines() if line.strip()]


def fill_step(command: str, work_order: str | None, ticket: str | None) -> str:
    """`command` with its WORK_ORDER / TICKET placeholder replaced (a missing value is left as it is)."""
    if work_order is not None:
        command = re.sub(rf"\b{WORK_ORDER}\b", work_order, command)
    if ticket is not None:
        command = re.sub(rf"\b{TICKET}\b", ticket, command)
    return command


def task_work_order(instruction: str) -> str | None:
    """The work order an instruction states (`Work order: `WO-48213``), or None."""
    m = _WORK_ORDER.search(instruction)
    return m.group(1) if m else None


def printed_ticket(output: str) -> str | None:
    """The last ticket a step printed (`ticket: 3FA9C2D1`), or None."""
    found = _TICKET.findall(output)
    return found[-1] if found else None

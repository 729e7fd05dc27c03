"""Scripted agents that make "following a skill" mechanical, for skill-criticality measurements.

- `follower_agent(name)`: reads /skills/NAME/SKILL.md inside the sandbox (`cat`, as a real agent's
  read call would), takes the body's first ```bash block and runs it in the workspace: whole, or, for a
  stepped procedure, one command a step with the work order and each printed ticket filled in. With the
  oracle it should succeed; with a lookalike it should fail. `miscopy_step=I` copies step I's code
  wrongly (one wrong step: it should fail too).
- `no_skill_agent(family)`: reads no skill; runs the family's generic naive attempt (a python3
  program that knows only the instruction), e.g. copying records in a generic format or keeping
  the file order.

Both have the envs Agent signature (sandbox, task, deadline) -> (status, command results), so they
run through `run_scripted_episode`: a real sandbox and the task's real verifier.
"""

from __future__ import annotations

import time

from skillgate_core.benchgen.families import FAMILIES
from skillgate_core.envs.sandbox import ExecResult, Sandbox
from skillgate_core.envs.scripted_episode import Agent
from skillgate_core.envs.task_package import TaskPackage
from skillgate_core.envs.verifier import EpisodeStatus
from skillgate_core.skills.procedure import (
    extract_procedure,
    fill_step,
    is_stepped,
    printed_ticket,
    procedure_steps,
    task_work_order,
)

__all__ = ["follower_agent", "no_skill_agent"]

def _run(box: Sandbox, cmd: str, deadline: float) -> tuple[ExecResult, bool]:
    left = deadline - time.monotonic()
    if left <= 0:
        return ExecResult(124, "", "agent budget exhausted", timed_out=True), True
    result = box.exec(cmd, timeout=min(left, box.config.command_timeout_sec))
    return result, result.timed_out and time.monotonic() >= deadline - 0.05


def _miscopied(command: str) -> str:
    """The command with its `--code` value copied wrongly (its last character changed)."""
    head, sep, code = command.rpartition("--code ")
    return head + sep + code[:-1] + ("0" if code[-1:] != "0" else "1") if sep else command


def follower_agent(skill: str, miscopy_step: int | None = None) -> Agent:
    """Read /skills/SKILL/SKILL.md and carry out its procedure in the workspace (module docstring)."""

    def agent(box: Sandbox, task: TaskPackage, deadline: float) -> tuple[EpisodeStatus, list[ExecResult]]:
        read, out_of_time = _run(box, f"cat /skills/{skill}/SKILL.md", deadline)
        results = [read]
        procedure = extract_procedure(read.stdout) if read.ok else None
        if out_of_time or procedure is None:
            return (EpisodeStatus.TRUNCATED if out_of_time else EpisodeStatus.COMPLETED), results
        commands = procedure_steps(procedure) if is_stepped(procedure) else [procedure]
        order, ticket = task_work_order(task.instruction), None
        for index, command in enumerate(commands, start=1):
            command = fill_step(command, order, ticket)
            run, out_of_time = _run(box, _miscopied(command) if index == miscopy_step else command, deadline)
            results.append(run)
            ticket = printed_ticket(run.stdout)
            if out_of_time:
                break
        return (EpisodeStatus.TRUNCATED if out_of_time else EpisodeStatus.COMPLETED), results

    return agent


def no_skill_agent(family: str) -> Agent:
    """Run the family's generic attempt, given only the instruction."""
    program = FAMILIES[family].naive

    def agent(box: Sandbox, task: TaskPackage, deadline: float) -> tuple[EpisodeStatus, list[ExecResult]]:
        box.write_file("/tmp/attempt/instruction.md", task.instruction)
        box.write_file("/tmp/attempt/attempt.py", program)
        run, out_of_time = _run(box, "python3 /tmp/attempt/attempt.py /tmp/attempt/instruction.md", deadline)
        return (EpisodeStatus.TRUNCATED if out_of_time else EpisodeStatus.COMPLETED), [run]

    return agent

"""A stepped procedure: K dependent commands the agent carries out itself (bench-build `procedure_steps`).

With `procedure_steps` K >= 1 a skill's script no longer solves the task when run alone. Its SKILL.md
lists K commands, `SCRIPT step I ...`, each taking one value from the skill's text (the step's
`--code`) and one from what came before: step 1 the task's work order (stated in the instruction,
`--order`), every later step the ticket the previous step printed (`--ticket`). Each step prints
the next ticket, a hash of the previous one, the step's label and the code it was given; step K also
writes the family's output and a seal file holding the last ticket beside it. The verifier
recomputes the expected output from the inputs as before and the expected seal from the oracle's
codes and the task's work order, so

- the right skill with one wrong step (a miscopied code or ticket, a skipped or repeated step)
  writes a wrong seal and scores 0;
- a lookalike's steps, carried out perfectly, score 0 (its codes and its engine parameters differ);
- nothing tells the agent that a step went wrong: a step accepts any value it is given.

This module is pasted into the task scripts (engines/embed.py) after common.py, like an engine:
python3's standard library only, no imports of the project.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from skillgate_core.benchgen.engines.common import read_tree, write_tree  # embed-drop

STEP_LABELS = ("ingest", "normalise", "validate", "assemble", "reconcile", "stamp", "verify", "publish")
"""The label of step I is STEP_LABELS[I - 1]; it enters the ticket, so steps cannot be swapped."""
MAX_STEPS = len(STEP_LABELS)
"""The most steps a procedure may have."""
SEAL_SUFFIX = ".seal"
"""The seal is written beside the output: OUTPUT + SEAL_SUFFIX."""


def order_ticket(order: str) -> str:
    """The ticket before step 1: derived from the task's work order."""
    return hashlib.sha256(f"order|{order.strip()}".encode()).hexdigest()[:8].upper()


def next_ticket(previous: str, label: str, code: str) -> str:
    """The ticket a step prints: 8 upper-case hex digits of sha256(previous | label | code)."""
    return hashlib.sha256(f"{previous.strip().upper()}|{label}|{code.strip()}".encode()).hexdigest()[:8].upper()


def chain_tickets(order: str, codes: list[str]) -> list[str]:
    """The tickets steps 1..K print when given `order` and the skill's `codes`, in order."""
    if len(codes) > MAX_STEPS:
        raise ValueError(f"a procedure has at most {MAX_STEPS} steps, got {len(codes)} codes")
    ticket, tickets = order_ticket(order), []
    for label, code in zip(STEP_LABELS[: len(codes)], codes, strict=True):
        ticket = next_ticket(ticket, label, code)
        tickets.append(ticket)
    return tickets


def seal_problems(seal: dict, files: dict) -> list[str]:
    """Problems with the seal file in `files` against seal = {"path": ..., "ticket": ...}."""
    path = seal["path"]
    if path not in files:
        return [f"{path}: missing (the procedure's last step writes it)"]
    if files[path].strip() != seal["ticket"]:
        return [f"{path}: the seal does not match the procedure's steps"]
    return []


def sealed_check(check, seal: dict):
    """The family's check(params, inputs, files) plus the seal's problems."""
    return lambda params, inputs, files: list(check(params, inputs, files)) + seal_problems(seal, files)


def sealed_solve(solve, seal: dict):
    """The family's solve(params, files) plus the seal file (the reference solution)."""
    return lambda params, files: {**solve(params, files), seal["path"]: seal["ticket"] + "\n"}


def _usage(steps: int) -> str:
    return (f"usage: {sys.argv[0]} step I --order WORK_ORDER --code CODE   (I = 1)\n"
            f"       {sys.argv[0]} step I --ticket TICKET --code CODE      (I = 2..{steps})\n"
            "Carry out the steps in the order the skill's procedure lists them.")


def step_main(solve, params: dict, steps: int, argv: list[str] | None = None) -> None:
    """A skill script's entry point: one step of its `steps`-step procedure (module docstring)."""
    args = list(sys.argv[1:] if argv is None else argv)
    values: dict[str, str] = {}
    ok = len(args) >= 2 and args[0] == "step" and args[1].isdigit() and 1 <= int(args[1]) <= steps
    rest = args[2:]
    while ok and rest:
        flag = rest.pop(0)
        if flag not in ("--order", "--ticket", "--code") or not rest or flag[2:] in values:
            ok = False
            break
        values[flag[2:]] = rest.pop(0)
    index = int(args[1]) if ok else 0
    ok = ok and "code" in values and (("order" in values) == (index == 1)) and (("ticket" in values) == (index > 1))
    if not ok:
        print(_usage(steps), file=sys.stderr)
        sys.exit(2)
    label = STEP_LABELS[index - 1]
    previous = order_ticket(values["order"]) if index == 1 else values["ticket"]
    ticket = next_ticket(previous, label, values["code"])
    if index < steps:
        print(f"step {index} of {steps} ({label}) done. ticket: {ticket}")
        return
    root = Path.cwd()
    outputs = solve(params, read_tree(root))
    outputs[params["output"] + SEAL_SUFFIX] = ticket + "\n"
    write_tree(root, outputs)
    written = ", ".join(sorted(outputs))
    print(f"step {index} of {steps} ({label}) done. wrote {written}. ticket: {ticket}")

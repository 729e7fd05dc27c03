"""Write one bundled task as a Harbor-layout package (what `load_task_package` reads).

    TASK/
      task.toml                  [task] id, [agent]/[verifier] timeouts, [environment], [metadata]
      instruction.md             the task statement (never names a skill)
      environment/Dockerfile     FROM skillgate/base:bookworm; WORKDIR /app; COPY workspace/ /app/
      environment/workspace/...  the initial files (the seeded inputs)
      solution/solve.sh          the reference solution: the engine with the oracle's parameters,
                                 inline (it never reads /skills)
      tests/test.sh              runs tests/check.py and writes /logs/verifier/reward.txt (1 or 0)
      tests/check.py             recomputes the expected result from the inputs (digest-checked)
      skills.json                the ordered slate the prompt shows (skillgate_core.formats.slate_manifest; the
                                 roles are the entries' categories)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillgate_core.base.config import canonical_json
from skillgate_core.benchgen.engines import check_script, solution_script
from skillgate_core.benchgen.engines.common import text_sha256
from skillgate_core.benchgen.families import FAMILIES
from skillgate_core.benchgen.families.base import Cue
from skillgate_core.envs.sandbox_config import BASE_IMAGE
from skillgate_core.formats.slate_manifest import MANIFEST_FILE
from skillgate_core.skills import Slate, SlateError, slate_problem

__all__ = ["WORKDIR", "TaskPlan", "write_package"]

WORKDIR = "/app"
"""The agent's working directory in every bundled task."""

TEST_SH = """#!/bin/bash
# Verifier: recompute the expected result from the inputs and grade the workspace (1 pass, 0 fail).
mkdir -p /logs/verifier
if python3 /tests/check.py {workdir}; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


@dataclass(frozen=True)
class TaskPlan:
    """Everything one bundled task package holds, before it is written."""

    task_id: str
    """Package id."""
    family: str
    """Task family (engine)."""
    domain: str
    """Domain."""
    split: str
    """Suite split (train, eval70_v1, slate147)."""
    oracle: str
    """The oracle skill's name."""
    misleading: tuple[str, ...]
    """The five lookalikes, in strategy order."""
    instruction: str
    """instruction.md."""
    files: Mapping[str, str]
    """Initial workspace {relative path: text}."""
    params: Mapping[str, Any]
    """The oracle's engine parameters (solution and verifier)."""
    attempt: int
    """Which input draw passed the generation checks (0 = the first)."""
    seal: Mapping[str, str] | None = None
    """A stepped procedure's expected seal {"path": OUTPUT.seal, "ticket": the last step's}; None when the
    skill's procedure is one script run."""
    cue: Cue | None = None
    """The oracle's openly stated context (revision, consumer, scope, output), which the instruction
    repeats: kept in task.toml's [metadata.cue] for the reference teacher's evidence (agent/policies.py);
    the agent never sees task.toml."""


def _toml_string(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid TOML basic string


def task_toml(plan: TaskPlan, structure: str) -> str:
    return "\n".join([
        'version = "1.0"',
        "",
        "[task]",
        f"id = {_toml_string(plan.task_id)}",
        "",
        "[agent]",
        "timeout_sec = 600.0",
        "",
        "[verifier]",
        "timeout_sec = 120.0",
        "",
        "[environment]",
        "cpus = 1.0",
        "memory_mb = 1024",
        "storage_mb = 512",
        "allow_internet = false",
        "",
        "[metadata]",
        'source = "skillgate-benchgen"',
        f"family = {_toml_string(plan.family)}",
        f"structure = {_toml_string(structure)}",
        f"domain = {_toml_string(plan.domain)}",
        f"split = {_toml_string(plan.split)}",
        f"generation_attempt = {plan.attempt}",
        f"stepped_procedure = {'true' if plan.seal else 'false'}",
        "",
        *_cue_lines(plan.cue),
    ])


def _cue_lines(cue: Cue | None) -> list[str]:
    if cue is None:
        return []
    return ["[metadata.cue]", f"revision = {int(cue.revision)}", f"consumer = {_toml_string(cue.consumer)}",
            f"scope = {_toml_string(cue.scope)}", f"output = {_toml_string(cue.output)}", ""]


def write_package(root: Path, plan: TaskPlan, structure: str, slate: Slate) -> Path:
    """Write the package under root/TASK_ID and return its folder."""
    folder = root / plan.task_id
    problem = slate_problem(slate)
    if problem is not None:
        raise SlateError(f"{folder}: refusing to write a malformed slate: {problem}")
    if slate.oracle != plan.oracle or set(slate.members("misleading")) != set(plan.misleading):
        raise SlateError(f"{folder}: the slate's oracle/misleading skills are not the plan's")
    params = json.loads(canonical_json(plan.params))
    seal = dict(plan.seal) if plan.seal is not None else None
    writes: dict[str, str] = {
        "task.toml": task_toml(plan, structure),
        "instruction.md": plan.instruction,
        "environment/Dockerfile": f"FROM {BASE_IMAGE}\nWORKDIR {WORKDIR}\nCOPY workspace/ {WORKDIR}/\n",
        "solution/solve.sh": (
            "#!/bin/bash\n# Reference solution: the house procedure, inline (no skill files needed).\n"
            f"set -euo pipefail\ncd {WORKDIR}\npython3 - <<'PYTHON'\n"
            + solution_script(FAMILIES[plan.family].engine, params, seal) + "PYTHON\n"),
        "tests/test.sh": TEST_SH.format(workdir=WORKDIR),
        "tests/check.py": check_script(FAMILIES[plan.family].engine, params,
                                       {rel: text_sha256(text) for rel, text in plan.files.items()}, seal),
    }
    writes.update({f"environment/workspace/{rel}": text for rel, text in plan.files.items()})
    for rel, text in writes.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for script in ("solution/solve.sh", "tests/test.sh", "tests/check.py"):
        (folder / script).chmod(0o755)
    # The same manifest skills.write_slate writes, without its per-file fsync (a suite has 1,000+ files).
    (folder / MANIFEST_FILE).write_text(json.dumps(slate.to_manifest(), indent=2, sort_keys=True) + "\n",
                                        encoding="utf-8")
    return folder

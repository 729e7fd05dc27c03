"""Static checks on a builder's package, before it is executed (SkillGym's validate step).

    problems = static_problems(files, skill_name)      # [] when the package may go to the gate

- the required files are present;
- only relative paths inside the package;
- the instruction never names the skill (or its folder);
- solution/ and tests/ never read /skills (the reference and the grader must not need the skill);
- the Dockerfile starts FROM the local base image and never copies the whole context into /root;
- tests/test.sh writes /logs/verifier/reward.txt (or reward.json).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePosixPath

__all__ = ["REQUIRED_FILES", "static_problems"]

REQUIRED_FILES = ("instruction.md", "task.toml", "environment/Dockerfile", "solution/solve.sh", "tests/test.sh")


def static_problems(files: Mapping[str, str], skill: str) -> list[str]:
    problems = [f"{p}: missing (required)" for p in REQUIRED_FILES if p not in files]
    for path in files:
        pure = PurePosixPath(path)
        if pure.is_absolute() or ".." in pure.parts or not path.strip():
            problems.append(f"{path}: expected a relative path inside the package")
    instruction = files.get("instruction.md", "").lower()
    if skill.lower() in instruction or skill.replace("-", " ").lower() in instruction:
        problems.append(f"instruction.md: names the skill {skill!r} (leak)")
    if "/skills" in instruction:
        problems.append("instruction.md: points at /skills (the agent must choose the skill itself)")
    for path, text in files.items():
        if path.startswith(("solution/", "tests/")) and "/skills" in text:
            problems.append(f"{path}: reads /skills (the reference solution and the verifier must not need the skill)")
    dockerfile = files.get("environment/Dockerfile", "")
    lines = [ln.strip() for ln in dockerfile.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    if lines and not lines[0].upper().startswith("FROM SKILLGATE/BASE:BOOKWORM"):
        problems.append(f"environment/Dockerfile: expected FROM skillgate/base:bookworm, got {lines[0]!r}")
    if re.search(r"^\s*(COPY|ADD)\s+\.\s+/root", dockerfile, re.MULTILINE | re.IGNORECASE):
        problems.append("environment/Dockerfile: COPY . /root would put solution and tests in the image")
    test_sh = files.get("tests/test.sh", "")
    if test_sh and "/logs/verifier/reward" not in test_sh:
        problems.append("tests/test.sh: never writes /logs/verifier/reward.txt")
    return problems

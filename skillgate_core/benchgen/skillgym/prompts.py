"""The prompts of the builder/reviewer loop: one contract per reasoning structure, three roles.

Each system prompt starts with a `ROLE:` line (fit-check, builder, reviewer); replies are one JSON
object, described in the prompt and parsed by `protocol.py`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

__all__ = ["BUILDER_SYSTEM", "FIT_SYSTEM", "REVIEWER_SYSTEM", "STRUCTURES", "build_messages", "fit_messages",
           "review_messages"]

STRUCTURES: dict[str, str] = {
    "procedural": (
        "Procedural execution: the agent must carry out the skill's documented procedure step by step on "
        "realistic inputs (hundreds of records or more) and produce an artifact whose exact content follows "
        "from the procedure. The verifier recomputes the artifact from the inputs."),
    "diagnosis": (
        "Abductive diagnosis: the workspace holds symptoms (logs, broken state, reports); the agent must infer "
        "the cause(s) with the skill's knowledge and report or fix them. The verifier recomputes the causes "
        "from the evidence."),
    "constraints": (
        "Constraint satisfaction: the agent must produce an assignment, configuration or schedule meeting "
        "constraints the skill documents. The verifier checks every constraint and accepts any valid answer."),
    "planning": (
        "Partial-order planning: the agent must order or schedule steps so that dependencies and ordering "
        "rules the skill documents hold. The verifier checks every rule and accepts any valid order."),
}
"""Reasoning structure -> the task contract the builder must meet."""

FIT_SYSTEM = """ROLE: fit-check
You decide whether a skill can support a verifiable terminal task of one reasoning structure.
Answer with one JSON object: {"fit": true|false, "reason": "<one sentence>"}.
Say false when the task would not need the skill's specific knowledge, needs network, GPUs or
interaction, or cannot be verified by recomputing from the inputs."""

BUILDER_SYSTEM = """ROLE: builder
You write one task package (Harbor layout) that makes an agent use the given skill.
Reply with one JSON object: {"files": {"<relative path>": "<file text>", ...}} holding at least
instruction.md, task.toml, environment/Dockerfile, solution/solve.sh and tests/test.sh.
Rules:
- environment/Dockerfile: FROM skillgate/base:bookworm, then only WORKDIR /app and COPY of files
  under environment/ (e.g. COPY workspace/ /app/). No RUN apt-get, no network, no COPY . /root.
- Task scripts use bash and python3's standard library only.
- instruction.md states the goal, the inputs and the output contract; it never names the skill or
  its folder and never reveals the expected answer.
- Inputs are realistic in size, so solving by hand is impractical; at least one step needs the
  skill's non-obvious knowledge.
- solution/solve.sh solves the task from /app without reading /skills.
- tests/test.sh recomputes the expected result from the inputs (no stored answer key), accepts every
  correct solution, rejects plausible wrong ones, and writes 1 or 0 to /logs/verifier/reward.txt.
  tests/ is copied in only at verification and must not read /skills either."""

REVIEWER_SYSTEM = """ROLE: reviewer
You audit a task package for reward-signal quality. The package already passed execution checks
(no-op scores 0, the reference solution scores 1). Look for:
- leak: the instruction or the workspace gives away the answer or the skill's procedure;
- too_strict: the verifier would fail a correct alternative solution (formatting, ordering, style);
- too_weak: the verifier would pass a plausible wrong solution (keyword grep, partial checks).
Ask for the tightest verifier that still accepts every correct solution.
Reply with one JSON object: {"blockingPass": true|false, "blockingIssues": [{"kind":
"leak"|"too_strict"|"too_weak"|"other", "detail": "<what and where>"}]}."""


def _skill_block(name: str, skill_md: str) -> str:
    return f"<skill name=\"{name}\">\n{skill_md}\n</skill>"


def fit_messages(name: str, skill_md: str, structure: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": FIT_SYSTEM},
            {"role": "user", "content": f"Structure: {structure}\n{STRUCTURES[structure]}\n\n{_skill_block(name, skill_md)}"}]


def build_messages(name: str, skill_md: str, structure: str, previous: Mapping[str, str] | None = None,
                   feedback: list[str] | None = None) -> list[dict[str, str]]:
    text = (f"Structure: {structure}\n{STRUCTURES[structure]}\n\n{_skill_block(name, skill_md)}\n\n"
            f"The skill will be mounted read-only at /skills/{name}/ during the agent's episode.")
    if previous is not None:
        text += ("\n\nYour previous package:\n" + json.dumps({"files": dict(previous)}, indent=1)
                 + "\n\nFix these problems and reply with the whole corrected package:\n"
                 + "\n".join(f"- {f}" for f in feedback or []))
    return [{"role": "system", "content": BUILDER_SYSTEM}, {"role": "user", "content": text}]


def review_messages(name: str, skill_md: str, structure: str, files: Mapping[str, str]) -> list[dict[str, str]]:
    listing = "\n\n".join(f"=== {path}\n{text}" for path, text in sorted(files.items()))
    return [{"role": "system", "content": REVIEWER_SYSTEM},
            {"role": "user", "content": f"Structure: {structure}\n{STRUCTURES[structure]}\n\n"
                                        f"{_skill_block(name, skill_md)}\n\nPackage:\n{listing}"}]

"""The bundled tokenizer corpus: seeded text in the shapes the policy reads and writes.

No data set can be downloaded, so the tokenizer learns its merges from generated lines shaped like
our traffic: tool calls in JSON and Qwen XML form, skill paths, shell commands, SKILL.md prose and
observation JSON. Same seed, same lines, same tokenizer.
"""

from __future__ import annotations

import json
import random

__all__ = ["build_corpus"]

_WORDS = (
    "the a to of and in for with on read write file skill task run check output input config service "
    "schedule deploy build step order rule policy format record field value error cause symptom fix "
    "when use this that each every first then after before must should never only exactly one two "
    "verify test result report table json csv yaml toml line count total sum sort filter group key "
    "workspace instruction description name path location available reasoning answer done analysis plan"
).split()
_COMMANDS = (
    "ls -la", "cat", "grep -n", "sed -n '1,40p'", "head -n 20", "tail -n 20", "python3 -c", "wc -l",
    "sort | uniq -c", "awk -F, '{print $2}'", "find . -name", "mkdir -p", "cp", "mv", "bash", "echo",
)
_TOOLS = ("read", "write", "edit", "apply_patch", "grep", "find", "ls", "exec", "process")
_EXT = ("json", "csv", "txt", "md", "yaml", "toml", "log", "py", "sh", "cfg")


def _name(rng: random.Random) -> str:
    return "-".join(rng.sample(_WORDS, rng.randint(1, 3)))


def _sentence(rng: random.Random, n: int) -> str:
    words = [rng.choice(_WORDS) for _ in range(n)]
    return " ".join(words).capitalize() + "."


def _path(rng: random.Random) -> str:
    parts = [rng.choice(("workspace", "data", "etc", "app", "logs", "out"))]
    parts += [_name(rng) for _ in range(rng.randint(0, 2))]
    return "/" + "/".join(parts) + f"/{_name(rng)}.{rng.choice(_EXT)}"


def _tool_call(rng: random.Random) -> str:
    tool = rng.choice(_TOOLS)
    if rng.random() < 0.3:
        args = {"path": f"/skills/{_name(rng)}/SKILL.md"}
        tool = "read"
    elif tool == "exec":
        args = {"command": f"{rng.choice(_COMMANDS)} {_path(rng)}"}
    elif tool == "write":
        args = {"path": _path(rng), "content": _sentence(rng, rng.randint(3, 12))}
    else:
        args = {"path": _path(rng)}
    if rng.random() < 0.2:
        inner = "".join(f"<parameter={k}>{v}</parameter>" for k, v in args.items())
        return f"<tool_call><function={tool}>{inner}</function></tool_call>"
    return "<tool_call>" + json.dumps({"name": tool, "arguments": args}) + "</tool_call>"


def build_corpus(lines: int, seed: int) -> list[str]:
    """`lines` generated lines for tokenizer training, the same for the same seed."""
    rng = random.Random(seed)
    makers = (
        lambda: _tool_call(rng),
        lambda: f"<skill_reasoning>{_sentence(rng, rng.randint(5, 15))}</skill_reasoning>",
        lambda: f"<skill><name>{_name(rng)}</name><description>{_sentence(rng, 12)}</description>"
        f"<location>/skills/{_name(rng)}/SKILL.md</location></skill>",
        lambda: f"$ {rng.choice(_COMMANDS)} {_path(rng)}",
        lambda: "<tool_response name='" + rng.choice(_TOOLS) + "'>"
        + json.dumps({"ok": rng.random() < 0.8, "output": _sentence(rng, rng.randint(2, 9))}) + "</tool_response>",
        lambda: f"---\nname: {_name(rng)}\ndescription: {_sentence(rng, 14)}\n---",
        lambda: f"{rng.randint(1, 9)}. {_sentence(rng, rng.randint(4, 14))}",
        lambda: ",".join(str(rng.randint(0, 9999)) for _ in range(rng.randint(3, 8))),
    )
    return [rng.choice(makers)() for _ in range(lines)]

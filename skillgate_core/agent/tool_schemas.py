"""The nine OpenClaw-style tools (docs/method.md 2) as JSON schemas, shown to the model in the system prompt.

The schema text is part of the evaluation fingerprint: change a description here and every
protocol that embeds it gets a new identity (`tool_schema_digest`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["TOOL_NAMES", "TOOL_SCHEMAS", "tool_schema_digest", "tool_schemas_json"]


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


_STR = {"type": "string"}
_INT = {"type": "integer"}

TOOL_SCHEMAS: tuple[dict[str, Any], ...] = (
    _tool("read", "Read a text file. offset/limit select lines (1-based offset).",
          {"path": _STR, "offset": _INT, "limit": _INT}, ["path"]),
    _tool("write", "Create or overwrite a file with content.", {"path": _STR, "content": _STR}, ["path", "content"]),
    _tool("edit", "Replace exact text in a file; each edit's oldText must occur (once unless replaceAll).",
          {"path": _STR, "edits": {"type": "array", "items": {"type": "object", "properties": {
              "oldText": _STR, "newText": _STR, "replaceAll": {"type": "boolean"}},
              "required": ["oldText", "newText"]}}}, ["path", "edits"]),
    _tool("apply_patch", "Apply a unified diff to the workspace.", {"patch": _STR}, ["patch"]),
    _tool("grep", "Search file contents with a regular expression.",
          {"pattern": _STR, "path": _STR, "glob": _STR}, ["pattern"]),
    _tool("find", "Find files whose path matches a glob pattern.", {"pattern": _STR, "path": _STR}, ["pattern"]),
    _tool("ls", "List a directory.", {"path": _STR}, []),
    _tool("exec", "Run a shell command in the episode's persistent shell (cwd and env persist).",
          {"command": _STR, "timeout": _INT, "workdir": _STR, "background": {"type": "boolean"}}, ["command"]),
    _tool("process", "Manage background jobs started with exec background=true.",
          {"action": {"type": "string", "enum": ["list", "poll", "kill"]}, "sessionId": _STR}, ["action"]),
)

TOOL_NAMES: tuple[str, ...] = tuple(t["function"]["name"] for t in TOOL_SCHEMAS)


def tool_schemas_json() -> str:
    """The schemas as the prompt shows them: one JSON object per line."""
    return "\n".join(json.dumps(t, sort_keys=True) for t in TOOL_SCHEMAS)


def tool_schema_digest() -> str:
    return hashlib.sha256(tool_schemas_json().encode()).hexdigest()

"""What a tool call returns and the one observation message a turn makes of its results.

    result = ToolResult("read", True, {"path": "/app/x.py", "content": "..."})
    format_observation([result])   # <tool_response name='read'>{"content": "...", ...}</tool_response>

Every text field (and an error) longer than the limit keeps its head and tail around
`\\n...[N characters omitted]...\\n` (`truncate_middle`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["OUTPUT_CHARS", "ToolError", "ToolResult", "format_observation", "truncate_middle"]

OUTPUT_CHARS = 16_000
"""Characters of one output field the model sees (docs/method.md 2)."""


def truncate_middle(text: str, limit: int = OUTPUT_CHARS) -> str:
    """`text` if it fits in `limit` characters, else head + `\\n...[N characters omitted]...\\n` + tail,
    `limit` characters in all (the marker included), N exact.

    >>> truncate_middle("abcdefghijklmnopqrstuvwxyz" * 4, 40)
    'abcde\\n...[95 characters omitted]...\\nwxyz'
    """
    if limit < 1:
        raise ValueError(f"limit: expected a positive number of characters, got {limit}")
    if len(text) <= limit:
        return text
    keep = limit
    marker = ""
    for _ in range(3):  # the marker's length depends on the count it reports: settle it
        marker = f"\n...[{len(text) - keep} characters omitted]...\n"
        keep = max(0, limit - len(marker))
    if keep == 0:
        return text[:limit]
    head = (keep + 1) // 2
    tail = keep - head
    return text[:head] + f"\n...[{len(text) - keep} characters omitted]...\n" + (text[-tail:] if tail else "")


@dataclass(frozen=True)
class ToolResult:
    """What one tool call did."""

    name: str
    """The tool name as the model wrote it."""
    ok: bool
    """False when the call itself was wrong (unknown tool, bad arguments, missing file, ...);
    a command that merely fails is ok=True with its exit code."""
    payload: dict[str, Any] = field(default_factory=dict)
    """JSON-able result (text fields already cut to output_chars)."""
    error: str | None = None
    """Why the call failed (None when ok)."""
    duration_s: float = 0.0
    """Host wall-clock seconds the call took."""
    opened_before: tuple[str, ...] = ()
    """Skills whose SKILL.md / README.md the sandbox's processes opened after the previous call ended and
    before this one started (a background job): no call's (docs/reads.md). Never shown to the model."""
    opened: tuple[str, ...] = ()
    """Skills whose SKILL.md / README.md were opened while this call ran, in order of first opening: this
    call's reads, whatever its command looked like (docs/reads.md). Never shown to the model."""
    consulted_before: tuple[str, ...] = ()
    """Skills any file of which (SKILL.md, a script, data) was opened or executed after the previous call
    ended and before this one started: no call's consultations (docs/reads.md). Never shown to the model."""
    consulted: tuple[str, ...] = ()
    """Skills any file of which was opened or executed while this call ran, in order of first opening (the
    read ones included): this call's consultations (docs/reads.md). Never shown to the model."""

    def observation(self, limit: int = OUTPUT_CHARS) -> dict[str, Any]:
        """The JSON object the model sees: the payload, plus `error` when the call failed."""
        body = {k: truncate_middle(v, limit) if isinstance(v, str) else v for k, v in self.payload.items()}
        if not self.ok:
            body["error"] = truncate_middle(self.error or "failed", limit)
        return body


_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]")


def format_observation(results: Sequence[ToolResult], limit: int = OUTPUT_CHARS) -> str:
    """ONE observation message for a turn: `<tool_response name='TOOL'>JSON</tool_response>` per result,
    in call order, joined by newlines (JSON: sorted keys, ensure_ascii=False, text fields cut to `limit`)."""
    parts = []
    for r in results:
        name = _SAFE_NAME.sub("_", r.name)[:64] or "_"  # the model chose it: keep the tag well-formed
        body = json.dumps(r.observation(limit), ensure_ascii=False, sort_keys=True)
        parts.append(f"<tool_response name='{name}'>{body}</tool_response>")
    return "\n".join(parts)


class ToolError(Exception):
    """The agent's mistake: becomes ToolResult(ok=False, error=str(exc))."""


"""The one tool-call parser (docs/method.md 2), shared by SFT data building, rollouts, evaluation and span detection.

Two written forms are accepted inside `<tool_call>...</tool_call>`:

    JSON      <tool_call>{"name": "read", "arguments": {"path": "/skills/x/SKILL.md"}}</tool_call>
    Qwen XML  <tool_call><function=read><parameter=path>/skills/x/SKILL.md</parameter></function></tool_call>

JSON nested deeper than `MAX_NESTING` is a malformed call (an error shown to the model), never a
RecursionError. If any JSON call parses, only the JSON calls of the turn are used (a model that writes JSON and
stray XML meant the JSON). At most `MAX_CALLS_PER_TURN` calls are used, in order of appearance;
the rest are reported as dropped. Each call keeps its character span in the response, so span
detection can map it onto tokens without re-parsing differently.

    >>> parse_tool_calls('ok <tool_call>{"name": "ls", "arguments": {}}</tool_call>').calls[0].name
    'ls'
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["MAX_CALLS_PER_TURN", "MAX_NESTING", "ParsedTurn", "ToolCall", "canonical_arguments", "nesting_depth",
           "parse_tool_calls"]

MAX_CALLS_PER_TURN = 5
"""Calls beyond this many in one turn are dropped (docs/method.md 2)."""
MAX_NESTING = 32
"""Deepest JSON nesting (arrays and objects) a call may use; a deeper one is a malformed call. Python's
json recurses once per level: a sampled turn nested 100k levels raised RecursionError, which ended the
whole lockstep batch. No tool's arguments need more than a few levels."""

_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_FUNCTION = re.compile(r"^\s*<function=([^>\s]+)>(.*)</function>\s*$", re.DOTALL)
_PARAMETER = re.compile(r"<parameter=([^>\s]+)>(.*?)</parameter>", re.DOTALL)


@dataclass(frozen=True)
class ToolCall:
    """One parsed call, with where it sits in the response text."""

    name: str
    """Tool name as written."""
    arguments: Mapping[str, Any]
    """Arguments as a JSON object."""
    start: int
    """Character offset of `<tool_call>` in the response."""
    end: int
    """Character offset just past `</tool_call>`."""
    form: Literal["json", "xml"]
    """Which written form it was parsed from."""

    def raw(self, response: str) -> str:
        """The call's text exactly as the model wrote it."""
        return response[self.start : self.end]

    def key(self) -> tuple[str, str]:
        """(name, canonical arguments): what 'the same call' means when comparing with dispatch."""
        return self.name, canonical_arguments(self.arguments)


@dataclass(frozen=True)
class ParsedTurn:
    """The calls of one assistant turn, and what could not be used."""

    calls: tuple[ToolCall, ...]
    """Calls to dispatch, in order (at most MAX_CALLS_PER_TURN)."""
    errors: tuple[str, ...] = field(default=())
    """One message per `<tool_call>` block that parsed in neither form (shown to the model)."""
    dropped: int = 0
    """Parsed calls not used: XML calls ignored because JSON ones exist, and calls past the limit."""

    @property
    def is_final(self) -> bool:
        """A turn with no tool call (and no malformed attempt at one) is the final answer."""
        return not self.calls and not self.errors


def canonical_arguments(arguments: Mapping[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


def nesting_depth(text: str) -> int:
    """The deepest [ / { nesting of JSON text, brackets inside strings not counted (linear time, no
    recursion; text that is not JSON gets a number too, the parser then says what is wrong)."""
    depth = deepest = 0
    for bracket in _BRACKET.findall(_JSON_STRING.sub('""', text)):
        depth = depth + 1 if bracket in "[{" else max(0, depth - 1)
        deepest = max(deepest, depth)
    return deepest


def _loads(text: str) -> Any:
    """json.loads, refusing (ValueError) text nested past MAX_NESTING before Python recurses into it."""
    if nesting_depth(text) > MAX_NESTING:
        raise ValueError(f"nested deeper than {MAX_NESTING} levels")
    return json.loads(text)


def _parse_json(body: str) -> tuple[str, dict[str, Any]] | str:
    if nesting_depth(body) > MAX_NESTING:
        return f"JSON nested deeper than {MAX_NESTING} levels"
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        return f"not valid JSON ({exc.msg} at char {exc.pos})"
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"]:
        return 'expected an object {"name": TOOL, "arguments": {...}}'
    args = data.get("arguments", {})
    if isinstance(args, str):  # some models double-encode the arguments object
        try:
            args = _loads(args)
        except ValueError:  # (json.JSONDecodeError is one)
            return f"arguments is a string that is not a JSON object nested at most {MAX_NESTING} levels"
    if not isinstance(args, dict):
        return f"arguments must be a JSON object, got {type(args).__name__}"
    return data["name"], args


def _xml_value(text: str) -> Any:
    # Qwen's XML form wraps values in newlines; typed values (lists, objects, numbers) are JSON.
    value = text[1:] if text.startswith("\n") else text
    value = value[:-1] if value.endswith("\n") else value
    stripped = value.strip()
    if stripped[:1] in "[{" or stripped in ("true", "false", "null") or re.fullmatch(r"-?\d+(\.\d+)?", stripped):
        try:
            return _loads(stripped)
        except ValueError:  # not JSON, or too deep: the text it is
            pass
    return value


def _parse_xml(body: str) -> tuple[str, dict[str, Any]] | None:
    match = _FUNCTION.match(body)
    if not match:
        return None
    params = {k: _xml_value(v) for k, v in _PARAMETER.findall(match.group(2))}
    return match.group(1), params


def parse_tool_calls(response: str, max_calls: int = MAX_CALLS_PER_TURN) -> ParsedTurn:
    """Parse every `<tool_call>` block of one assistant turn (see the module docstring for the rules)."""
    json_calls: list[ToolCall] = []
    xml_calls: list[ToolCall] = []
    errors: list[str] = []
    for match in _BLOCK.finditer(response):
        body = match.group(1)
        parsed = _parse_json(body)
        if isinstance(parsed, tuple):
            json_calls.append(ToolCall(parsed[0], parsed[1], match.start(), match.end(), "json"))
            continue
        xml = _parse_xml(body)
        if xml is not None:
            xml_calls.append(ToolCall(xml[0], xml[1], match.start(), match.end(), "xml"))
        else:
            errors.append(f"tool call at char {match.start()}: {parsed}")
    chosen = json_calls if json_calls else xml_calls
    dropped = (len(xml_calls) if json_calls else 0) + max(0, len(chosen) - max_calls)
    return ParsedTurn(tuple(chosen[:max_calls]), tuple(errors), dropped)

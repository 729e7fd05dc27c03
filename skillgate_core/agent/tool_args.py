"""Tool-call arguments checked against TOOL_SCHEMAS, the schemas the model is shown.

    check_arguments("read", {"path": "x.py", "offset": 2.0})   # {'path': 'x.py', 'offset': 2}
    check_arguments("read", {"path": 3})    # ToolError: argument 'path': expected string, got integer (3)

Only the schema subset the tool schemas use is checked (type, enum, items, properties, required);
an integral float passes as an integer, an explicit null for an optional argument means "not
given", and lone surrogates in strings are replaced (they cannot reach a command line or a file).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from skillgate_core.agent.tool_results import ToolError, truncate_middle
from skillgate_core.agent.tool_schemas import TOOL_NAMES, TOOL_SCHEMAS

__all__ = ["check_arguments"]

_JSON_TYPES: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (type(None), "null"), (bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
    (list, "array"), (dict, "object"),
)
"""Python type -> JSON type name, bool before int (a bool is an int to isinstance)."""


def _json_type(value: Any) -> str:
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), type(value).__name__)


def _check(value: Any, schema: Mapping[str, Any], where: str) -> Any:
    """`value` checked against the schema subset TOOL_SCHEMAS uses; returns it normalised."""
    kind = schema.get("type")
    got = _json_type(value)
    if kind == "integer" and isinstance(value, float) and value.is_integer():
        value, got = int(value), "integer"
    if kind is not None and got != kind:
        shown = "{...}" if got == "object" else json.dumps(value, ensure_ascii=False)
        raise ToolError(f"argument '{where}': expected {kind}, got {got} ({truncate_middle(shown, 60)})")
    if isinstance(value, str):
        # JSON may carry lone surrogates ("\\ud800"); they cannot be encoded for a command line or a file.
        value = value.encode("utf-8", "replace").decode("utf-8")
    if "enum" in schema and value not in schema["enum"]:
        raise ToolError(f"argument '{where}': expected one of {', '.join(map(str, schema['enum']))}, got {value!r}")
    if kind == "array" and "items" in schema:
        return [_check(item, schema["items"], f"{where}[{i}]") for i, item in enumerate(value)]
    if kind == "object" and "properties" in schema:
        return _check_object(value, schema, f"{where}.")
    return value


def _check_object(args: Mapping[str, Any], schema: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    props: Mapping[str, Any] = schema.get("properties", {})
    required = schema.get("required", [])
    takes = ", ".join(f"{k} ({v.get('type', 'any')}{'' if k in required else ', optional'})" for k, v in props.items())
    out: dict[str, Any] = {}
    for key, value in args.items():
        if key not in props:
            raise ToolError(f"unexpected argument '{prefix}{key}'; expected: {takes or 'no arguments'}")
        if value is None and key not in required:
            continue  # an explicit null for an optional argument means "not given"
        out[key] = _check(value, props[key], f"{prefix}{key}")
    for key in required:
        if key not in out:
            raise ToolError(f"missing required argument '{prefix}{key}' ({props[key].get('type', 'any')}); "
                            f"expected: {takes}")
    return out


_PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOL_SCHEMAS}


def check_arguments(name: str, arguments: Any) -> dict[str, Any]:
    """The call's arguments checked against its schema; ToolError names the argument and the type."""
    if name not in _PARAMS:
        raise ToolError(f"unknown tool '{name}'; the tools are: {', '.join(TOOL_NAMES)}")
    if not isinstance(arguments, Mapping):
        raise ToolError(f"arguments: expected an object, got {_json_type(arguments)}")
    return _check_object(arguments, _PARAMS[name])

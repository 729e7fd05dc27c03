"""Frozen dataclass configs: strict loading from TOML tables and `key=value` overrides, and digests.

Every stage takes one frozen dataclass config. Values arrive from a recipe file (TOML) and from the
command line; both go through `config_from_mapping` (skillgate_core.base.dataclass_json, "typed"), which
rejects an unknown key, a value of the wrong type or a number outside the field's declared range
(config_ranges.py) with a message naming the key, where it came from and what was expected.

`config_digest` is the sha256 of a canonical JSON form of the config (class name + values), so it is
the same in every process and under every PYTHONHASHSEED.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import inspect
import json
import textwrap
import tomllib
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from skillgate_core.base.dataclass_json import dataclass_from_json

__all__ = [
    "ConfigError",
    "canonical_json",
    "config_digest",
    "config_from_mapping",
    "config_to_dict",
    "field_docs",
    "parse_override",
    "replace_checked",
]

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

C = TypeVar("C", bound="DataclassInstance")


class ConfigError(ValueError):
    """A config value is missing, unknown or of the wrong type; the message names key and source."""


def config_to_dict(config: object) -> dict[str, Any]:
    """The config as plain JSON-able data (tuples become lists, paths become strings)."""
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise TypeError(f"expected a dataclass instance, got {type(config).__name__}")
    return {f.name: _to_jsonable(getattr(config, f.name)) for f in dataclasses.fields(config)}


def _to_jsonable(value: object) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return config_to_dict(value)
    if isinstance(value, (tuple, list)):
        return [_to_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _to_jsonable(v) for k, v in value.items()}
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float) and value != value:  # NaN has no canonical JSON form
        raise ConfigError("NaN is not allowed in a config")
    return value


def canonical_json(data: object) -> str:
    """JSON with sorted keys, no whitespace and ASCII only: one text per value, in every process."""
    return json.dumps(_to_jsonable(data), sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def config_digest(config: object) -> str:
    """sha256 (hex) of the canonical JSON of {"type": class name, "values": the config's fields}."""
    payload = {"type": type(config).__name__, "values": config_to_dict(config)}
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


def config_from_mapping(cls: type[C], values: Mapping[str, Any], source: str, prefix: str = "") -> C:
    """Build `cls` from `values`, checking every key and type (dataclass_json's "typed" strictness).

    `source` names where the values came from (a file path, "command line") and `prefix` the table
    they sit under (e.g. "sft."), so an error reads: `recipes/demo.toml: sft.lr: expected float, got
    str 'fast'`.
    """
    return dataclass_from_json(cls, values, source=source, prefix=prefix, strictness="typed", error=ConfigError)


def replace_checked(config: C, values: Mapping[str, Any], source: str, prefix: str = "") -> C:
    """Like dataclasses.replace, with the same key and type checks as `config_from_mapping`."""
    merged = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.init}
    checked = config_from_mapping(type(config), values, source, prefix)
    merged.update({k: getattr(checked, k) for k in values})
    return type(config)(**merged)


def parse_override(text: str, source: str = "command line") -> tuple[str, Any]:
    """Split `key=value`; the value is read as a TOML literal when it is one, else kept as a string.

    So `lr=1e-6` is a float, `stages=["sft"]` a list, `name=demo` the string "demo". `source` names
    where the text came from in the error.
    """
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"{source}: override '{text}' is not of the form key=value")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key, value


@cache
def field_docs(cls: type) -> dict[str, str]:
    """The attribute docstring of each field (the string literal on the line after it), inherited
    from a base class where the subclass re-declares a field (a new default) without one."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__[:-1]):  # object has no fields
        docs.update(_own_field_docs(klass))
    return docs


def _own_field_docs(cls: type) -> dict[str, str]:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):
        return {}
    docs: dict[str, str] = {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    for node, nxt in zip(body, body[1:], strict=False):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs

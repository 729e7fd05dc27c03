"""Frozen dataclass configs: strict loading from TOML tables and `key=value` overrides, and digests.

Every stage takes one frozen dataclass config. Values arrive from a recipe file (TOML) and from the
command line; both go through `config_from_mapping`, which rejects an unknown key, a value of the
wrong type or a number outside the field's declared range (config_ranges.py) with a message naming
the key, where it came from and what was expected.

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
import types
import typing
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

from skillgate_core.config_ranges import field_ranges, range_error

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

C = TypeVar("C")


class ConfigError(ValueError):
    """A config value is missing, unknown or of the wrong type; the message names key and source."""


def config_to_dict(config: Any) -> dict[str, Any]:
    """The config as plain JSON-able data (tuples become lists, paths become strings)."""
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise TypeError(f"expected a dataclass instance, got {type(config).__name__}")
    return {f.name: _to_jsonable(getattr(config, f.name)) for f in dataclasses.fields(config)}


def _to_jsonable(value: Any) -> Any:
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


def canonical_json(data: Any) -> str:
    """JSON with sorted keys, no whitespace and ASCII only: one text per value, in every process."""
    return json.dumps(_to_jsonable(data), sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def config_digest(config: Any) -> str:
    """sha256 (hex) of the canonical JSON of {"type": class name, "values": the config's fields}."""
    payload = {"type": type(config).__name__, "values": config_to_dict(config)}
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


def config_from_mapping(cls: type[C], values: Mapping[str, Any], source: str, prefix: str = "") -> C:
    """Build `cls` from `values`, checking every key and type.

    `source` names where the values came from (a file path, "command line") and `prefix` the table
    they sit under (e.g. "sft."), so an error reads: `recipes/demo.toml: sft.lr: expected float, got
    str 'fast'`.
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    hints = _type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ConfigError(
            f"{source}: unknown key '{prefix}{unknown[0]}' for {cls.__name__}; "
            f"valid keys: {', '.join(sorted(fields))}"
        )
    kwargs: dict[str, Any] = {}
    ranges = field_ranges(cls)
    for name, value in values.items():
        kwargs[name] = _coerce(value, hints[name], source, f"{prefix}{name}")
        # Checked here, not only in __post_init__, so the message can say where the value came from.
        problem = range_error(kwargs[name], ranges[name], type(kwargs[name]).__name__) if name in ranges else None
        if problem:
            raise ConfigError(f"{source}: {prefix}{name}: {problem}")
    missing = [
        n
        for n, f in fields.items()
        if n not in kwargs
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING  # type: ignore[misc]
    ]
    if missing:
        raise ConfigError(f"{source}: missing required key '{prefix}{missing[0]}' for {cls.__name__}")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:  # __post_init__ validation
        raise ConfigError(f"{source}: {prefix.rstrip('.') or cls.__name__}: {exc}") from exc


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
    """The attribute docstring of each field (the string literal on the line after it)."""
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


@cache
def _type_hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def _type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return " | ".join(repr(a) for a in get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in get_args(tp))
    if origin is tuple:
        args = get_args(tp)
        return f"tuple of {_type_name(args[0])}" if args else "tuple"
    if origin is dict:
        k, v = get_args(tp) or (Any, Any)
        return f"table of {_type_name(k)} -> {_type_name(v)}"
    if tp is type(None):
        return "none"
    return getattr(tp, "__name__", str(tp))


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}"


def _coerce(value: Any, tp: Any, source: str, key: str) -> Any:
    """Return `value` as type `tp` or raise ConfigError naming the key, source and expected type."""

    def fail() -> ConfigError:
        return ConfigError(f"{source}: {key}: expected {_type_name(tp)}, got {_describe(value)}")

    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin is Literal:
        if value in get_args(tp):
            return value
        raise fail()
    if origin in (typing.Union, types.UnionType):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, source, key)
            except ConfigError:
                continue
        raise fail()
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise fail()
        args = get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(v, args[0], source, f"{key}[{i}]") for i, v in enumerate(value))
        if len(args) != len(value):
            raise fail()
        return tuple(_coerce(v, a, source, f"{key}[{i}]") for i, (v, a) in enumerate(zip(value, args, strict=True)))
    if origin is dict:
        if not isinstance(value, Mapping):
            raise fail()
        kt, vt = get_args(tp)
        return {_coerce(k, kt, source, key): _coerce(v, vt, source, f"{key}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            raise fail()
        return config_from_mapping(tp, value, source, prefix=f"{key}.")
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise fail()
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise fail()
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise fail()
    if tp is str:
        if isinstance(value, str):
            return value
        raise fail()
    if tp is Path:
        if isinstance(value, (str, Path)):
            return Path(value)
        raise fail()
    if isinstance(tp, type) and isinstance(value, tp):
        return value
    raise fail()

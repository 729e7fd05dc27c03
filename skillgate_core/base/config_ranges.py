"""Declared value ranges of config fields: `hidden_size: PositiveInt = 64`.

A field's allowed interval is part of its type (`Annotated[int, Range(ge=1)]`), next to its default
and its docstring, so one look at a config says what it accepts. Two places enforce it:

- `config_from_mapping` (recipes, the command line, flow parameters) checks each value as it is read,
  so the error names the key, where it came from and the range:
  `command line: init-model.hidden_size: expected int >= 1, got 0`;
- each config's `__post_init__` calls `check_ranges(self)` first, so a config built in Python is
  refused too, and cross-field checks after it never see a zero they would divide by.

    @dataclass(frozen=True)
    class C:
        rate: Probability = 0.1
        \"\"\"A probability.\"\"\"

        def __post_init__(self) -> None:
            check_ranges(self)
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass
from functools import cache
from typing import Annotated, get_args, get_origin, get_type_hints

__all__ = [
    "NonNegativeFloat",
    "NonNegativeInt",
    "PositiveFloat",
    "PositiveInt",
    "Probability",
    "Range",
    "check_ranges",
    "range_error",
    "field_ranges",
]


def _num(x: float) -> str:
    return format(x, "g")


@dataclass(frozen=True)
class Range:
    """An interval a numeric config value must lie in (None: unbounded on that side)."""

    ge: float | None = None
    """Inclusive lower bound."""
    gt: float | None = None
    """Exclusive lower bound."""
    le: float | None = None
    """Inclusive upper bound."""
    lt: float | None = None
    """Exclusive upper bound."""

    def contains(self, value: float) -> bool:
        return not (
            (self.ge is not None and value < self.ge)
            or (self.gt is not None and value <= self.gt)
            or (self.le is not None and value > self.le)
            or (self.lt is not None and value >= self.lt)
        )

    def describe(self) -> str:
        """'>= 1', '> 0', 'in [0, 1]', 'in (0, 1]', ..."""
        # (bound, bracket, operator) of each side that has one
        low = (self.ge, "[", ">=") if self.ge is not None else (self.gt, "(", ">") if self.gt is not None else None
        high = (self.le, "]", "<=") if self.le is not None else (self.lt, ")", "<") if self.lt is not None else None
        if low and high:
            return f"in {low[1]}{_num(low[0])}, {_num(high[0])}{high[1]}"
        if low:
            return f"{low[2]} {_num(low[0])}"
        if high:
            return f"{high[2]} {_num(high[0])}"
        return "any value"


PositiveInt = Annotated[int, Range(ge=1)]
"""Sizes and counts that must be at least 1 (layers, heads, steps, turns)."""
NonNegativeInt = Annotated[int, Range(ge=0)]
"""Counts where 0 means none or all (as the field's doc says), and seeds."""
PositiveFloat = Annotated[float, Range(gt=0)]
"""Rates, timeouts, temperatures: strictly above 0."""
NonNegativeFloat = Annotated[float, Range(ge=0)]
"""Prices and other amounts that may be 0."""
Probability = Annotated[float, Range(ge=0, le=1)]
"""A probability or a fraction."""


def _range_of(tp: object) -> Range | None:
    if get_origin(tp) is Annotated:
        return next((m for m in get_args(tp)[1:] if isinstance(m, Range)), None)  # [1:]: the metadata
    if get_origin(tp) in (typing.Union, types.UnionType):  # `PositiveInt | None`
        return next((r for r in map(_range_of, get_args(tp)) if r is not None), None)
    return None


@cache
def field_ranges(cls: type) -> dict[str, Range]:
    """Field name -> declared Range, for the fields of dataclass `cls` that declare one."""
    hints = get_type_hints(cls, include_extras=True)
    found = {f.name: _range_of(hints[f.name]) for f in dataclasses.fields(cls)}
    return {name: r for name, r in found.items() if r is not None}


def range_error(value: object, rng: Range, type_name: str) -> str | None:
    """'expected int >= 1, got 0' when `value` is a number outside `rng`, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):  # NaN compares False with every bound
        return f"expected a finite {type_name} {rng.describe()}, got {value!r}"
    if rng.contains(value):
        return None
    return f"expected {type_name} {rng.describe()}, got {value!r}"


def check_ranges(config: object) -> None:
    """Raise ValueError naming the first field of `config` whose value is outside its declared Range."""
    cls: type = type(config)  # annotated: mypy does not take type[object] as Hashable (for @cache)
    for name, rng in field_ranges(cls).items():
        value = getattr(config, name)
        message = range_error(value, rng, type(value).__name__)
        if message:
            raise ValueError(f"{name}: {message}")

"""The one JSON -> frozen dataclass loader at its three levels of strictness (typed, exact, lenient)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from skillgate_core.base.config import ConfigError, config_from_mapping
from skillgate_core.base.config_ranges import PositiveInt
from skillgate_core.base.dataclass_json import DataclassJSONError, dataclass_from_json
from skillgate_core.ownership.records import ResumePoint, SegmentRecord
from warehouse.events import EvalTrial, EvalTrials, EventFormatError, event_from_json, event_to_json


@dataclass(frozen=True)
class Point:
    x: int
    y: int = 0


@dataclass(frozen=True)
class Shape:
    name: str
    steps: PositiveInt = 1
    path: Path = Path(".")
    origin: Point | None = None
    corners: tuple[Point, ...] = ()
    tags: tuple[str, ...] = field(default=())


def test_typed_checks_types_ranges_and_converts_losslessly():
    shape = dataclass_from_json(Shape, {"name": "a", "path": "x/y", "origin": {"x": 1}, "corners": [{"x": 2}],
                                        "tags": ["t"]}, source="s.toml", strictness="typed")
    assert shape == Shape("a", 1, Path("x/y"), Point(1), (Point(2),), ("t",))
    with pytest.raises(DataclassJSONError, match=r"^s.toml: shape.steps: expected int >= 1, got 0$"):
        dataclass_from_json(Shape, {"name": "a", "steps": 0}, source="s.toml", prefix="shape.", strictness="typed")
    with pytest.raises(DataclassJSONError, match=r"^s.toml: corners\[0\].x: expected int, got str 'one'$"):
        dataclass_from_json(Shape, {"name": "a", "corners": [{"x": "one"}]}, source="s.toml", strictness="typed")
    # config_from_mapping is this level, raising ConfigError.
    with pytest.raises(ConfigError, match=r"unknown key 'sft.nme' for Shape \(did you mean 'sft.name'\?\); valid keys: corners, name,"):
        config_from_mapping(Shape, {"nme": "a"}, "r.toml", prefix="sft.")


def test_exact_refuses_unknown_keys_and_builds_nested_dataclasses_but_keeps_values_as_written():
    shape = dataclass_from_json(Shape, {"name": "a", "steps": "3", "tags": ["t"], "corners": [{"x": 1}]},
                                source="e", strictness="exact")
    assert shape.steps == "3" and shape.tags == ["t"] and shape.corners == (Point(1),)  # no type checks
    with pytest.raises(DataclassJSONError, match="^e: unknown key 'colour' for Shape"):
        dataclass_from_json(Shape, {"name": "a", "colour": 1}, source="e", strictness="exact")
    with pytest.raises(DataclassJSONError, match="^e: missing required key 'name' for Shape$"):
        dataclass_from_json(Shape, {}, source="e", strictness="exact")
    with pytest.raises(DataclassJSONError, match="^e: unknown key 'corners\\[0\\].z' for Point"):
        dataclass_from_json(Shape, {"name": "a", "corners": [{"x": 1, "z": 2}]}, source="e", strictness="exact")


def test_lenient_drops_unknown_keys_at_every_level():
    shape = dataclass_from_json(Shape, {"name": "a", "new": 1, "origin": {"x": 1, "z": 2}}, source="l",
                                strictness="lenient")
    assert shape == Shape("a", origin=Point(1))
    with pytest.raises(DataclassJSONError, match="missing required key 'name'"):
        dataclass_from_json(Shape, {"new": 1}, source="l", strictness="lenient")


def test_the_three_users_keep_their_level():
    # ownership records: lenient, the nested resume point built too
    seg = SegmentRecord.from_json({"experiment_id": "e", "run_name": "r", "ordinal": 0, "host": "h", "pid": 1,
                                   "started_at": "t", "future_field": 1,
                                   "resumed_from": {"run_name": "p", "step": 3, "checkpoint": "/c", "extra": 0}})
    assert isinstance(seg.resumed_from, ResumePoint) and seg.resumed_from.step == 3
    # warehouse events: exact, their rows rebuilt, errors as EventFormatError
    trial = EvalTrial(row_id="r0", trial_index=0, task_id="t", benchmark="b", repeat=0, outcome="resolved")
    event = EvalTrials(eval_id="e/x", trials=(trial,))
    assert event_from_json(event_to_json(event)) == event
    data = event_to_json(event)
    data["data"]["trials"][0]["unexpected"] = 1
    with pytest.raises(EventFormatError, match="unknown key 'trials\\[0\\].unexpected' for EvalTrial"):
        event_from_json(data)

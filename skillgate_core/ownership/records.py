"""The JSON records of the ownership layout, as frozen dataclasses (what the files hold).

Each record round-trips through `to_json` / `from_json` (skillgate_core.base.dataclass_json, "lenient":
keys a newer version wrote are dropped); files are written with
skillgate_core.base.atomic.atomic_write_json. Timestamps are UTC ISO-8601 strings ending in "Z".
"""

from __future__ import annotations

import dataclasses
import json
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self, TypeVar, cast

from skillgate_core.base.dataclass_json import dataclass_from_json
from skillgate_core.ownership.errors import BadRecord, OnBadRecord

__all__ = [
    "CheckpointRef",
    "EvalRecord",
    "ExperimentRecord",
    "ExportRecord",
    "ResumePoint",
    "SegmentRecord",
    "current_host",
    "read_or_report",
    "read_record",
    "utc_now",
]

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


def utc_now() -> str:
    """Now, UTC, ISO-8601 with microseconds and a trailing Z."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def current_host() -> str:
    return socket.gethostname()


class _JSONRecord:
    """What every record does alike: `to_json` (its fields, for the file) and `from_json`."""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(cast("DataclassInstance", self))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        # Lenient: a key this version does not know (written by a newer one) is dropped, not an error.
        return dataclass_from_json(cls, data, source=f"{cls.__name__} JSON", strictness="lenient")


R = TypeVar("R", bound=_JSONRecord)


def read_record(cls: type[R], path: Path, extra: Mapping[str, Any] | None = None, **names: str) -> R:
    """The record `cls` held in `path`; BadRecord naming the file and what is wrong otherwise.

    `names`: fields that must equal the folder names they come from (an id that differs from its
    folder would make a listing name another folder, or another experiment's). `extra` fields are
    added to what the file holds (e.g. an export's path).
    """
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BadRecord(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise BadRecord(path, f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except OSError as exc:
        raise BadRecord(path, f"cannot be read ({exc.strerror or exc})") from None
    if not isinstance(data, dict):
        raise BadRecord(path, f"expected a JSON object of {cls.__name__}'s fields, got {type(data).__name__}")
    # Keys a newer writer added are dropped (lenient), but every known value is type-checked: a
    # listing sorts and compares them, and a string where a number belongs would fail it as a whole.
    known = {f.name for f in dataclasses.fields(cast("type[DataclassInstance]", cls)) if f.init}
    body = {k: v for k, v in {**data, **(extra or {})}.items() if k in known}
    try:
        record = dataclass_from_json(cls, body, source=path.name, strictness="typed")
    except (ValueError, TypeError) as exc:
        raise BadRecord(path, f"not a valid {cls.__name__} ({exc})") from None
    for field_name, folder in names.items():
        if getattr(record, field_name) != folder:
            raise BadRecord(path, f"{field_name} is {getattr(record, field_name)!r}, expected {folder!r} "
                                  "(the name of its folder)")
    return record


def read_or_report(on_bad: OnBadRecord | None, cls: type[R], path: Path, extra: Mapping[str, Any] | None = None,
                   **names: str) -> R | None:
    """`read_record`, for a listing: with `on_bad`, a bad record is handed to it and None returned
    (the listing goes on with the rest); without, BadRecord is raised."""
    try:
        return read_record(cls, path, extra, **names)
    except BadRecord as exc:
        if on_bad is None:
            raise
        on_bad(exc)
        return None


# Declarations below, not logic: each field documented where it is declared (docs/design.md, Style).
@dataclass(frozen=True)
class ExperimentRecord(_JSONRecord):
    """experiment.json: one scientific experiment (a new one only for new algorithm/data/init/hypothesis)."""

    experiment_id: str
    """Stable across resumes; the folder name."""
    algorithm: str
    """The training algorithm / profile (e.g. 'grpo:skillgate')."""
    data: str
    """Which training data (a dataset digest or name)."""
    init: str
    """The initial model (an export id, a dataset digest or a path)."""
    hypothesis: str
    """What the experiment tests, in a sentence."""
    created_at: str
    """UTC ISO time of creation."""


@dataclass(frozen=True)
class CheckpointRef:
    """A complete checkpoint found on disk."""

    run_name: str
    """The segment that wrote it."""
    step: int
    """Optimizer step."""
    path: str
    """Absolute path of its folder."""


@dataclass(frozen=True)
class ResumePoint:
    """Where a resumed segment continues from."""

    run_name: str
    """The segment holding the checkpoint."""
    step: int
    """The checkpoint's step (= the caller's expected latest step)."""
    checkpoint: str
    """Absolute path of the checkpoint folder."""


@dataclass(frozen=True)
class SegmentRecord(_JSONRecord):
    """segments/RUN_NAME/run.json: one process lifetime of an experiment."""

    experiment_id: str
    """The owning experiment."""
    run_name: str
    """The segment's name (RUN_NAME); never reused."""
    ordinal: int
    """0 for the first segment of the experiment, then 1, 2, ... in start order."""
    host: str
    """Hostname of the process."""
    pid: int
    """Process id."""
    started_at: str
    """UTC ISO start time."""
    resumed_from: ResumePoint | None = None
    """The checkpoint it resumed from; None for a fresh start."""
    ended_at: str | None = None
    """UTC ISO end time; None while running (or after a crash)."""
    exit_reason: str | None = None
    """Why it ended ('completed', 'failed: ...', 'preempted', ...); None while running."""


@dataclass(frozen=True)
class ExportRecord(_JSONRecord):
    """What model/exports/EXPORT_ID/lineage.json holds (plus the path and digest once published)."""

    export_id: str
    """The export's name (folder name)."""
    experiment_id: str
    """The owning experiment."""
    run_name: str
    """The segment whose weights these are."""
    step: int
    """Optimizer step of the weights."""
    created_at: str
    """UTC ISO time of publication."""
    lineage: Mapping[str, Any] = field(default_factory=dict)
    """Caller facts: warehouse run id, config digest, git sha, source checkpoint, ..."""
    path: str = ""
    """Absolute path of the published folder (not stored in lineage.json)."""
    weights_sha256: str = ""
    """path_sha256 of the published folder (not stored in lineage.json)."""

    def lineage_json(self) -> dict[str, Any]:
        return {
            "export_id": self.export_id,
            "experiment_id": self.experiment_id,
            "run_name": self.run_name,
            "step": self.step,
            "created_at": self.created_at,
            "lineage": dict(self.lineage),
        }


@dataclass(frozen=True)
class EvalRecord(_JSONRecord):
    """eval/EVAL_ID/eval.json: one evaluation of one export of this experiment under one protocol."""

    eval_id: str
    """The evaluation's name (folder name)."""
    experiment_id: str
    """The experiment owning the evaluated export."""
    export_id: str
    """The evaluated export (must exist in this experiment)."""
    protocol_fingerprint: str
    """The frozen protocol's fingerprint (docs/method.md 8)."""
    status: Literal["running", "completed", "incomplete", "failed"]
    """'running', 'completed', 'incomplete' (stopped with trials missing: resumable) or 'failed'
    (an error stopped it: resumable too); completed is final."""
    started_at: str
    """UTC ISO start time."""
    finished_at: str | None = None
    """UTC ISO end time of the latest attempt; None while running."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Caller facts (warehouse run id, dataset digest, sampling settings, ...)."""
    attempt: int = 1
    """1 for the first run of the evaluation, +1 on every resume (reopen_eval)."""
    detail: str = ""
    """Why the latest attempt ended as it did ('' when completed)."""
    runner: Mapping[str, Any] = field(default_factory=dict)
    """The process running the latest attempt: host, pid, start stamp (skillgate_core.base.processes)."""

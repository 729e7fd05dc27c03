"""Evaluations owned by an experiment: eval/EVAL_ID/eval.json and one folder per trial row.

An evaluation scores one published export of *this* experiment under one frozen protocol
(UnknownExport otherwise). Each trial row is published atomically as rows/ROW_ID/row.json (plus
any files the caller adds), so a reader counting rows never sees half a row.

Status: running -> completed (final) | incomplete (stopped with trials missing) | failed (an error
stopped it). An incomplete or failed evaluation, or a running one whose process is gone (killed
outright), is resumed with `reopen_eval`: status running again, attempt + 1, the rows kept; the
runner then plays only the missing trials. A running evaluation whose process is alive is refused.

    start_eval(root, "exp-1", "eval70-step-200", export_id="step-200", protocol_fingerprint="eval70_v1-mixed-4-3f2a9c01de")
    write_eval_row(root, "exp-1", "eval70-step-200", "t017-r2", {"task_id": "t017", "repeat": 2, "outcome": "resolved"})
    finish_eval(root, "exp-1", "eval70-step-200", "completed")
    reopen_eval(root, "exp-1", "eval70-step-200")    # after "incomplete" / "failed" / a killed runner
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from skillgate_core.base.atomic import atomic_create_json, atomic_write_json, building_dir, read_json
from skillgate_core.base.file_locks import file_lock
from skillgate_core.base.processes import current_process, process_state
from skillgate_core.ownership.errors import (
    EvalExists,
    EvalRowExists,
    OnBadRecord,
    OwnershipError,
    UnknownEval,
    UnknownExport,
)
from skillgate_core.ownership.experiment import open_experiment
from skillgate_core.ownership.exports import load_export
from skillgate_core.ownership.layout import ROW_FILE, ExperimentDir, check_name
from skillgate_core.ownership.records import EvalRecord, read_or_report, read_record, utc_now

__all__ = [
    "EVAL_STATUSES",
    "count_eval_rows",
    "finish_eval",
    "list_eval_rows",
    "list_evals",
    "load_eval",
    "reopen_eval",
    "runner_alive",
    "start_eval",
    "write_eval_row",
]

EVAL_STATUSES = ("running", "completed", "incomplete", "failed")


def _me() -> dict[str, Any]:
    me = current_process()
    return {"host": me.host, "pid": me.pid, "start": me.start}


def runner_alive(record: EvalRecord) -> bool:
    """The process that runs `record`'s latest attempt is still alive (or on another host: assumed so)."""
    runner = record.runner or {}
    if not runner.get("pid"):
        return False
    return process_state(str(runner.get("host", "")), int(runner["pid"]), runner.get("start")) != "gone"


def start_eval(
    root: Path,
    experiment_id: str,
    eval_id: str,
    *,
    export_id: str,
    protocol_fingerprint: str,
    extra: Mapping[str, Any] | None = None,
) -> EvalRecord:
    """Create eval/EVAL_ID/eval.json (status running) for a published export of this experiment."""
    exp, _ = open_experiment(root, experiment_id)
    check_name("EVAL_ID", eval_id)
    if load_export(exp, export_id) is None:
        raise UnknownExport(
            f"evaluation '{eval_id}': export '{export_id}' is not a published export of experiment "
            f"'{experiment_id}' (an experiment owns the evaluations of its own models only)"
        )
    record = EvalRecord(
        eval_id=eval_id, experiment_id=experiment_id, export_id=export_id,
        protocol_fingerprint=protocol_fingerprint, status="running", started_at=utc_now(),
        extra=dict(extra or {}), runner=_me(),
    )
    try:
        atomic_create_json(exp.eval_file(eval_id), record.to_json())
    except FileExistsError:
        raise EvalExists(f"evaluation '{eval_id}' of experiment '{experiment_id}' already exists") from None
    return record


# Alike in shape to segments.load_segment: each record kind has its own file, error and class.
def load_eval(exp: ExperimentDir, eval_id: str) -> EvalRecord:
    f = exp.eval_file(eval_id)
    if not f.is_file():
        raise UnknownEval(f"no evaluation '{eval_id}' in experiment '{exp.experiment_id}' ({f} missing)")
    return read_record(EvalRecord, f, eval_id=eval_id, experiment_id=exp.experiment_id)


def list_evals(exp: ExperimentDir, on_bad: OnBadRecord | None = None) -> list[EvalRecord]:
    """Every evaluation with an eval.json, by id.

    An unreadable eval.json is BadRecord, or with `on_bad` handed to it and skipped."""
    if not exp.evals.is_dir():
        return []
    found = (
        read_or_report(on_bad, EvalRecord, exp.eval_file(p.name), eval_id=p.name, experiment_id=exp.experiment_id)
        for p in sorted(exp.evals.iterdir())
        if p.is_dir() and not p.name.startswith(".") and (p / "eval.json").is_file()
    )
    return [r for r in found if r is not None]


def write_eval_row(
    root: Path,
    experiment_id: str,
    eval_id: str,
    row_id: str,
    row: Mapping[str, Any],
    files: Callable[[Path], None] | None = None,
) -> Path:
    """Publish trial row ROW_ID (row.json + whatever `files(tmp_dir)` writes); EvalRowExists if present."""
    exp, _ = open_experiment(root, experiment_id)
    record = load_eval(exp, eval_id)
    if record.status != "running":
        raise OwnershipError(f"evaluation '{eval_id}' is {record.status}; rows are added while it runs")
    final = exp.row(eval_id, row_id)
    try:
        with building_dir(final) as tmp:
            if files is not None:
                files(tmp)
            (tmp / ROW_FILE).write_text(json.dumps(dict(row), indent=2, sort_keys=True) + "\n")
    except FileExistsError:
        raise EvalRowExists(f"row '{row_id}' of evaluation '{eval_id}' already exists") from None
    return final


def list_eval_rows(exp: ExperimentDir, eval_id: str) -> dict[str, dict[str, Any]]:
    """{ROW_ID: row.json} of the published rows of an evaluation, sorted by ROW_ID."""
    rows_dir = exp.rows(eval_id)
    if not rows_dir.is_dir():
        return {}
    return {
        p.name: read_json(p / ROW_FILE)
        for p in sorted(rows_dir.iterdir())
        if p.is_dir() and not p.name.startswith(".") and (p / ROW_FILE).is_file()
    }


def count_eval_rows(exp: ExperimentDir, eval_id: str) -> int:
    """Number of published rows (without reading them)."""
    rows_dir = exp.rows(eval_id)
    if not rows_dir.is_dir():
        return 0
    return sum(1 for p in rows_dir.iterdir() if not p.name.startswith(".") and (p / ROW_FILE).is_file())


def finish_eval(
    root: Path,
    experiment_id: str,
    eval_id: str,
    status: Literal["completed", "incomplete", "failed"],
    detail: str = "",
) -> EvalRecord:
    """End the running attempt of an evaluation: completed (final), incomplete or failed (resumable)."""
    if status not in ("completed", "incomplete", "failed"):
        raise ValueError(f"status must be completed, incomplete or failed, got {status!r}")
    exp, _ = open_experiment(root, experiment_id)
    with file_lock(exp.lock_file):
        record = load_eval(exp, eval_id)
        if record.status != "running":
            raise OwnershipError(f"evaluation '{eval_id}' already {record.status}")
        record = dataclasses.replace(record, status=status, finished_at=utc_now(), detail=detail[:2000])
        atomic_write_json(exp.eval_file(eval_id), record.to_json())
    return record


def reopen_eval(root: Path, experiment_id: str, eval_id: str) -> tuple[EvalRecord, str]:
    """Resume an evaluation: (record now running with attempt + 1, the status it was reopened from).

    Allowed from incomplete and failed, and from running when its runner process is gone (then the
    returned previous status is 'running' and the caller records the lost attempt). Completed is
    final; a running evaluation whose runner lives is refused (OwnershipError)."""
    exp, _ = open_experiment(root, experiment_id)
    with file_lock(exp.lock_file):
        record = load_eval(exp, eval_id)
        previous = record.status
        if previous == "completed":
            raise OwnershipError(f"evaluation '{eval_id}' is completed; a completed evaluation is never reopened")
        if previous == "running" and runner_alive(record):
            runner = record.runner
            raise OwnershipError(
                f"evaluation '{eval_id}' is running in process {runner.get('pid')} on {runner.get('host')}; "
                "wait for it, or stop it first"
            )
        record = dataclasses.replace(record, status="running", finished_at=None, detail="",
                                     attempt=record.attempt + 1, runner=_me())
        atomic_write_json(exp.eval_file(eval_id), record.to_json())
    return record, previous

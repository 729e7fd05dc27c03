"""Recording facts: `record(*events)` and the event builders from ownership records.

`record` appends the events as one group to the spool (durable, never blocks on DuckDB), then
tries a non-blocking ingest (at most one per process per INGEST_INTERVAL_S) so the warehouse is
usually current at once; readers ingest before reading, so they always see recorded events. It
never raises because the warehouse is busy; a refused event lands in rejected/ with its reason (`skillgate warehouse
verify` lists it).

A stage run is recorded by stage_runs.py (`StageRunRecorder`), through this module.

    record(experiment_created(exp_record, root))      # after ownership.create_experiment
    record(model_exported(export_record, run_id))     # after ownership.build_export
    record(checkpoint_saved(ref, experiment_id, run_id), training_metrics(experiment_id, run_name, run_id, rows))
"""

from __future__ import annotations

import atexit
import json
import logging
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from skillgate_core.base.paths import StateLayout, state_layout
from skillgate_core.base.processes import current_process
from skillgate_core.ownership.layout import COMPLETE_MARKER, experiment_dir
from skillgate_core.ownership.records import (
    CheckpointRef,
    EvalRecord,
    ExperimentRecord,
    ExportRecord,
    SegmentRecord,
    utc_now,
)
from skillgate_core.ownership.segments import list_checkpoints
from warehouse.events import (
    CheckpointSaved,
    EvaluationStarted,
    Event,
    ExperimentCreated,
    ModelExported,
    SegmentEnded,
    SegmentStarted,
    TrainingMetric,
    TrainingMetrics,
)
from warehouse.guard import refuse_in_ray_worker
from warehouse.ids import checkpoint_key, eval_key, export_key, segment_key
from warehouse.ingest import ingest
from warehouse.spool import append_events, event_log

__all__ = [
    "INGEST_INTERVAL_S",
    "checkpoint_saved",
    "evaluation_started",
    "experiment_created",
    "left_on_disk",
    "model_exported",
    "read_metric_rows",
    "record",
    "segment_ended",
    "segment_started",
    "training_metrics",
    "training_records",
]

log = logging.getLogger(__name__)


INGEST_INTERVAL_S = 0.5
"""A process tries at most one ingest per this interval when it records (module docstring)."""

WRITER_BUDGET_S = 0.5
"""A writer's ingest starts no new batch after this long (readers must get in under a flood)."""
WRITER_BATCH = 32
"""Event files per transaction in a writer's ingest: short transactions keep a reader's wait short."""

_last_ingest: dict[Path, float] = {}
_exit_hook: list[bool] = []


def _flush_at_exit() -> None:
    for home in list(_last_ingest):
        try:
            # Budgeted like any writer ingest: what is left stays safe in the spool for the next reader.
            ingest(state_layout(home), lock_wait_s=2.0, db_wait_s=2.0, budget_s=WRITER_BUDGET_S, max_batch=WRITER_BATCH)
        except Exception as exc:  # the events stay in the spool; the next reader ingests them
            log.warning("warehouse: ingest at exit deferred (%s)", exc)


def record(*events: Event, state: StateLayout | None = None, ingest_now: bool = True) -> Path:
    """Append `events` (applied together, all or none) and maybe ingest; returns the spool file.

    With `ingest_now`, a non-blocking ingest is tried if this process has not tried one in the
    last INGEST_INTERVAL_S: opening the DuckDB file costs ~50-150 ms here, so a process recording
    in a loop must not pay it per event. Nothing is lost either way: readers ingest before they
    read, and an exit hook ingests what this process left in the spool.
    """
    refuse_in_ray_worker("record")
    state = state or state_layout()
    path = append_events(event_log(state), events)
    if not _exit_hook:
        atexit.register(_flush_at_exit)
        _exit_hook.append(True)
    now = time.monotonic()
    # A reader waiting for the file goes first: opportunistic writer ingests would otherwise keep
    # re-taking it under load and starve readers (the events stay safe in the spool meanwhile).
    if ingest_now and event_log(state).reader_is_waiting():
        ingest_now = False
    if ingest_now and now - _last_ingest.get(state.home, -INGEST_INTERVAL_S) >= INGEST_INTERVAL_S:
        _last_ingest[state.home] = now
        try:
            ingest(state, lock_wait_s=0.0, db_wait_s=0.2, budget_s=WRITER_BUDGET_S, max_batch=WRITER_BATCH)
        except Exception as exc:  # the events are safe in the spool; the next ingest applies them
            log.warning("warehouse: deferred ingest (%s: %s)", type(exc).__name__, exc)
    else:
        _last_ingest.setdefault(state.home, -INGEST_INTERVAL_S)  # remembered for the exit hook
    return path


# --- events from ownership records ---------------------------------------------------------------


def experiment_created(rec: ExperimentRecord, root: Path) -> ExperimentCreated:
    """`root` is the experiments root (SKILLGATE_HOME/experiments) the record was created under."""
    return ExperimentCreated(
        experiment_id=rec.experiment_id, algorithm=rec.algorithm, data=rec.data, init=rec.init,
        hypothesis=rec.hypothesis, uri=str(experiment_dir(root, rec.experiment_id).root), created_at=rec.created_at,
    )


def segment_started(rec: SegmentRecord, run_id: str) -> SegmentStarted:
    me = current_process()
    # The start stamp is known only for this process; a segment recorded on another's behalf has none.
    start = me.start if (rec.host, rec.pid) == (me.host, me.pid) and me.start else None
    return SegmentStarted(
        segment_id=segment_key(rec.experiment_id, rec.run_name), run_name=rec.run_name, run_id=run_id,
        ordinal=rec.ordinal, host=rec.host, pid=rec.pid, started_at=rec.started_at,
        experiment_id=rec.experiment_id,
        resumed_from_segment=segment_key(rec.experiment_id, rec.resumed_from.run_name) if rec.resumed_from else None,
        resumed_from_step=rec.resumed_from.step if rec.resumed_from else None,
        process_start=start,
    )


def segment_ended(rec: SegmentRecord) -> SegmentEnded:
    if rec.ended_at is None or rec.exit_reason is None:
        raise ValueError(f"segment '{rec.run_name}' has not ended")
    return SegmentEnded(
        segment_id=segment_key(rec.experiment_id, rec.run_name), ended_at=rec.ended_at, exit_reason=rec.exit_reason
    )


def model_exported(rec: ExportRecord, run_id: str) -> ModelExported:
    if not rec.path or not rec.weights_sha256:
        raise ValueError(f"export '{rec.export_id}' is not published (no path / digest)")
    return ModelExported(
        export_id=export_key(rec.experiment_id, rec.export_id), export_name=rec.export_id,
        experiment_id=rec.experiment_id, run_id=run_id, segment_id=segment_key(rec.experiment_id, rec.run_name),
        step=rec.step, uri=rec.path, weights_sha256=rec.weights_sha256, validated=True, created_at=rec.created_at,
    )


def checkpoint_saved(ref: CheckpointRef, experiment_id: str, run_id: str) -> CheckpointSaved:
    """A complete checkpoint (ownership.save_checkpoint / list_checkpoints); its time is its COMPLETE marker's."""
    marker = Path(ref.path) / COMPLETE_MARKER
    created = marker.read_text().strip() if marker.is_file() else ""
    return CheckpointSaved(
        checkpoint_id=checkpoint_key(experiment_id, ref.run_name, ref.step), experiment_id=experiment_id,
        segment_id=segment_key(experiment_id, ref.run_name), run_id=run_id, step=ref.step, uri=ref.path,
        created_at=created or utc_now(),
    )


def _numbers(row: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, float]]:
    for key, value in sorted(row.items()):
        if isinstance(value, Mapping):
            yield from _numbers(value, f"{prefix}{key}/")
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            yield f"{prefix}{key}", float(value)


def training_metrics(experiment_id: str, run_name: str, run_id: str,
                     rows: Iterable[Mapping[str, Any]]) -> TrainingMetrics:
    """One metric row per step per number of each metrics.jsonl row (`rows` carry "step").

    Every finite int/float field becomes a row; a nested table of counts becomes 'NAME/KEY' rows
    (rejected/zero_variance); None (a step that trained nothing has no loss), booleans, strings and
    lists are left out.
    """
    metrics = []
    for row in rows:
        step = int(row["step"])
        metrics += [TrainingMetric(step=step, name=name, value=value)
                    for name, value in _numbers({k: v for k, v in row.items() if k != "step"})]
    return TrainingMetrics(segment_id=segment_key(experiment_id, run_name), run_id=run_id, metrics=tuple(metrics))


TRAINING_STEPS_PER_EVENT = 100
"""Steps per TrainingMetrics event: a long run's curve goes in as several modest spool files."""


def read_metric_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a metrics.jsonl; a torn last line (a killed writer) is left out."""
    if not Path(path).is_file():
        return []
    rows = []
    for line in Path(path).read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and "step" in row:
            rows.append(row)
    return rows


def training_records(experiment_id: str, run_name: str, run_id: str, checkpoints: Iterable[CheckpointRef],
                     rows: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    """The event groups of a training segment's checkpoints and per-step metrics, each group to be
    recorded on its own (`record(*group)`), so a refused one (say, a checkpoint recorded before)
    keeps the others."""
    groups: list[tuple[Any, ...]] = []
    ckpts = tuple(checkpoint_saved(c, experiment_id, run_id) for c in checkpoints)
    if ckpts:
        groups.append(ckpts)
    steps = sorted({int(r["step"]) for r in rows})
    for i in range(0, len(steps), TRAINING_STEPS_PER_EVENT):
        chunk = set(steps[i:i + TRAINING_STEPS_PER_EVENT])
        groups.append((training_metrics(experiment_id, run_name, run_id, [r for r in rows if int(r["step"]) in chunk]),))
    return groups


def left_on_disk(root: Path, experiment_id: str, run_name: str, run_id: str) -> list[tuple[Any, ...]]:
    """`training_records` of what a segment that ended without reporting (failed, killed) left in its
    folder: its complete checkpoints and the rows of its metrics.jsonl."""
    exp = experiment_dir(root, experiment_id)
    return training_records(experiment_id, run_name, run_id, list_checkpoints(exp, run_name),
                            read_metric_rows(exp.metrics_file(run_name)))


def evaluation_started(
    rec: EvalRecord, eval_dir: Path, *, run_id: str | None = None, dataset_sha256: str | None = None
) -> EvaluationStarted:
    return EvaluationStarted(
        eval_id=eval_key(rec.experiment_id, rec.eval_id), export_id=export_key(rec.experiment_id, rec.export_id),
        protocol_fingerprint=rec.protocol_fingerprint, uri=str(eval_dir), started_at=rec.started_at,
        run_id=run_id, dataset_sha256=dataset_sha256,
    )

"""Recording facts: `record(*events)`, event builders from ownership records, and stage runs.

`record` appends the events as one group to the spool (durable, never blocks on DuckDB), then
tries a non-blocking ingest (at most one per process per INGEST_INTERVAL_S) so the warehouse is
usually current at once; readers ingest before reading, so they always see recorded events. It
never raises because the warehouse is busy; a refused event lands in rejected/ with its reason (`skillgate warehouse
verify` lists it).

    run = StageRunRecorder.start("sft", config, trigger="cli", flow_run_id=None)
    try:
        rec = run_stage("sft", config, inputs, layout)
    except BaseException as exc:
        run.fail(exc); raise
    run.finish(rec)       # inputs (run_input), outputs (dataset_version produced_by_run), status

A process killed outright (SIGKILL) records no end: the segment carries host + pid + the process's
start stamp, and the next `StageRunRecorder.start` on this host (or `skillgate warehouse reap`)
marks such runs interrupted (interrupted.py).

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from skillgate_core.base.config import config_digest, config_to_dict
from skillgate_core.base.interrupts import interrupt_signal
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
from skillgate_core.pipeline.run import StageRecord
from warehouse.events import (
    CheckpointSaved,
    DatasetVersion,
    EvaluationStarted,
    Event,
    ExperimentCreated,
    ModelExported,
    RunFinished,
    RunInput,
    RunStarted,
    SegmentEnded,
    SegmentStarted,
    TrainingMetric,
    TrainingMetrics,
    check_trigger,
)
from warehouse.guard import refuse_in_ray_worker
from warehouse.ids import checkpoint_key, eval_key, export_key, new_run_id, segment_key
from warehouse.ingest import ingest
from warehouse.provenance import git_state
from warehouse.spool import append_events, event_log

__all__ = [
    "INGEST_INTERVAL_S",
    "StageRunRecorder",
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


# --- stage runs ----------------------------------------------------------------------------------


def _mark_dead_runs(state: StateLayout) -> None:
    """Before a run starts: mark runs of killed processes interrupted (never stops the new run)."""
    from warehouse.interrupted import mark_interrupted  # deferred: it records through this module

    try:
        mark_interrupted(state, wait_s=1.0)
    except Exception as exc:  # the sweep is housekeeping; `skillgate warehouse reap` retries it
        log.warning("warehouse: could not mark interrupted runs (%s: %s)", type(exc).__name__, exc)


@dataclass(frozen=True)
class StageRunRecorder:
    """Records one stage execution: run + segment at start, inputs/outputs/status at the end.

    A stage outside any experiment gets a segment named after its run (one process executes it).
    A training or evaluation stage passes the ownership segment it started
    (`ownership.start_segment`), so the warehouse row is that segment, with its ordinal and resume
    point, and the run belongs to the segment's experiment. A stage that starts its experiment
    segment itself, while it runs (grpo), passes only `experiment_id`: no segment is recorded here,
    its caller records the stage's own (segment_started / segment_ended, with this run id).
    """

    run_id: str
    """The run's id."""
    stage: str
    """Stage name."""
    state: StateLayout
    """Where the warehouse and its event log live."""
    segment_id: str
    """The segment recorded for this process ('' when the stage records its own)."""

    @classmethod
    def start(
        cls,
        stage: str,
        config: object,
        *,
        trigger: str,
        flow_run_id: str | None = None,
        segment: SegmentRecord | None = None,
        experiment_id: str | None = None,
        state: StateLayout | None = None,
    ) -> StageRunRecorder:
        checked = check_trigger(trigger)
        if segment is not None and experiment_id not in (None, segment.experiment_id):
            raise ValueError(f"experiment_id {experiment_id!r} is not the segment's ({segment.experiment_id!r})")
        state = state or state_layout()
        _mark_dead_runs(state)
        run_id = new_run_id(stage)
        git = git_state()
        now = utc_now()
        seg: SegmentStarted | None
        if segment is not None:
            seg = segment_started(segment, run_id)
        elif experiment_id is None:
            me = current_process()
            seg = SegmentStarted(segment_id=run_id, run_name=run_id, run_id=run_id, ordinal=0,
                                 host=me.host, pid=me.pid, started_at=now, process_start=me.start or None)
        else:
            seg = None  # the stage starts its segment itself; the caller records it
        record(
            RunStarted(
                run_id=run_id, stage=stage, trigger=checked, git_sha=git.sha, git_dirty=git.dirty,
                config_digest=config_digest(config), config_type=type(config).__name__,
                config_body=config_to_dict(config), started_at=now, flow_run_id=flow_run_id,
                experiment_id=segment.experiment_id if segment else experiment_id,
            ),
            *([seg] if seg else []),
            state=state,
        )
        return cls(run_id=run_id, stage=stage, state=state, segment_id=seg.segment_id if seg else "")

    def finish(self, rec: StageRecord, exit_reason: str = "completed") -> None:
        """Inputs as run_input edges, outputs as dataset_versions of this run, status completed."""
        now = utc_now()
        events: list[Any] = []
        for role, sha in sorted(rec.input_digests.items()):
            events.append(DatasetVersion(sha256=sha, uri=rec.inputs[role], dataset_kind=role, created_at=now))
            events.append(RunInput(run_id=self.run_id, role=role, dataset_sha256=sha))
        for role, sha in sorted(rec.output_digests.items()):
            events.append(DatasetVersion(sha256=sha, uri=rec.outputs[role], dataset_kind=role, created_at=now,
                                         produced_by_run=self.run_id))
        events.append(RunFinished(run_id=self.run_id, status="completed", finished_at=now, reused=rec.reused,
                                  metrics=dict(rec.metrics)))
        if self.segment_id:
            events.append(SegmentEnded(segment_id=self.segment_id, ended_at=now, exit_reason=exit_reason))
        record(*events, state=self.state)

    def fail(self, error: BaseException) -> None:
        """Status failed, or interrupted when `error` is how a stop someone asked for (Ctrl-C,
        SIGTERM) ended the run (skillgate_core.base.interrupts): a stop is not a defect of the run."""
        now = utc_now()
        signal_name = interrupt_signal(error)
        status: Literal["failed", "interrupted"]
        if signal_name is not None:
            status, reason = "interrupted", "interrupted"
            text = f"interrupted by {signal_name} (stopped on request; {type(error).__name__})"
        else:
            status, reason = "failed", f"failed: {type(error).__name__}"
            text = f"{type(error).__name__}: {error}"[:2000]
        ended = [SegmentEnded(segment_id=self.segment_id, ended_at=now, exit_reason=reason)]
        record(
            RunFinished(run_id=self.run_id, status=status, finished_at=now, error=text),
            *(ended if self.segment_id else []),
            state=self.state,
        )

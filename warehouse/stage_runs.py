"""Recording one stage run: run + segment at its start, inputs/outputs/status at its end.

    run = StageRunRecorder.start("sft", config, trigger="cli", flow_run_id=None)
    try:
        rec = run_stage("sft", config, inputs, layout)
    except BaseException as exc:
        run.fail(exc); raise
    run.finish(rec)       # inputs (run_input), outputs (dataset_version produced_by_run), status

A process killed outright (SIGKILL) records no end: the segment carries host + pid + the process's
start stamp, and the next `StageRunRecorder.start` on this host (or `skillgate warehouse reap`)
marks such runs interrupted (interrupted.py). This module sits above both recording.py and
interrupted.py, so neither imports the other's caller.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

from skillgate_core.base.config import config_digest, config_to_dict
from skillgate_core.base.interrupts import cancellation, interrupt_signal
from skillgate_core.base.paths import StateLayout, state_layout
from skillgate_core.base.processes import current_process
from skillgate_core.ownership.records import SegmentRecord, utc_now
from skillgate_core.pipeline.run import StageRecord
from warehouse.events import (
    DatasetVersion,
    RunFinished,
    RunInput,
    RunStarted,
    SegmentEnded,
    SegmentStarted,
    check_trigger,
)
from warehouse.ids import new_run_id
from warehouse.interrupted import mark_interrupted
from warehouse.provenance import git_state
from warehouse.recording import record, segment_started

__all__ = ["StageRunRecorder"]

log = logging.getLogger(__name__)


def _mark_dead_runs(state: StateLayout) -> None:
    """Before a run starts: mark runs of killed processes interrupted (never stops the new run)."""
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
        """Status failed; interrupted when `error` is how a stop someone asked for (Ctrl-C, SIGTERM)
        ended the run; cancelled when it is how a cancel from the orchestrator did
        (skillgate_core.base.interrupts): neither is a defect of the run."""
        now = utc_now()
        signal_name = interrupt_signal(error)
        cancelled_by = cancellation(error)
        status: Literal["failed", "interrupted", "cancelled"]
        if cancelled_by is not None:
            status, reason, text = "cancelled", "cancelled", cancelled_by
        elif signal_name is not None:
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

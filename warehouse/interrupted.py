"""Runs whose process is gone: find them, mark them `interrupted`, remove their temp output folders.

A stage run records its start (a run, and a segment with host, pid and the process's start stamp)
and its end. A process killed outright (SIGKILL, the OOM killer, a power cut) records no end: its
run would read `running` forever and its temp output folder would stay. `mark_interrupted` finds
the running runs of this host whose process is gone (skillgate_core.base.processes, so a reused pid is
not taken for the run), records RunFinished(status="interrupted") + SegmentEnded through the spool
like any other writer, ends an experiment segment's run.json the same way and records what a
training segment left in its folder (complete checkpoints, metrics.jsonl rows: its stage task died
before it could), so `verify` sees the files and the warehouse agree, and removes the temp output
folders of dead stage runs (skillgate_core.pipeline.stage_workdirs). Runs of other hosts wait for a sweep on
their own host.

Two sweeps never record the same end twice: each holds the reap lock while it reads and records,
and a run whose end already sits in the spool (recorded, not yet ingested) counts as ended.

    report = mark_interrupted(state_layout())   # InterruptReport(marked=[DeadRun(...)], removed=[Path])
    find_dead_runs(con)                         # read-only: what `verify` and `status` report

`StageRunRecorder.start` runs it before every stage run; `skillgate warehouse reap` runs it by hand.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import duckdb

from skillgate_core.base.file_locks import file_lock
from skillgate_core.base.paths import StateLayout, state_layout
from skillgate_core.base.processes import process_state
from skillgate_core.ownership import OwnershipError, experiments_root, finish_segment
from skillgate_core.ownership.records import utc_now
from skillgate_core.pipeline.stage_workdirs import remove_dead_workdirs
from warehouse.events import EventFormatError, RunFinished, SegmentEnded
from warehouse.ingest import ingest
from warehouse.read import read_connection
from warehouse.recording import left_on_disk, record
from warehouse.spool import EventLog, event_log, list_pending, read_event_file

__all__ = ["INTERRUPTED", "DeadRun", "InterruptReport", "find_dead_runs", "mark_interrupted"]

INTERRUPTED: Final = "interrupted"
"""The status of such a run and the exit reason of its segment."""


@dataclass(frozen=True)
class DeadRun:
    """A run recorded as running whose process no longer exists."""

    run_id: str
    """The run."""
    stage: str
    """Its stage."""
    segment_id: str
    """The segment of the process that died."""
    experiment_id: str | None
    """The experiment of that segment, if any."""
    run_name: str
    """The segment's RUN_NAME (its run.json folder for an experiment segment)."""
    host: str
    """Host of the process."""
    pid: int
    """Its pid."""
    process_start: str | None
    """Its start stamp (None: recorded without one; then the pid alone was checked)."""

    def detail(self) -> str:
        how = "" if self.process_start else " (no start stamp recorded: judged by the pid alone)"
        return f"process pid {self.pid} on host {self.host} is gone{how}"


@dataclass(frozen=True)
class InterruptReport:
    """What one sweep did."""

    marked: list[DeadRun] = field(default_factory=list)
    """Runs recorded as interrupted now."""
    removed: list[Path] = field(default_factory=list)
    """Temp output folders of dead stage runs deleted now."""


def find_dead_runs(con: duckdb.DuckDBPyConnection, exclude: Collection[str] = ()) -> list[DeadRun]:
    """Running runs (segment still open) whose process is gone, judged from this host; reads only."""
    rows = con.execute(
        "select run_id, stage, segment_id, experiment_id, run_name, host, pid, process_start from v_run_process"
        " where status = 'running' and segment_ended_at is null order by run_id"
    ).fetchall()
    dead = [DeadRun(*r) for r in rows if r[0] not in exclude]
    return [d for d in dead if process_state(d.host, d.pid, d.process_start) == "gone"]


def _ends_in_spool(log_: EventLog) -> set[str]:
    """Run ids whose RunFinished was recorded but is not ingested yet."""
    ended: set[str] = set()
    for path in list_pending(log_):
        try:
            events = read_event_file(path).events
        except (OSError, EventFormatError):  # gone meanwhile (ingested) or refused later: not an end here
            continue
        ended.update(e.run_id for e in events if isinstance(e, RunFinished))
    return ended


def _end_experiment_segment(state: StateLayout, run: DeadRun) -> None:
    if run.experiment_id is None:
        return
    try:
        finish_segment(experiments_root(state), run.experiment_id, run.run_name, INTERRUPTED)
    except OwnershipError:  # already ended on disk (or not there): the warehouse end is still due
        pass
    try:
        groups = left_on_disk(experiments_root(state), run.experiment_id, run.run_name, run.run_id)
    except (OSError, OwnershipError, ValueError):  # unreadable: verify lists what is missing
        groups = []
    for group in groups:
        record(*group, state=state, ingest_now=False)


def mark_interrupted(state: StateLayout | None = None, *, wait_s: float = 10.0) -> InterruptReport:
    """Mark this host's runs whose process is gone as interrupted; remove dead runs' temp folders."""
    state = state or state_layout()
    log_ = event_log(state).ensure()
    with file_lock(log_.root / "reap.lock", timeout_s=wait_s):
        with read_connection(state, timeout_s=wait_s) as con:
            dead = find_dead_runs(con, exclude=_ends_in_spool(log_))
        for run in dead:
            now = utc_now()
            _end_experiment_segment(state, run)
            record(
                RunFinished(run_id=run.run_id, status=INTERRUPTED, finished_at=now, error=run.detail()),
                SegmentEnded(segment_id=run.segment_id, ended_at=now, exit_reason=INTERRUPTED),
                state=state, ingest_now=False,
            )
        if dead:  # now, under the lock: the next sweep reads these ends from the warehouse or the spool
            ingest(state, lock_wait_s=wait_s, db_wait_s=wait_s)
    return InterruptReport(marked=dead, removed=remove_dead_workdirs(state.artifacts))

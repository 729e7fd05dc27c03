"""Rebuild the warehouse file from the event archive: delete it, rebuild, nothing is lost.

Every row in the warehouse came from an archived event file, applied in sequence order, and events
carry their own timestamps; replaying the archive into an empty file therefore reproduces every
table (only `ingested_event.ingested_at` differs). The new file is built beside the old one under
a temp name and renamed over it, under the ingest lock: readers see the old file or the new one,
never a half-built one, and no ingest runs meanwhile. Pending spool events are then ingested as
usual.

    report = rebuild(state_layout())     # RebuildReport(files=812, failed=[], seconds=1.9, ...)

`skillgate warehouse rebuild` calls this; ingest calls `rebuild_locked` by itself when it finds the
file missing but the archive not empty. A file DuckDB cannot read (damage.py) is not overwritten but
renamed to `warehouse.duckdb.damaged-TIME` beside the new one, for whoever wants to look at it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from skillgate_core.base.file_locks import file_lock
from skillgate_core.base.paths import StateLayout, state_layout
from warehouse.damage import is_damage
from warehouse.ingest import IngestReport, apply_files, ingest
from warehouse.migrate import migrate
from warehouse.spool import EventLog, event_log, list_archived

__all__ = ["RebuildReport", "rebuild", "rebuild_locked"]

_REPLAY_BATCH = 1024


@dataclass(frozen=True)
class RebuildReport:
    """What a rebuild did."""

    files: int
    """Archived event files replayed."""
    seconds: float
    """Wall time of the replay."""
    failed: list[tuple[str, str]] = field(default_factory=list)
    """(file, reason) of archived files the fresh warehouse refused: a bug or a tampered archive."""
    after: IngestReport | None = None
    """The ingest of pending spool events that followed."""
    set_aside: Path | None = None
    """Where the old file went when DuckDB could not read it (None: it was readable, or absent)."""


def _wal(path: Path) -> Path:
    return path.with_name(path.name + ".wal")


def _set_aside_if_damaged(db: Path) -> Path | None:
    """Rename an unreadable warehouse file (and its WAL) out of the way instead of overwriting it."""
    if not db.exists():
        return None
    try:
        duckdb.connect(str(db), read_only=True).close()
        return None
    except duckdb.Error as exc:
        if not is_damage(exc):
            return None
    aside = db.with_name(f"{db.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}")
    os.replace(db, aside)
    if _wal(db).exists():
        os.replace(_wal(db), _wal(aside))
    return aside


def rebuild_locked(state: StateLayout, log_: EventLog) -> RebuildReport:
    """Replay the archive into a new file and swap it in; the caller holds the ingest lock."""
    started = time.perf_counter()
    db = state.warehouse_file
    db.parent.mkdir(parents=True, exist_ok=True)
    tmp = db.with_name(f".{db.name}.rebuild-{os.getpid()}")
    for p in (tmp, _wal(tmp)):
        p.unlink(missing_ok=True)
    files = list_archived(log_)
    failed: list[tuple[str, str]] = []
    con = duckdb.connect(str(tmp))
    try:
        con.execute("set TimeZone = 'UTC'")
        migrate(con)
        for i in range(0, len(files), _REPLAY_BATCH):
            _, refused = apply_files(con, files[i : i + _REPLAY_BATCH], None)
            failed += [(p.name, reason) for p, reason in refused]
        con.execute("checkpoint")
    except BaseException:
        con.close()
        for p in (tmp, _wal(tmp)):
            p.unlink(missing_ok=True)
        raise
    con.close()
    set_aside = _set_aside_if_damaged(db)
    # The old file's WAL belongs to the old file: drop it before the new file takes the name.
    _wal(db).unlink(missing_ok=True)
    os.replace(tmp, db)
    return RebuildReport(files=len(files), seconds=round(time.perf_counter() - started, 3), failed=failed,
                         set_aside=set_aside)


def rebuild(state: StateLayout | None = None, *, wait_s: float = 60.0) -> RebuildReport:
    """Rebuild the warehouse file from the archive, then ingest pending events."""
    state = state or state_layout()
    log_ = event_log(state).ensure()
    with file_lock(log_.ingest_lock, timeout_s=wait_s):
        report = rebuild_locked(state, log_)
    after = ingest(state, lock_wait_s=wait_s, db_wait_s=wait_s)
    return RebuildReport(files=report.files, seconds=report.seconds, failed=report.failed, after=after,
                         set_aside=report.set_aside)

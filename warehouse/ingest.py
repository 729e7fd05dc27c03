"""The one writer: move spooled events into the DuckDB file, in order, and archive them.

DuckDB lets one process open a file read-write and refuses a second at once ("Could not set
lock"). So nothing but this module opens it read-write, and it does so briefly:

  1. take the ingest flock (writers try once and go; readers wait a little): one ingester at a time;
  2. read the spool watermark, list the spool files up to it, in sequence order;
  3. open the file read-write, retrying with backoff while readers hold it; if it stays busy,
     give up and leave the events pending (they are durable; the next record or read ingests them);
  4. apply up to `max_batch` files in ONE transaction (consecutive batches share the connection;
     a writer's ingest stops after a small time budget so readers get in); if any file is
     refused, roll back and apply them one transaction per file, moving each refused file to
     rejected/ with its reason, so a bad event never blocks the ones after it (only errors of
     the machine itself, ENVIRONMENTAL, stop the ingest and leave everything pending);
  5. record each applied file's sequence in `ingested_event` in the same transaction, commit,
     close, then move the files to archive/ (a crash between commit and move is harmless: a file
     already in `ingested_event` is only moved next time, never applied twice);
  6. repeat until the spool is empty, then release the lock and look once more: an event written
     while we held the lock (its writer saw the lock taken and left) is picked up here.

If the DuckDB file is missing while the archive is not (someone deleted it), the file is first
rebuilt from the archive (below) so no new event is applied to an empty warehouse.

    report = ingest(state_layout())              # IngestReport(ingested=3, rejected=0, pending=0, busy=False)
    report = rebuild(state_layout())             # RebuildReport(files=812, failed=[], seconds=1.9, ...)

The same writer fills the file the other way, from the event archive (`rebuild`): every row in the
warehouse came from an archived event file, applied in sequence order, and events carry their own
timestamps; replaying the archive into an empty file therefore reproduces every table (only
`ingested_event.ingested_at` differs). The new file is built beside the old one under a temp name
and renamed over it, under the ingest lock: readers see the old file or the new one, never a
half-built one, and no ingest runs meanwhile. Pending spool events are then ingested as usual.
`skillgate warehouse rebuild` calls it; ingest calls `rebuild_locked` by itself when it finds the
file missing but the archive not empty. A file DuckDB cannot read (damage.py) is not overwritten but
renamed to `warehouse.duckdb.damaged-TIME` beside the new one, for whoever wants to look at it.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from skillgate_core.base.file_locks import LockTimeout, file_lock
from skillgate_core.base.paths import StateLayout, state_layout
from skillgate_core.ownership.records import utc_now
from warehouse.apply import REJECTABLE, apply_events
from warehouse.damage import WarehouseDamaged, as_os_error, damage_named, is_damage, warehouse_damaged
from warehouse.guard import refuse_in_ray_worker
from warehouse.migrate import migrate
from warehouse.spool import (
    EventFile,
    EventLog,
    event_log,
    list_archived,
    list_pending,
    read_event_file,
    seq_of,
    watermark,
)

__all__ = [
    "ENVIRONMENTAL",
    "MAX_BATCH",
    "IngestReport",
    "RebuildReport",
    "apply_files",
    "connect_rw",
    "ensure_database",
    "ingest",
    "is_lock_error",
    "rebuild",
    "rebuild_locked",
]

log = logging.getLogger(__name__)

MAX_BATCH = 256
"""Files per transaction: bounds one transaction's length."""


@dataclass(frozen=True)
class IngestReport:
    """What one ingest call did."""

    ingested: int
    """Event files applied and archived."""
    rejected: int
    """Event files refused (moved to rejected/ with a reason)."""
    pending: int
    """Event files still in the spool afterwards."""
    busy: bool
    """True when it stopped because another process held the ingest lock or the DuckDB file."""


def is_lock_error(exc: BaseException) -> bool:
    """DuckDB's 'another process (or connection config) holds this file' errors."""
    text = str(exc)
    return isinstance(exc, (duckdb.IOException, duckdb.ConnectionException)) and (
        "lock" in text.lower() or "different configuration" in text
    )


def connect_rw(path: Path, wait_s: float) -> duckdb.DuckDBPyConnection | None:
    """Open `path` read-write, retrying with backoff for up to `wait_s`; None if it stays locked.

    WarehouseDamaged when the file is not a readable database; PermissionError / OSError(EROFS)
    when it may not be written.
    """
    deadline = time.monotonic() + wait_s
    delay = 0.01
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        try:
            # One thread: the writes are small, and a smaller instance starts faster.
            con = duckdb.connect(str(path), config={"threads": 1})
            con.execute("set TimeZone = 'UTC'")
            return con
        except duckdb.Error as exc:
            if is_damage(exc):
                raise warehouse_damaged(path, exc) from None
            if not is_lock_error(exc):
                raise as_os_error(path, exc) or exc from None
            if time.monotonic() >= deadline:
                return None
            time.sleep(delay)
            delay = min(delay * 2, 0.2)


def _reject(log_: EventLog, path: Path, reason: str) -> None:
    log_.rejected.mkdir(parents=True, exist_ok=True)
    (log_.rejected / (path.name[:-5] + ".reason.txt")).write_text(reason + "\n", encoding="utf-8")
    os.replace(path, log_.rejected / path.name)
    log.warning("warehouse: rejected event file %s: %s", path.name, reason)


def _mark(con: duckdb.DuckDBPyConnection, ef: EventFile) -> None:
    con.execute(
        "insert into ingested_event values (?, ?, ?::timestamptz, ?::timestamptz)",
        [ef.seq, [e.kind for e in ef.events], ef.written_at, utc_now()],
    )


ENVIRONMENTAL: tuple[type[BaseException], ...] = (
    OSError, MemoryError, duckdb.IOException, duckdb.FatalException, duckdb.InternalException,
    duckdb.OutOfMemoryException, duckdb.InterruptException, duckdb.ConnectionException, WarehouseDamaged,
)
"""Errors of the machine, not of an event: the events stay pending and the error propagates."""


def _rollback(con: duckdb.DuckDBPyConnection) -> None:
    try:
        con.execute("rollback")
    except duckdb.Error:  # the transaction may already be gone (a fatal error invalidates it)
        pass


def _reason(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if not isinstance(exc, REJECTABLE):  # refused all the same, so it cannot block later events
        text += " (unexpected error: probably a bug in warehouse/apply.py; fix it and re-queue this file)"
    return text


def apply_files(
    con: duckdb.DuckDBPyConnection, paths: Sequence[Path], log_: EventLog | None
) -> tuple[list[Path], list[tuple[Path, str]]]:
    """Apply event files in order: one transaction for all, or one per file if any is refused.

    Returns (applied, refused with reason). Refused files are moved to rejected/ when `log_` is
    given (ingest); rebuild passes None and reports them instead. Files already applied (their
    sequence is in ingested_event) count as applied and are not applied again. Any error other
    than ENVIRONMENTAL refuses the file that caused it, so one bad file never blocks the rest.
    """
    seqs = [seq_of(p) for p in paths]
    done = {r[0] for r in con.execute("select seq from ingested_event where seq in (select unnest(?::ubigint[]))",
                                      [seqs]).fetchall()}
    parsed: list[EventFile] = []
    refused: list[tuple[Path, str]] = []
    applied: list[Path] = [p for p in paths if seq_of(p) in done]
    for p in paths:
        if seq_of(p) in done:
            continue
        try:
            parsed.append(read_event_file(p))
        except ENVIRONMENTAL:
            raise
        except Exception as exc:
            refused.append((p, _reason(exc)))
    con.execute("begin transaction")
    try:
        for ef in parsed:
            apply_events(con, ef.events)
            _mark(con, ef)
        con.execute("commit")
        applied += [ef.path for ef in parsed]
    except ENVIRONMENTAL:
        _rollback(con)
        raise
    except Exception as exc:
        _rollback(con)
        if is_damage(exc):  # the file, not the event: keep every event pending
            raise
        for ef in parsed:  # isolate the bad file(s): one transaction each, in order
            con.execute("begin transaction")
            try:
                apply_events(con, ef.events)
                _mark(con, ef)
                con.execute("commit")
                applied.append(ef.path)
            except ENVIRONMENTAL:
                _rollback(con)
                raise
            except Exception as exc:
                _rollback(con)
                if is_damage(exc):
                    raise
                refused.append((ef.path, _reason(exc)))
    if log_ is not None:
        for p, reason in refused:
            _reject(log_, p, reason)
    applied.sort(key=seq_of)
    return applied, refused


def _drain(
    state: StateLayout, log_: EventLog, db_wait_s: float, max_batch: int, budget_s: float | None
) -> tuple[int, int, bool, bool]:
    """Ingest until the spool (up to its watermark) is empty or `budget_s` is spent.

    Returns (ingested, rejected, busy, out_of_time). One connection serves all batches: opening
    a DuckDB file costs ~50-150 ms here, applying a batch a few ms.
    """
    ingested = rejected = 0
    db = state.warehouse_file
    if not db.exists() and list_archived(log_):
        rebuild_locked(state, log_)
    started = time.monotonic()
    con: duckdb.DuckDBPyConnection | None = None
    try:
        while True:
            mark = watermark(log_)
            batch = [p for p in list_pending(log_) if seq_of(p) <= mark][:max_batch]
            if not batch:
                return ingested, rejected, False, False
            if budget_s is not None and (time.monotonic() - started > budget_s or log_.reader_is_waiting()):
                return ingested, rejected, False, True  # let readers in; the rest stays pending
            if con is None:
                con = connect_rw(db, db_wait_s)
                if con is None:
                    return ingested, rejected, True, False
                migrate(con)
            with damage_named(db):
                applied, refused = apply_files(con, batch, log_)
            log_.archive.mkdir(parents=True, exist_ok=True)
            for p in applied:
                os.replace(p, log_.archive / p.name)
            ingested += len(applied)
            rejected += len(refused)
    finally:
        if con is not None:
            con.close()


def ingest(
    state: StateLayout | None = None,
    *,
    lock_wait_s: float = 0.0,
    db_wait_s: float = 0.5,
    budget_s: float | None = None,
    max_batch: int = MAX_BATCH,
) -> IngestReport:
    """Apply pending events (see the module docstring). Never raises for a busy warehouse.

    lock_wait_s: how long to wait for another ingester (0: try once; it will pick up our events).
    db_wait_s: how long to wait for readers to let go of the DuckDB file before leaving events pending.
    budget_s: stop starting new batches after this long (None: until the spool is empty). Writers
        pass a small budget so that a flood of events cannot keep readers out of the file.
    """
    refuse_in_ray_worker("ingest")
    state = state or state_layout()
    log_ = event_log(state)
    ingested = rejected = 0
    busy = False
    for _ in range(3):  # the last look after releasing the lock (module docstring, step 6)
        if not list_pending(log_):
            break
        try:
            with file_lock(log_.ingest_lock, timeout_s=lock_wait_s):
                n_in, n_rej, busy, out_of_time = _drain(state, log_, db_wait_s, max_batch, budget_s)
        except LockTimeout:
            busy = True
            break
        ingested += n_in
        rejected += n_rej
        if busy or out_of_time:
            break
    return IngestReport(ingested=ingested, rejected=rejected, pending=len(list_pending(log_)), busy=busy)


def ensure_database(state: StateLayout, wait_s: float = 10.0) -> None:
    """Create (or migrate) the warehouse file now, even with nothing to ingest."""
    log_ = event_log(state)
    with file_lock(log_.ingest_lock, timeout_s=wait_s):
        if not state.warehouse_file.exists() and list_archived(log_):
            rebuild_locked(state, log_)
        con = connect_rw(state.warehouse_file, wait_s)
        if con is None:
            raise LockTimeout(f"{state.warehouse_file} stayed locked by readers for {wait_s} s")
        try:
            migrate(con)
        finally:
            con.close()


# ---------------------------------------------------------------- rebuilding from the archive

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

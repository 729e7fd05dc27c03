"""The event log: writers append event files here; they never open the DuckDB file.

    SKILLGATE_HOME/warehouse-log/
      spool/     SEQ.json   events not yet in the warehouse (the one writer's queue)
      archive/   SEQ.json   events applied, in order: the warehouse can be rebuilt from them alone
      rejected/  SEQ.json + SEQ.reason.txt   events the warehouse refused (bad lineage), with why;
                 `requeue_rejected` puts them back once what they lacked is recorded
      tmp/       files being written
      seq, seq.lock, ingest.lock

Appending is cheap and never blocks on the warehouse: the events are serialised to a temp file
and fsynced (outside any lock), then, under a short flock, given the next sequence number and
renamed into spool/. Because allocation and rename happen under one lock, a file with sequence N
is visible before any later number is handed out: an event written after another event was
recorded (say, an export after its run) always sorts after it, whichever process wrote which.
SEQ = max(last + 1, time.time_ns()), 20 digits: it keeps increasing even if the `seq` file were
lost. A killed writer leaves at most a temp file (ignored) or a gap in the numbers (harmless).

    path = append_events(event_log(state_layout()), [RunStarted(...), SegmentStarted(...)])
"""

from __future__ import annotations

import errno
import json
import logging
import os
import secrets
import socket
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillgate_core.base.file_locks import file_lock
from skillgate_core.base.paths import StateLayout
from skillgate_core.ownership.records import utc_now
from warehouse.events import EventFormatError, event_from_json, event_to_json

__all__ = [
    "FORMAT_VERSION",
    "EventFile",
    "EventLog",
    "append_events",
    "event_log",
    "list_archived",
    "list_pending",
    "list_rejected",
    "read_event_file",
    "requeue_rejected",
    "seq_of",
    "watermark",
]

FORMAT_VERSION = 1
_SEQ_DIGITS = 20

log = logging.getLogger(__name__)
_warned: set[tuple[str, str]] = set()


# Declarations below, not logic: each field documented where it is declared (docs/design.md, Style).
@dataclass(frozen=True)
class EventLog:
    """The folders of the event log."""

    root: Path
    """SKILLGATE_HOME/warehouse-log."""

    @property
    def spool(self) -> Path:
        return self.root / "spool"

    @property
    def archive(self) -> Path:
        return self.root / "archive"

    @property
    def rejected(self) -> Path:
        return self.root / "rejected"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def seq_file(self) -> Path:
        return self.root / "seq"

    @property
    def reader_waiting(self) -> Path:
        """Touched by a reader that found the file locked; writers' opportunistic ingests yield to it."""
        return self.root / "reader-waiting"

    def reader_is_waiting(self, within_s: float = 2.0) -> bool:
        try:
            return time.time() - self.reader_waiting.stat().st_mtime < within_s
        except FileNotFoundError:
            return False

    @property
    def seq_lock(self) -> Path:
        return self.root / "seq.lock"

    @property
    def ingest_lock(self) -> Path:
        return self.root / "ingest.lock"

    def ensure(self) -> EventLog:
        for p in (self.spool, self.archive, self.rejected, self.tmp):
            p.mkdir(parents=True, exist_ok=True)
        return self


def event_log(state: StateLayout) -> EventLog:
    return EventLog(state.home / "warehouse-log")


@dataclass(frozen=True)
class EventFile:
    """One spool/archive file: a group of events applied together (all or none)."""

    seq: int
    """Sequence number (the file name)."""
    path: Path
    """Where it is now."""
    written_at: str
    """UTC ISO time the writer made it."""
    events: tuple[Any, ...]
    """The events, in order."""


def _seq_name(seq: int) -> str:
    return f"{seq:0{_SEQ_DIGITS}d}.json"


def _next_seq(log: EventLog) -> int:
    try:
        last = int(log.seq_file.read_text() or 0)
    except (FileNotFoundError, ValueError):
        last = 0
    return max(last + 1, time.time_ns())


def _publish(log: EventLog, tmp: Path) -> Path:
    """Give the written file `tmp` the next sequence number and rename it into the spool."""
    with file_lock(log.seq_lock):
        seq = _next_seq(log)
        target = log.spool / _seq_name(seq)
        os.rename(tmp, target)
        log.seq_file.write_text(str(seq))
    return target


def append_events(log: EventLog, events: Sequence[Any]) -> Path:
    """Append one group of events to the spool; returns the spool file. Never touches DuckDB."""
    if not events:
        raise ValueError("append_events: no events")
    body = {
        "format": FORMAT_VERSION,
        "written_at": utc_now(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "events": [event_to_json(e) for e in events],
    }
    log.ensure()
    tmp = log.tmp / f"{os.getpid()}-{secrets.token_hex(6)}.json"
    try:
        with open(tmp, "x", encoding="utf-8") as fh:
            fh.write(json.dumps(body, sort_keys=True, separators=(",", ":")))
            fh.flush()
            os.fsync(fh.fileno())  # durable before it is visible: "no row lost" includes power loss
        return _publish(log, tmp)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def watermark(log: EventLog) -> int:
    """The last sequence number handed out. Every spool file up to it is already renamed into place.

    An ingest lists the spool *after* reading this and applies only files up to it: a directory
    listing taken while files are being added may show a later file and miss an earlier one, but
    never misses one that existed before it started.
    """
    with file_lock(log.seq_lock):
        try:
            return int(log.seq_file.read_text() or 0)
        except (FileNotFoundError, ValueError):
            return 0


def seq_of(path: Path) -> int:
    return int(path.name[:-5])


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def _warn_skipped(path: Path, kind: str) -> None:
    """Say once per process which entry is skipped: an event log holds only regular files."""
    if (str(path), kind) in _warned:
        return
    _warned.add((str(path), kind))
    log.warning("warehouse: skipped %s in the event log: it is %s, not an event file (remove it)", path, kind)


def _list(folder: Path) -> list[Path]:
    """Event files of `folder` in sequence order: regular files only, never followed through a link.

    Anything else named like an event (a folder, a FIFO, a link, a device) is reported and skipped:
    opening a FIFO would block every reader, and a link could name any file of the host.
    """
    if not folder.is_dir():
        return []
    found = []
    for p in folder.iterdir():
        if p.suffix != ".json" or not p.name[:-5].isdigit():
            continue
        try:
            mode = p.lstat().st_mode
        except FileNotFoundError:  # moved meanwhile (ingested, rejected)
            continue
        if stat.S_ISREG(mode):
            found.append(p)
        else:
            _warn_skipped(p, _kind(mode))
    return sorted(found)


def list_pending(log: EventLog) -> list[Path]:
    """Spool files in sequence order."""
    return _list(log.spool)


def list_archived(log: EventLog) -> list[Path]:
    """Archive files in sequence order (the replay order of a rebuild)."""
    return _list(log.archive)


def list_rejected(log: EventLog) -> list[Path]:
    return _list(log.rejected)


def requeue_rejected(log: EventLog, names: Sequence[str] | None = None) -> list[Path]:
    """Append rejected event files (all, or those named) to the spool again, with new sequence
    numbers (so they come after whatever was recorded to fix them); returns the new spool files."""
    chosen = list_rejected(log) if not names else [log.rejected / n for n in names]
    log.ensure()
    moved = []
    for p in chosen:
        if not (p.is_file() and not p.is_symlink()):
            raise FileNotFoundError(f"no rejected event file {p.name} (a regular file in {log.rejected})")
        tmp = log.tmp / f"requeue-{p.name}"
        os.replace(p, tmp)
        moved.append(_publish(log, tmp))
        p.with_name(p.name[:-5] + ".reason.txt").unlink(missing_ok=True)
    return moved


def _read_regular(path: Path) -> str:
    """The text of `path` if it is a regular file, opened without following a link or blocking."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise EventFormatError(f"{path}: a symbolic link, not an event file") from None
        if exc.errno in (errno.EISDIR, errno.ENXIO, errno.EWOULDBLOCK):
            raise EventFormatError(f"{path}: not a regular file, not an event file") from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):  # checked on what was opened: the entry may have changed since it was listed
        os.close(fd)
        raise EventFormatError(f"{path}: {_kind(mode)}, not an event file")
    with os.fdopen(fd, "rb") as fh:
        data = fh.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EventFormatError(f"{path.name}: not an event file ({exc})") from None


def read_event_file(path: Path) -> EventFile:
    """Parse one event file; EventFormatError if it is not a valid one (or not a regular file)."""
    text = _read_regular(path)
    try:
        seq = seq_of(path)
        body = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise EventFormatError(f"{path.name}: not an event file ({exc})") from None
    if not isinstance(body, dict) or body.get("format") != FORMAT_VERSION or not isinstance(body.get("events"), list):
        raise EventFormatError(f"{path.name}: unknown event file format {body.get('format') if isinstance(body, dict) else None!r}")
    events = tuple(event_from_json(e) for e in body["events"])
    if not events:
        raise EventFormatError(f"{path.name}: no events")
    return EventFile(seq=seq, path=path, written_at=str(body.get("written_at")), events=events)

"""Prefect's temporary servers of killed runs: found and stopped by the next entry point.

Without PREFECT_API_URL a run starts a temporary Prefect server (a uvicorn child process, ~200 MB).
Its run stops it on the way out, but a SIGKILLed run cannot: the server would run forever. So, as
for sandboxes and stage temp folders, ownership is recorded and checked by the next run:

- `mark_owner()` puts this process's identity (skillgate_core.base.processes: host, pid, start stamp) in
  SKILLGATE_PREFECT_OWNER; Prefect copies the environment into the server it spawns, so every
  server carries its owner in /proc/PID/environ, where no file in the state dir can be planted.
- `reap_orphaned_servers()` stops each temporary server (PREFECT__SERVER_EPHEMERAL=1, an owner
  recorded) whose owner is gone: SIGTERM, then SIGKILL. A server of a live run, of another host
  or pid namespace, or of another user (whose environ cannot be read) is left alone.
"""

from __future__ import annotations

import json
import os
import signal
import time
import warnings
from dataclasses import asdict
from pathlib import Path

from skillgate_core.base.processes import ProcessIdentity, current_process, process_start, process_state

__all__ = ["OWNER_ENV", "mark_owner", "orphaned_servers", "reap_orphaned_servers"]

OWNER_ENV = "SKILLGATE_PREFECT_OWNER"
_EPHEMERAL = b"PREFECT__SERVER_EPHEMERAL=1"


def mark_owner() -> None:
    """Record this process as the owner of any temporary server it starts (always: a parent's
    identity inherited through the environment is not ours)."""
    os.environ[OWNER_ENV] = json.dumps(asdict(current_process()), sort_keys=True)


def _owner(environ: list[bytes]) -> ProcessIdentity | None:
    prefix = OWNER_ENV.encode() + b"="
    for item in environ:
        if item.startswith(prefix):
            try:
                data = json.loads(item[len(prefix):])
                return ProcessIdentity(host=str(data["host"]), pid=int(data["pid"]), start=str(data["start"]))
            except (ValueError, KeyError, TypeError):
                return None  # not written by mark_owner: never guess
    return None


def orphaned_servers() -> list[tuple[int, str]]:
    """(pid, start stamp) of every readable temporary Prefect server whose owner process is gone."""
    found = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile, or another user's
            continue
        if _EPHEMERAL not in environ:
            continue
        owner = _owner(environ)
        if owner is not None and process_state(owner.host, owner.pid, owner.start) == "gone":
            found.append((int(entry.name), process_start(int(entry.name))))
    return found


def _signal(pid: int, start: str, sig: int) -> bool:
    """Send `sig` to `pid` only while it is still the process seen (a reused pid is left alone)."""
    if process_start(pid) != start:
        return False
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def reap_orphaned_servers(grace_s: float = 5.0) -> list[int]:
    """Stop the orphaned temporary servers; returns their pids. Never fails the run (a warning)."""
    try:
        servers = orphaned_servers()
        for pid, start in servers:
            _signal(pid, start, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for pid, start in servers:
            while process_start(pid) == start and time.monotonic() < deadline:
                time.sleep(0.1)
            _signal(pid, start, signal.SIGKILL)
        return [pid for pid, _ in servers]
    except Exception as exc:  # reaping is housekeeping: the run itself must go on
        warnings.warn(f"reaping orphaned Prefect servers failed: {type(exc).__name__}: {exc}", stacklevel=2)
        return []

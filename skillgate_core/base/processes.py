"""Which process is this, and is that one still running? Host + pid + a start stamp, so a reused pid
is never mistaken for the process that died.

A pid alone names a process only while it lives: once it exits the kernel may hand the number to
an unrelated process. The start stamp `BOOT_ID/PID_NAMESPACE/START_TICKS` (all from /proc) pins
one process: the boot (a reboot kills everything), the pid namespace the pid is counted in, and the
process's start time in clock ticks since boot (field 22 of /proc/PID/stat).

    me = current_process()                    # ProcessIdentity(host="vm", pid=4242, start="fb6b.../4026531836/90210")
    process_state(me.host, me.pid, me.start)  # "alive"; "gone" once it exits; "unknown" on another host
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

__all__ = ["ProcessIdentity", "ProcessState", "current_process", "pid_exists", "process_start", "process_state"]

ProcessState = Literal["alive", "gone", "unknown"]


@dataclass(frozen=True)
class ProcessIdentity:
    """One process, named so that its pid being reused later is not mistaken for it."""

    host: str
    """Hostname it runs on."""
    pid: int
    """Process id (in its pid namespace)."""
    start: str
    """BOOT_ID/PID_NAMESPACE/START_TICKS; empty where /proc cannot tell (then only the pid is checked)."""


@cache
def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


@cache
def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
    except OSError:
        return ""


def _start_ticks(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]  # after the command name, which may hold spaces


def process_start(pid: int) -> str:
    """The start stamp of `pid` as seen from this process ('' when it does not exist or /proc is absent)."""
    ticks = _start_ticks(pid)
    if not ticks or not _boot_id() or not _pid_namespace():
        return ""
    return f"{_boot_id()}/{_pid_namespace()}/{ticks}"


def current_process() -> ProcessIdentity:
    pid = os.getpid()
    return ProcessIdentity(host=socket.gethostname(), pid=pid, start=process_start(pid))


def pid_exists(pid: int) -> bool:
    """Whether some process has this pid now (any owner); not which one: see `process_state`."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True


def process_state(host: str, pid: int, start: str | None) -> ProcessState:
    """Whether the process (host, pid, start stamp) is still running, as far as this process can see.

    "unknown" when it ran on another host or in another pid namespace (its pid means nothing here).
    Without a start stamp (recorded where /proc was absent) a live pid counts as alive: the safe side.
    """
    if host != socket.gethostname():
        return "unknown"
    if start:
        boot, _, rest = start.partition("/")
        namespace, _, ticks = rest.rpartition("/")
        if boot != _boot_id():
            return "gone"  # the machine rebooted since: nothing from that boot still runs
        if namespace != _pid_namespace():
            return "unknown"
        return "alive" if _start_ticks(pid) == ticks else "gone"
    return "alive" if pid_exists(pid) else "gone"

"""Ctrl-C as a terminal sends it: a child in its own process group, SIGINT to the whole group.

    with own_group([sys.executable, "-c", CODE], env=env) as child:
        out, err, took = ctrl_c(child, ready=lambda: server.requests >= 1, wait_s=120, exit_s=60)

`own_group` starts the child as a terminal's foreground job (its own session and group) and SIGKILLs
the group on the way out if it still runs; `ctrl_c` waits until `ready()` (failing if the child ends
first or `wait_s` passes), sends SIGINT to the group, and returns the child's output and how many
seconds it took to exit after the signal.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

__all__ = ["ctrl_c", "own_group", "signal_when_ready"]


@contextmanager
def own_group(args: Sequence[str], *, env: Mapping[str, str], cwd: Path | None = None,
              merge_stderr: bool = False, quiet: bool = False) -> Iterator[subprocess.Popen[str]]:
    """The child, in its own process group; killed with its group on the way out if still running.
    quiet: its output goes nowhere (a chatty child would block on a pipe nobody reads until it is signalled)."""
    out = subprocess.DEVNULL if quiet else subprocess.PIPE
    err = subprocess.DEVNULL if quiet else subprocess.STDOUT if merge_stderr else subprocess.PIPE
    child = subprocess.Popen(list(args), cwd=cwd, env=dict(env), stdout=out, stderr=err, text=True,
                             start_new_session=True)
    try:
        yield child
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()


def ctrl_c(child: subprocess.Popen[str], *, ready: Callable[[], bool], wait_s: float, exit_s: float,
           settle_s: float = 0.0) -> tuple[str, str, float]:
    """Once `ready()`, SIGINT the child's group; (stdout, stderr or "", seconds until it exited)."""
    return signal_when_ready(child, signal.SIGINT, ready=ready, wait_s=wait_s, exit_s=exit_s, settle_s=settle_s)


def signal_when_ready(child: subprocess.Popen[str], sig: signal.Signals, *, ready: Callable[[], bool], wait_s: float,
                      exit_s: float, settle_s: float = 0.0) -> tuple[str, str, float]:
    """Once `ready()`, send `sig` to the child's group (SIGINT: Ctrl-C; SIGTERM: `timeout` at a budget's end);
    (stdout or "", stderr or "", seconds until it exited)."""
    deadline = time.monotonic() + wait_s
    while not ready():
        if child.poll() is not None or time.monotonic() > deadline:
            out, err = child.communicate()
            raise AssertionError(f"never ready (exit {child.returncode}):\n{out}\n{err or ''}")
        time.sleep(0.1)
    time.sleep(settle_s)
    sent = time.monotonic()
    os.killpg(child.pid, sig)  # as a terminal (or `timeout`) does: the child and everything in its group
    out, err = child.communicate(timeout=exit_s)
    return out or "", err or "", time.monotonic() - sent

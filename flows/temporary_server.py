"""Prefect's temporary server under a Ctrl-C: it outlives the interrupt long enough to record it.

A terminal sends Ctrl-C's SIGINT to every process of the foreground group, and the temporary server
(a uvicorn child of the run) is one of them: it died at once, so the run's flow runs could not be
set Crashed and stayed Running in the UI forever, while the client retried its calls for minutes.
`shield_from_terminal_interrupt()` starts every later temporary server with SIGINT blocked (a
blocked signal stays blocked across fork and exec; uvicorn only sets handlers), so the first Ctrl-C
reaches the run alone: the run ends its flow runs through the still-running server, then stops the
server (Prefect's exit hook: SIGTERM, which stays unblocked). `kill_temporary_servers()` is the
forced way out (a second Ctrl-C); a server left behind by a killed run is stopped by the next run
(tasks/prefect_servers.py).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

__all__ = ["kill_temporary_servers", "shield_from_terminal_interrupt"]

_SHIELDED = "_skillgate_shielded"


def shield_from_terminal_interrupt() -> None:
    """Start this process's later Prefect temporary servers with SIGINT blocked (idempotent). With
    PREFECT_API_URL set no temporary server starts: nothing to do (and ~1.5 s of imports saved)."""
    if os.environ.get("PREFECT_API_URL"):
        return
    from prefect.server.api.server import SubprocessASGIServer

    original = SubprocessASGIServer._run_uvicorn_command
    if getattr(original, _SHIELDED, False):
        return

    def run_shielded(self: Any) -> Any:
        before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            return original(self)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, before)

    setattr(run_shielded, _SHIELDED, True)
    SubprocessASGIServer._run_uvicorn_command = run_shielded  # type: ignore[method-assign]


def kill_temporary_servers() -> None:
    """SIGKILL every temporary server this process started (nothing waits; never raises)."""
    module = sys.modules.get("prefect.server.api.server")
    if module is None:
        return
    for server in list(module.SubprocessASGIServer._instances.values()):
        process = getattr(server, "server_process", None)
        if process is not None:
            try:
                process.kill()
            except OSError:
                pass

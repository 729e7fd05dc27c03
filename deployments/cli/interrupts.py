"""Ctrl-C in a long command: the first one stops the work cleanly within seconds, a second one forces.

    with stop_on_interrupt(console, "the running stage, its sandboxes and Ray workers, the Prefect server"):
        ...   # SIGINT or SIGTERM -> SignalStop raised here, once

First SIGINT (or SIGTERM): one line saying what is being stopped, the signal recorded
(skillgate_core.base.interrupts: the warehouse then records the run `interrupted by SIGINT`, not failed),
and SignalStop raised in the main thread, which unwinds the work: each stage, sandbox group and Ray
launch stops what it started on the way out, and the entry flow's runs end Crashed ("aborted by an
interrupt signal") through the Prefect server, which the Ctrl-C did not reach
(flows/temporary_server.py). A second one: one more line, the temporary Prefect server killed, and
the process exits at once (130); what it leaves (sandboxes, stage temp folders, runs left `running`)
is cleaned up and marked interrupted by the next run or `skillgate warehouse reap`.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console

from skillgate_core.base.interrupts import SignalStop, request_stop, stop_requested

__all__ = ["EXIT_INTERRUPTED", "stop_on_interrupt"]

EXIT_INTERRUPTED = 130
"""The shell's code for a command ended by SIGINT."""


@contextmanager
def stop_on_interrupt(console: Console, what: str, force: Callable[[], None] = lambda: None) -> Iterator[None]:
    """Handle SIGINT/SIGTERM while the block runs (see the module docstring); `force()` runs before a
    forced exit. Outside the main thread nothing is installed (signals reach only the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:  # noqa: ARG001
        name = signal.Signals(signum).name
        if stop_requested() is not None:
            console.print(f"[red]{name} again[/]: forced exit now; what is left is cleaned up by the next run "
                          "(or `skillgate warehouse reap`)", highlight=False, soft_wrap=True)
            try:
                force()
            finally:
                os._exit(EXIT_INTERRUPTED)
        request_stop(name)
        console.print(f"[yellow]{name}[/]: stopping {what}; Ctrl-C again to force", highlight=False, soft_wrap=True)
        raise SignalStop(name)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)

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

A first signal that lands inside a finalizer (a weakref callback, a `__del__`: garbage collection can run
them at any bytecode) raises SignalStop where Python cannot propagate it: Python would print "Exception
ignored in ..." with a traceback and go on as if nothing had happened. Within the block such a SignalStop
is caught by `sys.unraisablehook` and delivered again a moment later (`_thread.interrupt_main` from a timer
thread), so it is raised in the code the finalizer interrupted, printing nothing more and not counting as a
second Ctrl-C.
"""

from __future__ import annotations

import _thread
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console

from skillgate_core.base.interrupts import SignalStop, request_stop, stop_requested

__all__ = ["EXIT_INTERRUPTED", "stop_on_interrupt"]

EXIT_INTERRUPTED = 130
"""The shell's code for a command ended by SIGINT."""

REDELIVER_S = 0.02
"""How long after a finalizer swallowed the first stop it is raised again (from a timer thread)."""


@contextmanager
def stop_on_interrupt(console: Console, what: str, force: Callable[[], None] = lambda: None) -> Iterator[None]:
    """Handle SIGINT/SIGTERM while the block runs (see the module docstring); `force()` runs before a
    forced exit. Outside the main thread nothing is installed (signals reach only the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    swallowed: list[str] = []  # a first stop a finalizer swallowed, to raise again (see the module docstring)

    def redeliver(signum: int) -> None:
        # from another thread, a moment later: asked from the main thread, the signal would be handled at once,
        # still inside the hook (or the handler), and be swallowed again
        timer = threading.Timer(REDELIVER_S, _thread.interrupt_main, args=(signum,))
        timer.daemon = True
        timer.start()

    def handler(signum: int, frame: Any) -> None:  # noqa: ARG001
        name = signal.Signals(signum).name
        if swallowed:
            if frame is not None and frame.f_code is unraisable.__code__:
                redeliver(signum)  # still in the hook: again a moment later
                return
            raise SignalStop(swallowed.pop())
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

    def unraisable(info: Any) -> None:
        if isinstance(info.exc_value, SignalStop):  # swallowed by a finalizer (maybe again): raise it once more
            if not swallowed:
                swallowed.append(info.exc_value.signal)
            redeliver(signal.Signals[info.exc_value.signal])
            return
        previous_hook(info)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    previous_hook, sys.unraisablehook = sys.unraisablehook, unraisable
    try:
        yield
    finally:
        sys.unraisablehook = previous_hook
        for s, h in previous.items():
            signal.signal(s, h)

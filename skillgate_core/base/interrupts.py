"""A stop someone asked for (Ctrl-C, SIGTERM), told apart from a failure, with the signal that asked.

The command line's handler (deployments/cli/interrupts.py) records the first signal here and raises
`SignalStop(NAME)` in the main thread; whatever records the end of a run (the warehouse's stage-run
recorder, the evaluation runner) asks `interrupt_signal(exc)` and records `interrupted by SIGINT`
instead of a failure. A stop can surface as another exception (a library that turns the interrupt
into SystemExit, a worker that died of the same Ctrl-C): once a stop was requested, any exception
is read as that stop.

    request_stop("SIGINT")          # in the signal handler, before raising SignalStop("SIGINT")
    interrupt_signal(exc)           # "SIGINT" / "SIGTERM" if exc ended the work because of a stop, else None

A cancel from an orchestrator (the Prefect UI's Cancel: the worker sends SIGTERM after telling the
flow-run process that it is a cancel) is a third kind of end: neither a failure nor a stop of this
process's own. The library never imports the orchestrator, so the orchestrator's layer adds a reader
that recognises its cancels (tasks/cancellation.py), and the recorders ask `cancellation(exc)`:

    read_cancellations(reader)      # reader(exc) -> "cancelled from Prefect (...)" or None
    cancellation(exc)               # the first reader's words, or None
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["SignalStop", "cancellation", "interrupt_signal", "read_cancellations", "request_stop", "stop_requested"]

_requested: list[str] = []
"""The signals received in this process, first first (a list: set from a signal handler)."""

_cancel_readers: list[Callable[[BaseException], str | None]] = []
"""Who can tell a cancel from a crash: each takes the exception that ended the work."""


class SignalStop(KeyboardInterrupt):
    """Raised in the main thread by a handler of SIGINT or SIGTERM: stop as Ctrl-C does."""

    @property
    def signal(self) -> str:
        return str(self.args[0]) if self.args else "SIGINT"


def request_stop(signal_name: str) -> None:
    """Record that `signal_name` asked this process to stop."""
    _requested.append(signal_name)


def stop_requested() -> str | None:
    """The first signal that asked this process to stop, or None."""
    return _requested[0] if _requested else None


def interrupt_signal(exc: BaseException | None) -> str | None:
    """The signal name when `exc` is how a requested stop ended the work (else None: a failure)."""
    if isinstance(exc, SignalStop):
        return exc.signal
    if stop_requested() is not None:
        return stop_requested()
    if isinstance(exc, KeyboardInterrupt):  # Python's own SIGINT handler
        return "SIGINT"
    return None


def read_cancellations(reader: Callable[[BaseException], str | None]) -> None:
    """Let `reader` say whether an exception is how a cancel ended the work (once per reader)."""
    if reader not in _cancel_readers:
        _cancel_readers.append(reader)


def cancellation(exc: BaseException | None) -> str | None:
    """Who cancelled, in words, when `exc` is how an orchestrator's cancel ended the work (else None)."""
    if exc is None:
        return None
    for reader in _cancel_readers:
        if said := reader(exc):
            return said
    return None

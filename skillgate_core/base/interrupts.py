"""A stop someone asked for (Ctrl-C, SIGTERM), told apart from a failure, with the signal that asked.

The command line's handler (deployments/cli/interrupts.py) records the first signal here and raises
`SignalStop(NAME)` in the main thread; whatever records the end of a run (the warehouse's stage-run
recorder, the evaluation runner) asks `interrupt_signal(exc)` and records `interrupted by SIGINT`
instead of a failure. A stop can surface as another exception (a library that turns the interrupt
into SystemExit, a worker that died of the same Ctrl-C): once a stop was requested, any exception
is read as that stop.

    request_stop("SIGINT")          # in the signal handler, before raising SignalStop("SIGINT")
    interrupt_signal(exc)           # "SIGINT" / "SIGTERM" if exc ended the work because of a stop, else None
"""

from __future__ import annotations

__all__ = ["SignalStop", "interrupt_signal", "request_stop", "stop_requested"]

_requested: list[str] = []
"""The signals received in this process, first first (a list: set from a signal handler)."""


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

"""Facts a stage reports while it runs, for whoever runs it (the Prefect task records them).

A stage is a pure function over paths, but a long one creates things its caller should know about
as they happen, not only once it returns: the grpo stage starts an experiment segment (the
warehouse shows it running at once, and a crash still has its segment recorded) and ends it.
`report(kind, **facts)` hands each fact to the listener the caller installed with `listening`; it
is a context variable, so nothing is global and a stage nobody listens to (a notebook, a test)
reports into the void. A listener that raises stops the stage: the caller wanted that fact kept.

    with listening(lambda kind, facts: print(kind, facts)):
        run_stage("grpo", config, inputs, layout)     # -> segment_started {...}, segment_ended {...}
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

__all__ = ["Listener", "listening", "report"]

Listener = Callable[[str, Mapping[str, Any]], None]
"""listener(kind, facts)."""

_LISTENER: ContextVar[Listener | None] = ContextVar("skillgate_stage_listener", default=None)


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Send what stages report inside this block to `listener`."""
    token = _LISTENER.set(listener)
    try:
        yield
    finally:
        _LISTENER.reset(token)


def report(kind: str, **facts: object) -> None:
    """Hand one fact to the current listener, if any."""
    listener = _LISTENER.get()
    if listener is not None:
        listener(kind, facts)

"""Progress of long CLI work on stderr: a live bar on a terminal, one final line per phase otherwise.

    with phase_progress(("writing task packages", "tasks"), ("validity gate", "tasks")) as (write, gate):
        build_bench(..., progress=write, gate_progress=gate)     # each callback takes (done, total)

On a terminal every phase gets its bar (rich) once it reports for the first time, and the bars stay
when done. Anywhere else (a pipe, a log file, CI) nothing is drawn while the work runs, and each
phase prints one line when it completes, or when the command stops before that:

    validity gate: 3/3 tasks in 41.2 s

stdout is left alone, so `--json` output stays parseable.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

__all__ = ["Update", "phase_progress"]

Update = Callable[[int, int], None]
"""(done, total) of one phase."""


@dataclass
class _Phase:
    label: str
    unit: str
    done: int = 0
    total: int | None = None
    started: float | None = None
    finished: float | None = None
    task: TaskID | None = None
    reported: bool = False

    def line(self) -> str:
        end = self.finished or time.monotonic()
        seconds = end - (self.started or end)
        stopped = "" if self.total is not None and self.done >= self.total else " (stopped)"
        return f"{self.label}: {self.done}/{self.total if self.total is not None else '?'} {self.unit} " \
               f"in {seconds:.1f} s{stopped}"


@contextmanager
def phase_progress(*phases: tuple[str, str], console: Console | None = None) -> Iterator[list[Update]]:
    """One (done, total) callback per (label, unit) phase; see the module docstring for what shows."""
    err = console or Console(stderr=True)
    state = [_Phase(label, unit) for label, unit in phases]
    live = err.is_terminal
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[unit]}"), TimeElapsedColumn(), console=err, transient=False,
                   disable=not live)

    def updater(phase: _Phase) -> Update:
        def update(done: int, total: int) -> None:
            now = time.monotonic()
            phase.started = phase.started or now
            phase.done, phase.total = done, total
            if live:
                if phase.task is None:
                    phase.task = bar.add_task(phase.label, total=total, unit=phase.unit)
                bar.update(phase.task, completed=done, total=total)
            if done >= total and phase.finished is None:
                phase.finished = now
                if not live and not phase.reported:
                    phase.reported = True
                    err.print(phase.line(), highlight=False, soft_wrap=True)
        return update

    with bar:
        try:
            yield [updater(p) for p in state]
        finally:
            if not live:  # a phase that started but never completed still says how far it got
                for p in state:
                    if p.started is not None and not p.reported:
                        p.reported = True
                        err.print(p.line(), highlight=False, soft_wrap=True)

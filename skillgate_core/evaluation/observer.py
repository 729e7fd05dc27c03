"""Who hears about an evaluation while it runs: the runner reports, an observer records.

The library never imports the warehouse; the Prefect tasks and the CLI install an observer that
records what the runner reports (warehouse/evaluations.py), for the duration of a call:

    with observing(WarehouseEvalObserver(run_id=...)):
        run_stage("eval70", config, inputs, layout)      # the runner inside reports to it

Without one, `NullObserver` ignores everything.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from skillgate_core.evaluation.protocol import EvalProtocol
from skillgate_core.ownership.records import EvalRecord

__all__ = ["EvalInfo", "EvalObserver", "NullObserver", "current_observer", "observing"]


@dataclass(frozen=True)
class EvalInfo:
    """One evaluation attempt, as the runner starts it."""

    root: Path
    """The experiments root."""
    record: EvalRecord
    """eval.json as this attempt started it (status running)."""
    eval_dir: Path
    """eval/EVAL_ID folder."""
    protocol: EvalProtocol
    """The fingerprinted protocol."""
    method: str
    """The rows' method label."""
    policy: str
    """Model path or endpoint URL."""
    tag: str
    """Evaluation tag ('' or e.g. nightly-2026-11-30)."""
    bench: Path
    """The bench folder."""
    trials_total: int
    """Trials the protocol has."""
    previous_status: str | None = None
    """None for a fresh evaluation; else the status it was resumed from."""
    created: tuple[str, ...] = field(default=())
    """What resolving the policy created in the owning experiment ('experiment', 'segment', 'export')."""


class EvalObserver(Protocol):
    def started(self, info: EvalInfo) -> None:
        """An attempt began (fresh or resumed)."""

    def trials(self, info: EvalInfo, rows: Sequence[Mapping[str, Any]]) -> None:
        """Rows were published (each carries row_id and trial_index besides the trial columns)."""

    def ended(self, info: EvalInfo, record: EvalRecord, summary: Mapping[str, Any] | None) -> None:
        """The attempt ended: record.status is completed, incomplete or failed; summary when completed."""


class NullObserver:
    def started(self, info: EvalInfo) -> None:
        pass

    def trials(self, info: EvalInfo, rows: Sequence[Mapping[str, Any]]) -> None:
        pass

    def ended(self, info: EvalInfo, record: EvalRecord, summary: Mapping[str, Any] | None) -> None:
        pass


_CURRENT: ContextVar[EvalObserver | None] = ContextVar("skillgate_eval_observer", default=None)


def current_observer() -> EvalObserver:
    return _CURRENT.get() or NullObserver()


@contextmanager
def observing(observer: EvalObserver) -> Iterator[EvalObserver]:
    """Install `observer` for evaluations run inside the block (this thread / context)."""
    token = _CURRENT.set(observer)
    try:
        yield observer
    finally:
        _CURRENT.reset(token)

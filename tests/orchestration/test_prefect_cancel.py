"""A cancel from Prefect (the UI's Cancel button, `prefect flow-run cancel`) is recorded as a cancel.

Prefect's worker tells the flow-run process that the coming SIGTERM is a cancel (its control
channel sets the run's termination intent), then sends it; Prefect's handler raises TerminationSignal
(empty message). The stage run must read `cancelled` with who cancelled it, the evaluation
`incomplete` (resumable) saying so; a SIGTERM that is not a cancel stays a crash.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from skillgate_core.base.interrupts import cancellation, read_cancellations
from skillgate_core.base.paths import StateLayout, state_layout
from skillgate_core.policy.tiny_model import TinyModelConfig
from tasks.cancellation import CANCELLED_FROM_PREFECT, prefect_cancellation
from warehouse import StageRunRecorder, query


@pytest.fixture
def cancel_intent() -> Iterator[None]:
    """The flag Prefect's control listener sets when the worker announces a cancel (reset after)."""
    from prefect._internal import control_listener

    control_listener._set_intent("cancel")
    try:
        yield
    finally:
        with control_listener._intent_lock:
            control_listener._intent = None


def _termination():
    from prefect.exceptions import TerminationSignal

    return TerminationSignal(signal=signal.SIGTERM)


def test_a_prefect_cancel_ends_the_stage_run_cancelled_with_who_cancelled(skillgate_home, cancel_intent):
    state: StateLayout = state_layout(skillgate_home)
    read_cancellations(prefect_cancellation)
    run = StageRunRecorder.start("init-model", TinyModelConfig(), trigger="ui", state=state)
    run.fail(_termination())
    assert query("select status, error from v_run", state=state).rows == [("cancelled", CANCELLED_FROM_PREFECT)]
    assert query("select exit_reason from v_segment", state=state).rows == [("cancelled",)]
    assert query("select count(*) from v_run where status = 'cancelled'", state=state).rows == [(1,)]


def test_a_sigterm_that_is_no_cancel_is_not_taken_for_one(skillgate_home):
    state: StateLayout = state_layout(skillgate_home)
    read_cancellations(prefect_cancellation)
    assert cancellation(_termination()) is None          # no intent, no flow run on a server: not a cancel
    assert cancellation(RuntimeError("boom")) is None
    run = StageRunRecorder.start("init-model", TinyModelConfig(), trigger="ui", state=state)
    run.fail(_termination())
    assert query("select status from v_run", state=state).rows == [("failed",)]

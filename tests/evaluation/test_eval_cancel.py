"""A Prefect cancel in the middle of an evaluation (tiny model, real sandboxes, Prefect's own SIGTERM
bridge): the evaluation ends incomplete saying it was cancelled, not failed with "TerminationSignal: ",
and a resume plays only the trials that did not run."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from skillgate_core.base.interrupts import read_cancellations
from skillgate_core.base.paths import state_layout
from skillgate_core.evaluation.observer import EvalInfo, observing
from skillgate_core.evaluation.owner import resolve_policy
from skillgate_core.evaluation.runner import EvalRunConfig, run_evaluation
from skillgate_core.evaluation.specs import build_protocol, load_spec
from skillgate_core.ownership import experiment_dir, load_eval
from tasks.cancellation import CANCELLED_FROM_PREFECT, prefect_cancellation
from warehouse import query
from warehouse.evaluations import WarehouseEvalObserver

pytestmark = pytest.mark.usefixtures("bwrap_ready")


class _CancelAfterFirstBatch(WarehouseEvalObserver):
    """Records as the warehouse does, and after the first batch's rows the worker's SIGTERM arrives."""

    def trials(self, info: EvalInfo, rows: Sequence[Mapping[str, Any]]) -> None:
        super().trials(info, rows)
        os.kill(os.getpid(), signal.SIGTERM)


@pytest.fixture
def prefect_cancel() -> Iterator[None]:
    """What a cancel from the UI sets up in the flow-run process: Prefect's SIGTERM bridge, and the
    intent `cancel` its control listener records when the worker announces the cancel."""
    from prefect._internal import control_listener
    from prefect.utilities.engine import capture_sigterm

    read_cancellations(prefect_cancellation)
    control_listener._set_intent("cancel")
    try:
        with capture_sigterm():
            yield
    finally:
        with control_listener._intent_lock:
            control_listener._intent = None


def test_a_cancel_leaves_the_evaluation_incomplete_and_resumable(skillgate_home, tiny_model_dir, bench, tiny_spec,
                                                                  prefect_cancel):
    from prefect.exceptions import TerminationSignal

    resolved = build_protocol(load_spec(tiny_spec), bench)
    ref = resolve_policy(str(tiny_model_dir), root=state_layout().experiments)
    with observing(_CancelAfterFirstBatch(trigger="test")), pytest.raises(TerminationSignal):
        run_evaluation(resolved, ref, EvalRunConfig(batch_episodes=1, sandbox_workers=1, cpu_threads=1),
                       progress=False)
    [(eval_id, status, detail)] = query("select eval_id, status, status_detail from v_evaluation").rows
    assert status == "incomplete", (status, detail)
    assert CANCELLED_FROM_PREFECT in detail and "resume" in detail
    exp = experiment_dir(state_layout().experiments, ref.experiment_id)
    assert load_eval(exp, eval_id.split("/", 1)[1]).status == "incomplete"
    resumed = run_evaluation(resolved, ref, EvalRunConfig(batch_episodes=4, sandbox_workers=1, cpu_threads=1),
                             progress=False)
    assert resumed.status == "completed" and resumed.trials_run == resumed.trials_total - 1

"""Stage tasks retry infrastructure failures only (a config error or a bug fails at once)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.usefixtures("prefect_server")

SMALL = {"corpus_lines": 300, "vocab_size": 600, "hidden_size": 32}


def _flaky(monkeypatch, error: BaseException, fail_times: int) -> list[int]:
    import tasks.stage
    from skillgate_core.pipeline.run import run_stage

    calls: list[int] = []

    def flaky_run_stage(*args, **kwargs):  # the real stage, after `fail_times` failures
        calls.append(1)
        if len(calls) <= fail_times:
            raise error
        return run_stage(*args, **kwargs)

    monkeypatch.setattr(tasks.stage, "run_stage", flaky_run_stage)
    monkeypatch.setattr(tasks.stage.run_stage_task, "retry_delay_seconds", 0)
    return calls


def test_an_infrastructure_failure_is_retried(skillgate_home, monkeypatch):
    from flows.stage_flows import STAGE_FLOWS

    calls = _flaky(monkeypatch, ConnectionError("docker daemon went away"), fail_times=1)
    record = STAGE_FLOWS["init-model"](SMALL, {})
    assert len(calls) == 2 and record["outputs"]["base_model"]


def test_a_bad_input_is_not_retried(skillgate_home, monkeypatch):
    from flows.stage_flows import STAGE_FLOWS
    from tasks.stage import is_infrastructure_failure

    calls = _flaky(monkeypatch, ValueError("task.toml: timeout_sec must be > 0"), fail_times=5)
    state = STAGE_FLOWS["init-model"](SMALL, {}, return_state=True)
    assert state.is_failed() and len(calls) == 1
    assert is_infrastructure_failure(TimeoutError()) and not is_infrastructure_failure(KeyError("x"))

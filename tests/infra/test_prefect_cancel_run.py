"""A cancel from the Prefect UI, for real: infra/prefect_server.sh (server + worker), a deployed flow
run that is inside a recorded stage run, then the state change the UI's Cancel button makes
(Cancelling). The worker tells the run it is a cancel and sends SIGTERM; the flow run ends Cancelled
and the stage run reads `cancelled` with who cancelled it, not `failed` with "TerminationSignal: "."""

from __future__ import annotations

import asyncio
import json

import pytest
from services import REPO, deploy_and_run, free_ports, prefect_services, service_env, wait_no_leftovers
from support.skillgate_cli import run_skillgate

from tasks.cancellation import CANCELLED_FROM_PREFECT

# The stage run's start, its signal and its end, as tasks/stage.py's run_stage_task records them.
IN_A_STAGE = '''
import time
from pathlib import Path

from prefect import flow

from skillgate_core.base.interrupts import read_cancellations
from skillgate_core.policy.tiny_model import TinyModelConfig
from tasks.cancellation import prefect_cancellation
from warehouse import StageRunRecorder


@flow
def in_a_stage(marker: str):
    read_cancellations(prefect_cancellation)
    run = StageRunRecorder.start("init-model", TinyModelConfig(), trigger="ui")
    Path(marker).write_text(run.run_id)
    try:
        time.sleep(600)
    except BaseException as exc:
        run.fail(exc)
        raise
'''


@pytest.mark.e2e
@pytest.mark.slow
def test_a_cancel_from_the_ui_is_recorded_cancelled(tmp_path):
    from prefect.client.orchestration import PrefectClient
    from prefect.states import Cancelling

    home = tmp_path / "home"
    (port,) = free_ports()
    api = f"http://127.0.0.1:{port}/api"
    env = service_env(home, PREFECT_PORT=str(port), SKILLGATE_DEPLOY="0", PREFECT_WORKER_QUERY_SECONDS="2",
                      PYTHONPATH=str(REPO))
    with prefect_services(env):
        flow_run_id, run_id = deploy_and_run(env, api, tmp_path / "flow", IN_A_STAGE, "in_a_stage",
                                             tmp_path / "running", start_timeout=240)

        async def cancel_and_wait():
            async with PrefectClient(api=api) as client:
                await client.set_flow_run_state(flow_run_id, Cancelling())  # what the UI's Cancel does
                for _ in range(240):
                    state = (await client.read_flow_run(flow_run_id)).state
                    if state.is_final():
                        return state
                    await asyncio.sleep(0.5)
                return state

        final = asyncio.run(cancel_and_wait())
        assert final.is_cancelled(), final
    assert not wait_no_leftovers(home)
    res = run_skillgate("sql", f"select status, error from v_run where run_id = '{run_id}'", "--format", "json",
                        home=home)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == [{"status": "cancelled", "error": CANCELLED_FROM_PREFECT}]

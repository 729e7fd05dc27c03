"""The nightly's schedule is opt-in and said out loud: prefect.yaml declares it off, and
flows/nightly_schedule.py (run by infra/prefect_server.sh at every start) switches it against a real
Prefect server and prints its state, with a night's cost when it is switched on."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from flows.nightly_schedule import NIGHTLY_DEPLOYMENT, main

REPO = Path(__file__).resolve().parents[2]


def _nightly_deployment() -> dict:
    config = yaml.safe_load((REPO / "prefect.yaml").read_text())
    [nightly] = [d for d in config["deployments"] if d["name"] == NIGHTLY_DEPLOYMENT.split("/")[1]]
    return nightly


def test_prefect_yaml_declares_the_nightly_schedule_off():
    schedules = _nightly_deployment()["schedules"]
    assert schedules, "the nightly keeps its schedule (opt-in, not removed)"
    assert all(s.get("active") is False for s in schedules), schedules


async def _deploy_nightly_as_prefect_yaml_does() -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import DeploymentScheduleCreate
    from prefect.client.schemas.schedules import CronSchedule

    [declared] = _nightly_deployment()["schedules"]
    async with get_client() as client:
        flow_id = await client.create_flow_from_name(NIGHTLY_DEPLOYMENT.split("/")[0])
        await client.create_deployment(flow_id, NIGHTLY_DEPLOYMENT.split("/")[1], schedules=[DeploymentScheduleCreate(
            schedule=CronSchedule(cron=declared["cron"], timezone=declared["timezone"]), active=declared["active"])])


async def _active() -> list[bool]:
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        return [s.active for s in (await client.read_deployment_by_name(NIGHTLY_DEPLOYMENT)).schedules]


@pytest.mark.usefixtures("prefect_server")
def test_the_schedule_is_shown_and_switched_on_only_when_asked(skillgate_home, capsys):
    assert main(["show"]) == 2  # not deployed yet: said, not a traceback
    assert "is not on the server" in capsys.readouterr().err
    asyncio.run(_deploy_nightly_as_prefect_yaml_does())

    assert main(["off"]) == 0
    out = capsys.readouterr().out
    assert "cron '0 2 * * *' UTC: OFF (opt in: SKILLGATE_NIGHTLY=1 bash infra/prefect_server.sh)" in out
    assert asyncio.run(_active()) == [False]

    assert main(["on"]) == 0
    out = capsys.readouterr().out
    assert ": ON (the full protocol on every experiment with an export" in out
    # the cost of a night, before it fires (here nothing to evaluate yet, and that is what it says)
    assert "nightly cost: no estimate (UnknownExport:" in out and "the nightly found no experiment with a published export" in out
    assert asyncio.run(_active()) == [True]

    assert main(["off"]) == 0 and asyncio.run(_active()) == [False]

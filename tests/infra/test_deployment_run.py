"""A real deployment run, as a user does it: infra/prefect_server.sh (server + worker + `prefect deploy
--all` from prefect.yaml), then `prefect deployment run skillgate/rl-train --watch` on a fresh state
dir: the run finds none of its inputs on record, so it builds them first with the demo recipe's
stages (tiny model, bench, teacher trajectories, SFT), then prepares the RL data and trains with
GRPO (tiny settings through the `overrides` parameter). `run_deployment(name, params)` is the one
place that knows how a run is started and watched.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from services import (
    REPO,
    VENV,
    free_ports,
    prefect_services,
    processes_with_env,
    service_env,
    wait_no_leftovers,
)
from support.skillgate_cli import run_skillgate

# In `make test` (measured 115 s here, 87 s of it the rl-train run): the product as users meet it.
pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class FinalState:
    flow_run_id: str
    state_type: str  # COMPLETED, FAILED, CRASHED, ...
    state_name: str
    cli_output: str


def _client(api_url: str):
    from prefect.client.orchestration import PrefectClient

    return PrefectClient(api=api_url)


def run_deployment(name: str, params: dict[str, Any], *, env: dict[str, str], api_url: str,
                   timeout: float = 900) -> FinalState:
    """`prefect deployment run NAME --params JSON --watch`; the final state as the server records it.

    `params` are merged by the server into the deployment's own parameters (prefect.yaml)."""
    cmd = [str(VENV / "bin" / "prefect"), "deployment", "run", name, "--watch", "--watch-interval", "2",
           "--watch-timeout", str(int(timeout))]
    if params:
        cmd += ["--params", json.dumps(params)]
    proc = subprocess.run(cmd, env=dict(env, PREFECT_API_URL=api_url), cwd=REPO, capture_output=True, text=True,
                          timeout=timeout + 60, stdin=subprocess.DEVNULL)
    output = proc.stdout + proc.stderr
    match = re.search(r"UUID:\s*([0-9a-f-]{36})", output)
    assert match, f"no flow run id in the output of {' '.join(cmd)}:\n{output}"

    async def read():
        async with _client(api_url) as client:
            return await client.read_flow_run(match.group(1))

    run = asyncio.run(read())
    return FinalState(str(run.id), run.state.type.value, run.state.name, output)


async def _root_flow_run_id(client, flow_run_id: str) -> str:
    """The top flow run above a sub-flow run (the stage sub-flows run inside the entry flow)."""
    run = await client.read_flow_run(flow_run_id)
    while run.parent_task_run_id:
        task_run = await client.read_task_run(run.parent_task_run_id)
        run = await client.read_flow_run(task_run.flow_run_id)
    return str(run.id)


TINY = ["init-model.corpus_lines=300", "init-model.vocab_size=600", "init-model.hidden_size=32",
        "bench-build.eval_tasks=4", "bench-build.slate_tasks=4", "bench-build.train_tasks_per_skill=1",
        "bench-build.gate=\"none\"",  # the gate's own tests: tests/benchgen (here it cost ~8 s of sandboxes)
        "collect.max_tasks=2", "collect.repeats=1", "collect.misleading_rate=0.0", "sft.max_steps=1",
        "sft.per_device_batch_size=1", "sft.max_length=100000",
        "grpo.steps=1", "grpo.prompts_per_step=1", "grpo.group_size=2", "grpo.num_workers=1",
        "grpo.rollout_source=\"teacher\"", "grpo.teacher_misleading_rate=0.5", "grpo.max_turns=3",
        "grpo.max_rejected_groups=16", "grpo.checkpoint_every=1"]
"""Overrides of the stages rl-train adds on a fresh state (accepted: they are in the plan) and of grpo."""


def test_rl_train_deployment_run_on_a_fresh_state(tmp_path):
    began = time.monotonic()
    home = tmp_path / "home"
    (port,) = free_ports()
    api_url = f"http://127.0.0.1:{port}/api"
    # The worker polls every 2 s instead of 10: the run starts sooner, nothing else changes.
    env = service_env(home, PREFECT_PORT=str(port), SKILLGATE_REPO=str(REPO), PREFECT_WORKER_QUERY_SECONDS="2")
    timings: dict[str, float] = {}
    with prefect_services(env) as started:
        timings["start + deploy"] = time.monotonic() - began
        assert api_url in started.stdout

        # The nightly's schedule, as prefect.yaml declares it, read back from the server: off unless
        # SKILLGATE_NIGHTLY=1 (a server started to look at the UI must not start hours of work at 02:00),
        # and the start says so.
        assert "nightly: eval70-nightly/eval70-nightly cron '0 2 * * *' UTC: OFF (opt in:" in started.stdout
        async def nightly():
            async with _client(api_url) as client:
                return await client.read_deployment_by_name("eval70-nightly/eval70-nightly")

        deployment = asyncio.run(nightly())
        crons = [(s.schedule.cron, s.schedule.timezone, s.active) for s in deployment.schedules]
        assert crons == [("0 2 * * *", "UTC", False)]

        t0 = time.monotonic()
        final = run_deployment("skillgate/rl-train", {"overrides": TINY}, env=env, api_url=api_url)
        timings["rl-train run"] = time.monotonic() - t0
        assert final.state_type == "COMPLETED", final.cli_output

        # The warehouse of this state dir holds every stage run of that deployment run, the added
        # ones first, all triggered from the deployment (ui), and the grpo experiment's rows.
        res = run_skillgate("sql", "select stage, status, \"trigger\", flow_run_id, experiment_id from v_run "
                            "order by started_at", "--format", "json", home=home)
        assert res.returncode == 0, res.stderr
        rows = json.loads(res.stdout)
        assert [r["stage"] for r in rows] == ["bench-build", "init-model", "collect", "sft", "rl-data-prep", "grpo"]
        assert {(r["status"], r["trigger"]) for r in rows} == {("completed", "ui")}, rows
        grpo = rows[-1]
        assert grpo["experiment_id"].startswith("grpo-selector-clean-oracle-action-credit-")
        res = run_skillgate("sql", "select (select count(*) from model_export where experiment_id = ?) as exports, "
                            "(select count(*) from training_metric where experiment_id = ?) as metrics"
                            .replace("?", f"'{grpo['experiment_id']}'"), "--format", "json", home=home)
        counts = json.loads(res.stdout)[0]
        assert counts["exports"] >= 1 and counts["metrics"] > 0, counts

        async def root():
            async with _client(api_url) as client:
                return {await _root_flow_run_id(client, r["flow_run_id"]) for r in rows}

        assert asyncio.run(root()) == {final.flow_run_id}

        t0 = time.monotonic()
    timings["stop"] = time.monotonic() - t0
    # Nothing of this state dir is left: no server, worker or flow-run process.
    assert not wait_no_leftovers(home)
    assert not processes_with_env(f"PREFECT_HOME={home / 'prefect'}")
    timings["total"] = time.monotonic() - began
    print("timings (s):", {k: round(v, 1) for k, v in timings.items()})
    (Path(tmp_path) / "timings.json").write_text(json.dumps(timings))

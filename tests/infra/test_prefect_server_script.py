"""infra/prefect_server.sh against a real Prefect server and worker: idempotent start, status, and a
stop that leaves no process of that PREFECT_HOME behind (worker first, then the server)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from services import (
    REPO,
    alive,
    cmdline,
    deploy_and_run,
    free_ports,
    leftovers,
    prefect_services,
    processes_with_env,
    run_script,
    service_env,
    wait_no_leftovers,
)


def _pids(home: Path) -> tuple[int, int]:
    logs = home / "logs"
    return int((logs / "server.pid").read_text()), int((logs / "worker.pid").read_text())


@pytest.mark.e2e
def test_start_is_idempotent_and_stop_leaves_nothing(tmp_path):
    home = tmp_path / "home"
    (port,) = free_ports()
    # No deploy here (tests/infra/test_deployment_run.py covers it): the server and worker are the subject.
    env = service_env(home, PREFECT_PORT=str(port), SKILLGATE_DEPLOY="0")
    prefect_home = f"PREFECT_HOME={home / 'prefect'}"
    with prefect_services(env) as started:
        assert f"http://127.0.0.1:{port}/api" in started.stdout
        server, worker = _pids(home)
        assert "prefect server start" in cmdline(server) and f"--port {port}" in cmdline(server)
        assert "prefect worker start" in cmdline(worker) and "--pool skillgate-process" in cmdline(worker)
        status = run_script("prefect_server.sh", "status", env=env)
        assert f"pid {server}" in status.stdout and f"pid {worker}" in status.stdout

        again = run_script("prefect_server.sh", "start", env=env)
        assert "already running" in again.stderr
        assert _pids(home) == (server, worker)
        assert list(processes_with_env(prefect_home, "prefect server start")) == [server]
        assert list(processes_with_env(prefect_home, "prefect worker start")) == [worker]

        # Another state dir on the same port: refused, not silently attached to this server.
        other = service_env(tmp_path / "other", PREFECT_PORT=str(port), SKILLGATE_DEPLOY="0")
        refused = run_script("prefect_server.sh", "start", env=other, check=False)
        assert refused.returncode == 1 and "another Prefect server already answers" in refused.stderr
        assert not leftovers(tmp_path / "other")
        # ... unless PREFECT_API_URL names it: then only a worker of its own (the shared-server setup).
        joined = dict(other, PREFECT_API_URL=f"http://localhost:{port}/api")
        run_script("prefect_server.sh", "start", env=joined)
        assert "server: external" in run_script("prefect_server.sh", "status", env=joined).stdout
        assert len(processes_with_env(prefect_home, "prefect worker start")) == 1
        assert [c for c in leftovers(tmp_path / "other").values() if "prefect" in c] == [
            cmdline(int((tmp_path / "other" / "logs" / "worker.pid").read_text()))]
        run_script("prefect_server.sh", "stop", env=joined)
        assert not wait_no_leftovers(tmp_path / "other") and list(processes_with_env(prefect_home, "prefect")) == [
            server, worker]

        run_script("prefect_server.sh", "stop", env=env, timeout=120)
        assert not processes_with_env(prefect_home, "prefect"), "a prefect process of this PREFECT_HOME is left"
        assert not wait_no_leftovers(home)
        assert not (home / "logs" / "worker.pid").exists() and not (home / "logs" / "server.pid").exists()
        # The worker stopped on its own SIGTERM path, not by the SIGKILL escalation.
        assert "stopped!" in (home / "logs" / "worker.log").read_text()

    status = run_script("prefect_server.sh", "status", env=env, check=False)
    assert status.returncode == 3 and "server: not running" in status.stdout
    run_script("prefect_server.sh", "stop", env=env)  # nothing running: fine


def test_stop_never_signals_a_process_that_reused_a_recorded_pid(tmp_path):
    home = tmp_path / "home"
    (port,) = free_ports()
    env = service_env(home, PREFECT_PORT=str(port))
    # Pid files naming a live process that is not ours (what a reused pid looks like).
    bystander = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        (home / "logs").mkdir(parents=True)
        for name in ("server", "worker"):
            (home / "logs" / f"{name}.pid").write_text(f"{bystander.pid}\n")
        status = run_script("prefect_server.sh", "status", env=env, check=False)
        assert status.returncode == 3 and "worker: not running" in status.stdout
        run_script("prefect_server.sh", "stop", env=env)
        assert bystander.poll() is None, "stop signalled a process that is not its server or worker"
        assert not (home / "logs" / "server.pid").exists()
    finally:
        bystander.kill()
        bystander.wait()
    assert not leftovers(home)


def test_state_dir_follows_the_rule_of_skillgate_core_paths(tmp_path):
    """$SKILLGATE_HOME (resolved against the caller's cwd, not the checkout), else the checkout's .skillgate."""
    def python_home(env: dict[str, str], cwd: Path) -> str:
        code = "from skillgate_core.base.paths import default_home; print(default_home()[0])"
        env = dict(env, PYTHONPATH=str(REPO))  # this checkout's skillgate_core, as the flow runs use it
        return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True,
                              check=True).stdout.strip()

    (port,) = free_ports()
    relative = service_env(tmp_path / "unused", PREFECT_PORT=str(port), SKILLGATE_HOME="rel/home")
    unset = {k: v for k, v in relative.items() if k != "SKILLGATE_HOME"}
    for env, cwd in ((relative, tmp_path), (unset, tmp_path)):
        result = subprocess.run(["bash", str(REPO / "infra" / "prefect_server.sh"), "status"], env=env, cwd=cwd,
                                capture_output=True, text=True)
        assert result.returncode == 3, result.stderr
        assert f"state: {python_home(env, cwd)}\n" in result.stdout
    assert python_home(unset, tmp_path) == str(REPO / ".skillgate")
    assert not (tmp_path / "rel").exists()  # status creates nothing
    assert os.path.isabs(python_home(relative, tmp_path))


SLEEPER = '''
import os, subprocess, time
from pathlib import Path
from prefect import flow


@flow
def sleeper(marker: str):
    # A grandchild in a session of its own, as sandboxes and Ray start theirs: stop must still find it.
    child = subprocess.Popen(["sleep", "600"], start_new_session=True)
    Path(marker).write_text(f"{os.getpid()} {child.pid}")
    time.sleep(600)
'''


@pytest.mark.e2e
@pytest.mark.slow
def test_stop_ends_a_running_flow_run_and_its_children(tmp_path):
    """stop: the worker and its running flow run (a session of its own) and that run's children end,
    while the server still answers, so the run is recorded as ended, not left Running."""
    home = tmp_path / "home"
    (port,) = free_ports()
    api = f"http://127.0.0.1:{port}/api"
    env = service_env(home, PREFECT_PORT=str(port), SKILLGATE_DEPLOY="0", PREFECT_WORKER_QUERY_SECONDS="2")
    with prefect_services(env):
        flow_run_id, pids = deploy_and_run(env, api, tmp_path / "flow", SLEEPER, "sleeper", tmp_path / "running",
                                           start_timeout=180)
        engine, grandchild = map(int, pids.split())
        assert alive(engine) and alive(grandchild)

        t0 = time.monotonic()
        stopped = run_script("prefect_server.sh", "stop", env=env, timeout=120)
        stop_s = time.monotonic() - t0
        assert not alive(engine) and not alive(grandchild)
        assert not wait_no_leftovers(home)
        print(stopped.stderr)
        assert "SIGKILL" not in stopped.stderr, "the flow run or worker needed SIGKILL"

        # Back up (same database): the run was told it ended while the server was still there.
        run_script("prefect_server.sh", "start", env=env)

        async def state():
            from prefect.client.orchestration import PrefectClient

            async with PrefectClient(api=api) as client:
                return (await client.read_flow_run(flow_run_id)).state

        final = asyncio.run(state())
        assert final.is_final() and not final.is_completed(), final
    print(f"stop with a running flow run: {stop_s:.1f} s; its final state: {final.type.value}")
    assert not leftovers(home)

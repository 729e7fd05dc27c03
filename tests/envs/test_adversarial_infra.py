"""Infrastructure attacks: an image build that reaches the network, sandboxes that outlive a killed owner.

- Docker image builds run the task author's RUN lines: they must be as offline as the sandbox
  (network_mode none for builds too), or a task could fetch (or send) anything at build time.
- A run SIGKILLed mid-episode cannot clean up: its bubblewrap session (tmpfs, cgroup) or its
  container stays. Every run entry point (episodes, task check, collect) reaps the orphans of dead
  owners when it starts, and never anything whose owner is alive.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from envtest_paths import GOOD, REPO
from typer.testing import CliRunner

from deployments.cli import app
from skillgate_core.agent.episode import run_episodes
from skillgate_core.envs.backends import start_sandbox
from skillgate_core.envs.sandbox_config import SandboxConfig


def test_image_builds_have_no_network(docker_ready, make_task):
    from skillgate_core.envs.docker_images import docker_client

    nonce = secrets.token_hex(8)  # a fresh image every run: a cached one would prove nothing
    task = make_task(dockerfile=f"FROM ubuntu:24.04\nWORKDIR /app\nLABEL nonce={nonce}\n"
                                "RUN ls /sys/class/net > /app/netifs.txt\n", task_id=f"net-{nonce}")
    box = start_sandbox(task, backend="docker")
    try:
        interfaces = box.read_file("/app/netifs.txt").decode().split()
    finally:
        box.stop()
        docker_client().api.remove_image(box.image, force=True)
    assert interfaces == ["lo"], interfaces  # no eth0: the build had no network


# ---------------------------------------------------------------- orphans of a killed owner (item 8)

_OWNER = """
import sys, time
from skillgate_core.envs.backends import start_sandbox
from skillgate_core.envs.task_package import load_task_package
box = start_sandbox(load_task_package(sys.argv[1]), backend=sys.argv[2])
print(box.session_id, flush=True)
time.sleep(300)
"""


def _orphan(backend: str) -> str:
    """Start a sandbox in a child process, SIGKILL the child (it cannot clean up), return the session."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", _OWNER, str(GOOD / "hello-file"), backend], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, text=True)
    try:
        session = (proc.stdout.readline() if proc.stdout else "").strip()
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert session.startswith("sg-"), session
    return session


def _exists(backend: str, session: str) -> bool:
    if backend == "bwrap":
        sessions = SandboxConfig().sessions_path()
        return (sessions / f"{session}.json").exists() or (sessions / session).exists()
    from skillgate_core.envs.docker_images import LABEL, docker_client

    api = docker_client().api
    containers = api.containers(all=True, filters={"label": f"org.skillgate.session={session}"})
    volumes = (api.volumes(filters={"label": f"{LABEL}=1"}) or {}).get("Volumes") or []
    return bool(containers) or any(v["Name"] == f"{session}-workspace" for v in volumes)


@pytest.mark.parametrize("entry", ["task check", "episodes"])
def test_the_next_entry_point_reaps_a_killed_owners_sandbox(backend: str, entry: str, hello_task, tmp_path: Path):
    session = _orphan(backend)
    assert _exists(backend, session)  # the kill left it behind
    with start_sandbox(hello_task, backend=backend) as live:  # type: ignore[arg-type]
        if entry == "task check":
            result = CliRunner().invoke(app, ["task", "check", str(tmp_path / "not-a-task")])
            assert result.exit_code == 1, result.output
        else:
            assert run_episodes([], policy=None, tokenizer=None) == []  # type: ignore[arg-type]
        assert not _exists(backend, session), f"{entry} did not reap {session}"
        assert live.alive() and live.exec("echo still here").stdout == "still here\n"  # an owner alive: kept


def test_every_run_entry_point_reaps_first(monkeypatch, tmp_path: Path):
    """Each entry point asks for the reaping before it does anything else (recorded, not run)."""
    from skillgate_core.agent import collect, episode
    from skillgate_core.benchgen import criticality
    from skillgate_core.envs import backends, validity_gate

    calls: list[str] = []
    monkeypatch.setattr(backends, "cleanup_orphans", lambda config=None: calls.append("reap") or {})
    entries = {
        "check_task": lambda: validity_gate.check_task(tmp_path / "none"),
        "check_tasks": lambda: validity_gate.check_tasks([tmp_path / "none"]),
        "run_episodes": lambda: episode.run_episodes([], None, None),  # type: ignore[arg-type]
        "collect": lambda: collect.collect_trajectories(collect.CollectConfig(), {"bench": tmp_path / "none",
                                                        "base_model": tmp_path / "none"}, tmp_path / "out"),
        "criticality": lambda: criticality.measure_criticality(tmp_path / "none"),
    }
    for name, run in entries.items():
        calls.clear()
        try:
            run()
        except Exception:  # the bogus inputs fail after the reaping; that is all this test needs
            pass
        assert calls[:1] == ["reap"], name

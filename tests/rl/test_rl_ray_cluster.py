"""launch_ray joins an existing cluster named by RAY_ADDRESS (a real `ray start --head` on this machine).

The head runs with --block in its own session, on free ports and a private temp dir, so it
collides with no other Ray on the machine; it is stopped by its own pid (and any descendant still
alive after that, by pid), never by `ray stop`, which would end every Ray of this user.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
from rl_workers import describe_worker

from skillgate_core.rl.launch import LaunchConfig, launch_ray

HERE = Path(__file__).parent
RAY = str(Path(sys.executable).with_name("ray"))


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def stop(head: subprocess.Popen) -> None:
    tree = [head.pid]
    with contextlib.suppress(psutil.NoSuchProcess):
        tree += [p.pid for p in psutil.Process(head.pid).children(recursive=True)]
    head.send_signal(signal.SIGTERM)  # `ray start --block` tears its node down on SIGTERM
    try:
        head.wait(timeout=60)
    except subprocess.TimeoutExpired:
        head.kill()
    deadline = time.time() + 20
    for pid in tree:
        while psutil.pid_exists(pid) and time.time() < deadline:
            time.sleep(0.2)
        with contextlib.suppress(psutil.NoSuchProcess, ProcessLookupError):
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def ray_head(monkeypatch):
    import ray

    if ray.is_initialized():
        ray.shutdown()
    gcs, node_manager, object_manager, agent_http, agent_grpc, runtime_env, metrics = free_ports(7)
    temp_dir = tempfile.mkdtemp(prefix="sgray-")  # short: Ray's socket paths must fit in 107 chars
    env = dict(
        os.environ,
        RAY_AUTH_MODE=os.environ.get("RAY_AUTH_MODE", "disabled"),
        RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S="0",  # SIGTERM: tear down now, no 30 s drain
    )
    head = subprocess.Popen(
        [RAY, "start", "--head", "--block", f"--port={gcs}", "--num-cpus=2", "--include-dashboard=false",
         "--disable-usage-stats", f"--temp-dir={temp_dir}", f"--node-manager-port={node_manager}",
         f"--object-manager-port={object_manager}", f"--dashboard-agent-listen-port={agent_http}",
         f"--dashboard-agent-grpc-port={agent_grpc}", f"--runtime-env-agent-port={runtime_env}",
         f"--metrics-export-port={metrics}",],
        env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    address = f"127.0.0.1:{gcs}"
    try:
        deadline = time.time() + 120
        while subprocess.run([RAY, "status", f"--address={address}"], env=env, capture_output=True).returncode:
            if head.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"ray head did not come up (exit {head.poll()})")
            time.sleep(1)
        monkeypatch.setenv("RAY_ADDRESS", address)
        yield address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        stop(head)
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.mark.slow
def test_launch_joins_the_cluster_named_by_ray_address(ray_head, tmp_path):
    config = LaunchConfig(num_workers=2, pythonpath=(str(HERE),), storage_path=str(tmp_path / "runs"))
    result = launch_ray(describe_worker, "joined", config)
    assert [r["rank"] for r in result.results] == [0, 1]
    # the workers ran on that cluster (Ray reports it under the node's IP, same GCS port)
    assert {r["gcs_address"].rsplit(":", 1)[1] for r in result.results} == {ray_head.rsplit(":", 1)[1]}


@pytest.mark.slow
def test_the_grpo_stage_runs_on_the_cluster_named_by_ray_address(ray_head, tmp_path, bench, policy, skillgate_home):
    import json

    from skillgate_core.rl.data_prep import RLDataPrepConfig, prepare_rl_data
    from skillgate_core.rl.grpo_config import GRPOConfig
    from skillgate_core.rl.grpo_stage import train_grpo

    prepare_rl_data(RLDataPrepConfig(max_tasks=4), {"bench": bench, "sft_model": policy}, tmp_path / "rl")
    config = GRPOConfig(steps=1, prompts_per_step=2, group_size=4, num_workers=2, rollout_source="teacher",
                        max_turns=4, teacher_misleading_rate=0.5, teacher_no_read_rate=0.0, learning_rate=1e-3,
                        max_rejected_groups=8, backend="bwrap", sandbox_workers=2)
    out = tmp_path / "out"
    out.mkdir()
    result = train_grpo(config, {"sft_model": policy, "rl_data": tmp_path / "rl", "bench": bench}, out)
    (row,) = [json.loads(line) for line in Path(result.metrics["metrics_file"]).read_text().splitlines()]
    assert row["trained"] and (out / "policy_export" / "config.json").is_file()
    # The run lived on that cluster: its GCS (fresh for this test) recorded the stage's driver as a job,
    # finished by now, beside this check's own connection.
    import ray

    ray.init(address=ray_head)
    try:
        jobs = ray._private.state.jobs()
        assert len(jobs) >= 2 and sum(bool(j["IsDead"]) for j in jobs) >= 1, jobs
    finally:
        ray.shutdown()

"""launch_ray joins an existing cluster named by RAY_ADDRESS: a real Ray head started by infra/ray_cluster.sh.

The script is what is tested here: `up` starts the head (its own session, free ports, a private temp
dir, no dashboard) and prints the `export RAY_ADDRESS=...` line the grpo stage joins through; `down`
stops that cluster only (never `ray stop`, which would end every Ray of this user on the machine) and
fails if any of its processes is left, which is checked here again from the outside.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from rl_workers import describe_worker

from skillgate_core.rl.engine.launch import LaunchConfig, launch_ray

HERE = Path(__file__).parent
REPO = HERE.parents[1]
VENV = Path(sys.executable).parent.parent  # not resolved: .venv/bin/python is a symlink


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cluster_script(action: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["bash", str(REPO / "infra" / "ray_cluster.sh"), action], env=env, cwd=REPO,
                            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, f"ray_cluster.sh {action}: {result.stdout}{result.stderr}"
    return result


def cluster_processes(temp_dir: str) -> list[int]:
    """Live processes of the cluster: the script marks each with SKILLGATE_RAY_CLUSTER=<its temp dir>."""
    mark = f"SKILLGATE_RAY_CLUSTER={temp_dir}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and mark in (entry / "environ").read_bytes().split(b"\0"):
                if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.fixture
def ray_head(monkeypatch, tmp_path):
    import ray

    if ray.is_initialized():
        ray.shutdown()
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(SKILLGATE_HOME=str(tmp_path / "ray-state"), VENV=str(VENV), RAY_PORT=str(free_port()),
               RAY_NUM_CPUS="2")
    up = cluster_script("up", env)
    (address,) = re.findall(r"^export RAY_ADDRESS=(\S+)$", up.stdout, re.M)
    temp_dir = (tmp_path / "ray-state" / "ray" / "cluster.env").read_text().split("TEMP_DIR=")[1].strip()
    try:
        assert cluster_processes(temp_dir), "the head's processes do not carry the cluster mark"
        monkeypatch.setenv("RAY_ADDRESS", address)
        yield address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster_script("down", env)
        left = cluster_processes(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)
        assert not left, f"ray_cluster.sh down left {left}"


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

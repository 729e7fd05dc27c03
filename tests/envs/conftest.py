"""Fixtures for the environment layer: real sandboxes on both backends.

Docker: when no daemon answers and we are root, `infra/dockerd.sh` starts one, and the base image
is built once with `infra/base_image.sh` (cached tarball: seconds on later runs). Where Docker
cannot work the docker-backed tests skip with the reason, unless SKILLGATE_REQUIRE_DOCKER=1 (CI),
which turns the skip into a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from envtest_paths import GOOD, REPO


def _unusable(reason: str) -> None:
    if os.environ.get("SKILLGATE_REQUIRE_DOCKER") == "1":
        pytest.fail(f"docker required (SKILLGATE_REQUIRE_DOCKER=1) but unusable: {reason}")
    pytest.skip(f"docker unusable here: {reason}")


@pytest.fixture(scope="session")
def docker_ready() -> str:
    """A Docker daemon that answers and the local base image; returns the base image id."""
    from skillgate_core.envs import docker_sandbox
    from skillgate_core.envs.docker_images import ensure_base_image

    if docker_sandbox.unavailable_reason() and os.geteuid() == 0 and shutil.which("dockerd"):
        done = subprocess.run(["bash", str(REPO / "infra" / "dockerd.sh")], capture_output=True, text=True)
        if done.returncode != 0:
            _unusable(f"infra/dockerd.sh failed: {done.stderr.strip()[-300:]}")
    reason = docker_sandbox.unavailable_reason()
    if reason:
        _unusable(reason)
    try:
        return ensure_base_image()
    except Exception as exc:
        _unusable(f"base image: {exc}")
        raise


@pytest.fixture(scope="session")
def bwrap_ready() -> None:
    from skillgate_core.envs import bwrap_sandbox

    reason = bwrap_sandbox.unavailable_reason()
    if reason:
        pytest.skip(f"bubblewrap unusable here: {reason}")


@pytest.fixture(params=["bwrap", "docker"])
def backend(request: pytest.FixtureRequest) -> str:
    """Each test using it runs once per sandbox backend."""
    request.getfixturevalue(f"{request.param}_ready")
    return request.param


@pytest.fixture(scope="session", autouse=True)
def _no_leftover_sandboxes():
    """After the session: nothing this process started may be left running."""
    yield
    from skillgate_core.envs.sandbox_config import SandboxConfig

    sessions = SandboxConfig().sessions_path()
    mine = []
    if sessions.is_dir():
        import json

        for meta in sessions.glob("*.json"):
            try:
                if json.loads(meta.read_text()).get("owner_pid") == os.getpid():
                    mine.append(meta.name)
            except (OSError, ValueError):
                continue
    assert not mine, f"bubblewrap sessions left behind: {mine}"


@pytest.fixture
def hello_task():
    from skillgate_core.envs.task_package import load_task_package

    return load_task_package(GOOD / "hello-file")


@pytest.fixture
def make_task(tmp_path: Path):
    """Write a small task package from strings: make_task(test_sh=..., dockerfile=..., files={...})."""
    from skillgate_core.envs.task_package import load_task_package

    counter = iter(range(1000))

    def make(test_sh: str = "echo 0 > /logs/verifier/reward.txt\n", dockerfile: str = "FROM ubuntu:24.04\nWORKDIR /app\n",
             solve_sh: str = "true\n", toml: str = "", files: dict[str, str] | None = None, task_id: str = "t"):
        root = tmp_path / f"{task_id}-{next(counter)}"
        (root / "environment").mkdir(parents=True)
        (root / "tests").mkdir()
        (root / "solution").mkdir()
        (root / "task.toml").write_text(f'[task]\nid = "{task_id}"\n' + toml)
        (root / "instruction.md").write_text("Do the thing.\n")
        (root / "environment" / "Dockerfile").write_text(dockerfile)
        (root / "tests" / "test.sh").write_text("#!/bin/bash\n" + test_sh)
        (root / "solution" / "solve.sh").write_text("#!/bin/bash\n" + solve_sh)
        for rel, text in (files or {}).items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        return load_task_package(root)

    return make

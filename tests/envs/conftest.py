"""Fixtures for the environment layer: real sandboxes on both backends.

Docker: when no daemon answers and we are root, `infra/dockerd.sh` starts one, and the base image
is built once with `infra/base_image.sh` (cached tarball: seconds on later runs). Where Docker
cannot work the docker-backed tests skip with the reason, unless SKILLGATE_REQUIRE_DOCKER=1 (CI),
which turns the skip into a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from envtest_paths import GOOD
from support.sandbox_fixtures import sandbox_backend

# One definition of sandbox readiness for every test package (tests/support/sandbox_fixtures.py, registered in
# tests/conftest.py); here the per-backend fixture is called `backend`.
backend = sandbox_backend


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

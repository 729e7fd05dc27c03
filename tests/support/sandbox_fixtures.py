"""Sandbox readiness fixtures for test folders outside tests/envs (import them into a conftest).

Same rules as tests/envs/conftest.py: Docker tests start `infra/dockerd.sh` when we are root and no
daemon answers, build the local base image once, and skip with the reason where Docker cannot work
(unless SKILLGATE_REQUIRE_DOCKER=1, which turns the skip into a failure). Bubblewrap tests skip where
bubblewrap cannot work, unless SKILLGATE_REQUIRE_BWRAP=1 (CI sets both: .ci/run): a sandbox test must
not skip silently where the sandbox is expected. Tests that are not fixtures call `skip_without_bwrap()`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from skillgate_core.envs.backend_registry import USABLE_BACKENDS

REPO = Path(__file__).resolve().parents[2]

__all__ = ["bwrap_ready", "docker_ready", "sandbox_backend", "skip_without_bwrap"]


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


def skip_without_bwrap() -> None:
    """Skip the calling test where bubblewrap is unusable; fail instead when SKILLGATE_REQUIRE_BWRAP=1."""
    from skillgate_core.envs import bwrap_sandbox

    reason = bwrap_sandbox.unavailable_reason()
    if reason and os.environ.get("SKILLGATE_REQUIRE_BWRAP") == "1":
        pytest.fail(f"bubblewrap required (SKILLGATE_REQUIRE_BWRAP=1) but unusable: {reason}")
    if reason:
        pytest.skip(f"bubblewrap unusable here: {reason}")


@pytest.fixture(scope="session")
def bwrap_ready() -> None:
    skip_without_bwrap()


@pytest.fixture(params=USABLE_BACKENDS)
def sandbox_backend(request: pytest.FixtureRequest) -> str:
    """Each test using it runs once per registered sandbox backend (its `<name>_ready` fixture first)."""
    request.getfixturevalue(f"{request.param}_ready")
    return request.param

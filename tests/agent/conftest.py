"""Fixtures of the agent tests: sandbox readiness on both backends (tests/sandbox_fixtures.py)."""

from sandbox_fixtures import bwrap_ready, docker_ready, sandbox_backend  # noqa: F401  (fixtures)

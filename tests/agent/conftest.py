"""Fixtures of the agent tests: sandbox readiness on both backends (tests/sandbox_fixtures.py), the
tiny policy and the small bench (tests/tiny_fixtures.py), each built once per session."""

from sandbox_fixtures import bwrap_ready, docker_ready, sandbox_backend  # noqa: F401  (fixtures)
from tiny_fixtures import bench, tiny_model_dir  # noqa: F401  (fixtures)

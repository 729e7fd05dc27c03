"""Fixtures of the agent tests: sandbox readiness on both backends (tests/support/sandbox_fixtures.py), the
tiny policy and the small bench (tests/support/tiny_fixtures.py), each built once per session."""

from support.sandbox_fixtures import bwrap_ready, docker_ready, sandbox_backend  # noqa: F401  (fixtures)
from support.tiny_fixtures import bench, tiny_model_dir  # noqa: F401  (fixtures)

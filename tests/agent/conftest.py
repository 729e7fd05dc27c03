"""Fixtures of the agent tests: sandbox readiness on both backends (tests/support/sandbox_fixtures.py), the
tiny policy and the small bench (tests/support/tiny_fixtures.py), each built once per session: all registered
in tests/conftest.py."""


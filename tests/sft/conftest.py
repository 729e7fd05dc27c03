"""Fixtures of the sft tests: the tiny policy and the small bench of tests/support/tiny_fixtures.py, registered
in tests/conftest.py (built once per session)."""

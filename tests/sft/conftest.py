"""Fixtures of the sft tests: the tiny policy of tests/tiny_fixtures.py (built once per session)."""

from tiny_fixtures import tiny_model_dir  # noqa: F401  (fixture)

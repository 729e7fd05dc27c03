"""Fixtures of the sft tests: the tiny policy of tests/support/tiny_fixtures.py (built once per session)."""

from support.tiny_fixtures import tiny_llama_dir, tiny_model_dir, tiny_policy_dir  # noqa: F401  (fixtures)

"""Fixtures of the policy tests: the tiny policy of tests/tiny_fixtures.py (built once per session),
loaded once per module."""

import pytest
from tiny_fixtures import tiny_model_dir  # noqa: F401  (fixture)

from skillgate_core.policy.local_sampler import load_policy


@pytest.fixture(scope="module")
def policy(tiny_model_dir):  # noqa: F811  (the tiny_model_dir fixture, not a redefinition)
    """(model, tokenizer) of the tiny policy, on the CPU."""
    return load_policy(tiny_model_dir)

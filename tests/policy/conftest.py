"""Fixtures of the policy tests: the tiny policy of tests/support/tiny_fixtures.py (built once per session),
loaded once per module."""

import pytest
from support.tiny_fixtures import tiny_llama_dir, tiny_model_dir, tiny_policy_dir  # noqa: F401  (fixtures)

from skillgate_core.policy.local_sampler import load_policy


@pytest.fixture(scope="module")
def policy(tiny_model_dir):  # noqa: F811  (the tiny_model_dir fixture, not a redefinition)
    """(model, tokenizer) of the tiny policy, on the CPU."""
    return load_policy(tiny_model_dir)


@pytest.fixture(scope="module")
def llama_policy(tiny_llama_dir):  # noqa: F811
    """(model, tokenizer) of the tiny Llama policy (SmolLM2's shape), on the CPU."""
    return load_policy(tiny_llama_dir)

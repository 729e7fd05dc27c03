"""Fixtures of the policy tests: the tiny policy of tests/support/tiny_fixtures.py (registered in
tests/conftest.py: built once per session), loaded once per module."""

import pytest

from skillgate_core.policy.local_sampler import load_policy


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    """(model, tokenizer) of the tiny policy, on the CPU."""
    return load_policy(tiny_model_dir)


@pytest.fixture(scope="module")
def llama_policy(tiny_llama_dir):
    """(model, tokenizer) of the tiny Llama policy (SmolLM2's shape), on the CPU."""
    return load_policy(tiny_llama_dir)

"""Shared fixtures of the RL tests: a real tiny Qwen2 model dir (the small real bench, the shared tiny models
and the warm DeepSpeed extension cache: tests/conftest.py). Ray workers inherit the cache folder through
skillgate_core.rl.engine.launch.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from skillgate_core.policy.tiny_model import TinyModelConfig, build_tiny_model

os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a private local test cluster, no token files in ~

HERE = Path(__file__).parent
@pytest.fixture(scope="session")
def policy(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rl-policy")
    return build_tiny_model(TinyModelConfig(vocab_size=700, corpus_lines=400, hidden_size=32), {}, out).outputs["base_model"]

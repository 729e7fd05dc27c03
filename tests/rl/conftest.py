"""Shared fixtures of the RL tests: a real tiny Qwen2 model dir and a warm extension cache (the small real bench
and the shared tiny models: tests/conftest.py).

DeepSpeed compiles a small C++ op (shared-memory all-reduce) the first time it initialises on CPU
(~45 s on 2 cores). The session's SKILLGATE_HOME is a fresh temp dir, so the compile cache is kept in
a stable temp folder instead (unless TORCH_EXTENSIONS_DIR is already set): only the first session
on a machine pays for it. Ray workers inherit it through skillgate_core.rl.launch.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from skillgate_core.policy.tiny_model import TinyModelConfig, build_tiny_model

os.environ.setdefault(
    "TORCH_EXTENSIONS_DIR", str(Path(tempfile.gettempdir()) / f"skillgate-torch-extensions-{os.getuid()}")
)
os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a private local test cluster, no token files in ~

HERE = Path(__file__).parent
@pytest.fixture(scope="session")
def policy(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rl-policy")
    return build_tiny_model(TinyModelConfig(vocab_size=700, corpus_lines=400, hidden_size=32), {}, out).outputs["base_model"]

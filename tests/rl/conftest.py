"""A small real bench (bench-build code) and a real tiny policy (init-model code), built once per module."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillgate_core.benchgen import BenchBuildConfig, build_suite
from skillgate_core.policy.tiny_model import TinyModelConfig, build_tiny_model

SMALL_BENCH = BenchBuildConfig(seed=5, train_skills_per_cell=1, train_tasks_per_skill=1, eval_tasks=4, slate_tasks=4)
"""16 training tasks: one per family x domain."""


@pytest.fixture(scope="session")
def bench(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rl-bench") / "bench"
    build_suite(SMALL_BENCH, out)
    return out


@pytest.fixture(scope="session")
def policy(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rl-policy")
    return build_tiny_model(TinyModelConfig(vocab_size=700, corpus_lines=400, hidden_size=32), {}, out).outputs["base_model"]

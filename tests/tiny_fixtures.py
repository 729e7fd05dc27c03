"""Shared session fixtures: a real tiny Qwen2 policy (init-model code) and a small real bench
(bench-build code), built once per session by the test packages that import them."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillgate_core.benchgen import BenchBuildConfig, build_suite
from skillgate_core.policy.tiny_model import TinyModelConfig, build_tiny_model

__all__ = ["SMALL_BENCH", "bench", "tiny_model_dir"]

SMALL_BENCH = BenchBuildConfig(seed=5, train_skills_per_cell=1, train_tasks_per_skill=1, eval_tasks=4, slate_tasks=4)
"""16 training tasks (one per family x domain), 4 eval70_v1 and 4 slate147 tasks."""


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A randomly initialised Qwen2 model + tokenizer, written by the project's tiny-model code."""
    out = tmp_path_factory.mktemp("tiny-model")
    config = TinyModelConfig(vocab_size=600, corpus_lines=300, hidden_size=32, intermediate_size=64)
    return build_tiny_model(config, {}, out).outputs["base_model"]


@pytest.fixture(scope="session")
def bench(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bench") / "bench"
    build_suite(SMALL_BENCH, out)
    return out

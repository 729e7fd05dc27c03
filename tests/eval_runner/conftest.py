"""Fixtures of the evaluation-runner tests: a real tiny Qwen2 model, a small real bench, a tiny
protocol spec (2 tasks x 2 repeats, short turns) and real bubblewrap sandboxes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sandbox_fixtures import bwrap_ready  # noqa: F401  (fixture)

from skillgate_core.benchgen import BenchBuildConfig, build_suite
from skillgate_core.policy.tiny_model import TinyModelConfig, build_tiny_model

SMALL_BENCH = BenchBuildConfig(seed=5, train_skills_per_cell=1, train_tasks_per_skill=1, eval_tasks=4, slate_tasks=4)
"""4 eval70_v1 tasks and 4 slate147 tasks (one per family)."""

TINY_SPEC = """[protocol]
spec_id = "tiny_v1"
split = "eval70_v1"
max_tasks = 2
repeats = 2
seed = 3
max_new_tokens = 24
context_size = 4096
max_turns = 2
wall_clock_s = 120.0
"""


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("eval-tiny-model")
    config = TinyModelConfig(vocab_size=600, corpus_lines=300, hidden_size=32, intermediate_size=64)
    return build_tiny_model(config, {}, out).outputs["base_model"]


@pytest.fixture(scope="session")
def bench(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("eval-bench") / "bench"
    build_suite(SMALL_BENCH, out)
    return out


@pytest.fixture
def tiny_spec(tmp_path) -> Path:
    path = tmp_path / "tiny_v1.toml"
    path.write_text(TINY_SPEC)
    return path


@pytest.fixture
def bench_copy(bench, tmp_path) -> Path:
    """A private copy of the bench a test may change."""
    target = tmp_path / "bench"
    shutil.copytree(bench, target)
    return target

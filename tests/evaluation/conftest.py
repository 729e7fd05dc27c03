"""Fixtures of the evaluation-runner tests: a real tiny Qwen2 model, a small real bench, a tiny
protocol spec (2 tasks x 2 repeats, short turns) and real bubblewrap sandboxes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

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

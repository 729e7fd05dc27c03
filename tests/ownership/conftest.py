"""Builders for the ownership tests: a fresh experiments root and tiny safetensors model folders."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest
from fake_models import write_model

from skillgate_core.ownership import create_experiment


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An empty experiments root (SKILLGATE_HOME/experiments)."""
    r = tmp_path / "experiments"
    r.mkdir()
    return r


@pytest.fixture
def experiment(root: Path) -> str:
    create_experiment(root, "exp-1", algorithm="grpo:skillgate", data="rl@abc", init="sft@def",
                      hypothesis="selector credit beats task-only credit")
    return "exp-1"


@pytest.fixture
def model_writer() -> Callable[..., Callable[[Path], None]]:
    """model_writer(shards=..., config=...) -> a `write(tmp_dir)` callback for build_export."""

    def make(shards: Mapping[str, Sequence[str]] | None = None, config: bool = True) -> Callable[[Path], None]:
        return lambda folder: write_model(folder, shards, config)

    return make

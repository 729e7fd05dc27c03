"""A small real suite, built once per session (32 tasks: every family, domain and split)."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchgen_small import SMALL

from skillgate_core.benchgen import build_suite


@pytest.fixture(scope="session")
def small_suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    bench = tmp_path_factory.mktemp("suite") / "bench"
    build_suite(SMALL, bench)
    return bench

"""Fixtures of the warehouse tests: a fresh SKILLGATE_HOME and the realistic lineage of wh_scenario."""

from __future__ import annotations

from pathlib import Path

import pytest
from wh_scenario import Scenario, lineage_scenario

from skillgate_core.base.paths import StateLayout, state_layout


@pytest.fixture
def state(skillgate_home: Path) -> StateLayout:
    """A fresh SKILLGATE_HOME (env var set) as a StateLayout."""
    return state_layout(skillgate_home)


@pytest.fixture
def scenario(state: StateLayout) -> Scenario:
    return lineage_scenario(state)

"""Real sandboxes (bubblewrap): the validity gate on a sample of every family, and skill-criticality
(the oracle follower succeeds, every lookalike follower and the no-skill agent fail)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillgate_core.benchgen import criticality_problems, gate_suite, measure_criticality, suite_stats
from skillgate_core.benchgen.criticality import AGENTS

pytestmark = pytest.mark.usefixtures("bwrap_ready")


def test_validity_gate_on_a_sample_of_every_family(small_suite: Path):
    gate = gate_suite(small_suite, "sample", per_family=1, backend="bwrap")
    summary = gate["summary"]
    assert summary["overall"]["gated"] == 12  # 4 families x 3 splits
    assert summary["overall"]["valid"] == 12, [t for t in gate["tasks"] if not t["valid"]]
    assert set(summary["by_family"]) == {"procedural", "diagnosis", "constraints", "planning"}
    for task in gate["tasks"]:
        assert task["nop_scores"] == [0.0, 0.0] and task["oracle_scores"] == [1.0, 1.0]
    assert suite_stats(small_suite)["gate"]["overall"]["valid"] == 12
    assert json.loads((small_suite / "gate.json").read_text())["mode"] == "sample"


def test_skill_criticality_thresholds_hold_on_a_sample(small_suite: Path):
    report = measure_criticality(small_suite, per_family=1, backend="bwrap", jobs=2)
    assert report.errors == 0
    assert set(report.table) == {"procedural", "diagnosis", "constraints", "planning"}
    for rates in report.table.values():
        assert set(rates) == set(AGENTS)
    assert criticality_problems(report) == []
    assert len(report.episodes) == 4 * len(AGENTS)

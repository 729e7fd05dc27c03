"""Slow: the real eval70_v1 protocol (70 tasks x 4 repeats, 30 turns, 16k context) on the tiny model,
real bubblewrap sandboxes: it completes with 280 trial rows.  `pytest -m slow tests/evaluation`"""

from __future__ import annotations

import polars as pl
import pyarrow.parquet as pq
import pytest

from skillgate_core.base.paths import state_layout
from skillgate_core.benchgen import BenchBuildConfig, build_suite
from skillgate_core.evaluation.owner import resolve_policy
from skillgate_core.evaluation.rows import trial_arrow_schema
from skillgate_core.evaluation.runner import EvalRunConfig, run_evaluation
from skillgate_core.evaluation.specs import build_protocol, load_spec

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("bwrap_ready")]


def test_eval70_v1_on_the_tiny_model_completes_with_280_rows(skillgate_home, tiny_model_dir, tmp_path):
    bench = tmp_path / "bench"
    build_suite(BenchBuildConfig(seed=0, train_skills_per_cell=1, train_tasks_per_skill=1, eval_tasks=70,
                                 slate_tasks=0), bench)
    resolved = build_protocol(load_spec("eval70_v1"), bench)
    assert resolved.note() == "" and resolved.trial_count() == 280
    ref = resolve_policy(str(tiny_model_dir), root=state_layout().experiments)
    result = run_evaluation(resolved, ref, EvalRunConfig(batch_episodes=20, sandbox_workers=2), progress=False)
    assert result.status == "completed" and result.trials_run == 280
    frame = pl.read_parquet(result.parquet)
    assert frame.height == 280 and pq.read_schema(result.parquet).remove_metadata().equals(trial_arrow_schema())
    assert frame["task_id"].n_unique() == 70 and sorted(set(frame["repeat"])) == [0, 1, 2, 3]
    assert set(frame["protocol_id"]) == {resolved.protocol.protocol_id()}
    assert result.summary["trials"] == 280 and result.summary["tasks"] == 70 and "pass@4" in result.summary

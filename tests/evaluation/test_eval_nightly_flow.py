"""The eval70-nightly flow under a real Prefect test server, evaluating a real tiny model export with real
sandboxes through the `eval70` stage sub-flow: the first night has nothing to compare with; a night
whose trial success drops outside the bootstrap interval is flagged (artifact + warehouse row) and the
flow run ends Failed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from skillgate_core.base.paths import state_layout
from skillgate_core.ownership import build_export, create_experiment, finish_segment, start_segment

pytestmark = pytest.mark.usefixtures("prefect_server", "bwrap_ready")


def test_nightly_flags_a_regression_and_fails_the_run(skillgate_home, tiny_model_dir, bench, tiny_spec):
    from prefect.artifacts import Artifact

    from flows.eval_nightly import RegressionDetected, eval70_nightly
    from skillgate_core.ownership import experiment_dir, list_eval_rows
    from warehouse import query, verify

    root = state_layout().experiments
    create_experiment(root, "grpo-nightly", algorithm="grpo:test", data="d", init="i", hypothesis="h")
    start_segment(root, "seg-a", experiment_id="grpo-nightly")
    build_export(root, "grpo-nightly", "step-1", run_name="seg-a", step=1,
                 write=lambda tmp: shutil.copytree(tiny_model_dir, tmp, dirs_exist_ok=True))
    finish_segment(root, "grpo-nightly", "seg-a", "completed")
    params = {"experiments": ["grpo-nightly"], "bench": str(bench), "protocol": str(tiny_spec),
              "batch_episodes": 4, "n_boot": 200, "trigger": "test"}

    first = eval70_nightly(**params, date="2026-01-01")
    [night1] = first["results"]
    assert night1["check"] is None and not night1["regressed"] and night1["error"] is None
    assert night1["eval_id"].endswith("__nightly-2026-01-01") and night1["export_id"] == "step-1"
    assert query("select stage, status from v_run where stage = 'eval70'").rows == [("eval70", "completed")]
    assert query("select count(*) from v_eval_trial where eval_id like '%nightly-2026-01-01'").rows == [(4,)]
    assert query("select regressed, baseline_eval_id from eval_regression").rows == [(False, None)]
    # The first night's page shows tonight's number (it was an empty cell, and 0.0 in the warehouse
    # whatever the trials said), the verdict next to it, and no cell a lone "-" (a bullet in the UI).
    night1_rows = list_eval_rows(experiment_dir(root, "grpo-nightly"), night1["eval_id"]).values()
    success = sum(r["outcome"] == "resolved" for r in night1_rows) / len(night1_rows)
    [row] = json.loads(Artifact.get("eval70-nightly").data)
    assert list(row)[:3] == ["experiment", "verdict", "trial_success"]
    assert row["trial_success"] == f"{success:.3f}" and row["verdict"] == "first nightly"
    assert all(str(v).strip() != "-" for v in row.values()), row
    assert query("select current_value from eval_regression").rows == [(success,)]

    # make the first night look perfect: tonight's tiny model (all fails) is then far below it
    rows_dir = root / "grpo-nightly" / "eval" / night1["eval_id"] / "rows"
    for row_file in rows_dir.glob("*/row.json"):
        row = json.loads(row_file.read_text())
        row_file.write_text(json.dumps({**row, "outcome": "resolved", "score": 1.0}))
    state = eval70_nightly(**params, date="2026-01-02", return_state=True)
    assert state.is_failed()
    with pytest.raises(RegressionDetected, match="grpo-nightly: trial success dropped by 1.000"):
        state.result()
    got = query("select eval_id, baseline_eval_id, regressed, delta, ci_high from eval_regression "
                "where regressed").rows
    assert len(got) == 1 and got[0][1] == f"grpo-nightly/{night1['eval_id']}" and got[0][3] == -1.0
    assert got[0][0].endswith("__nightly-2026-01-02") and got[0][4] < 0
    table = Artifact.get("eval70-nightly")
    assert table is not None and "REGRESSION" in str(table.data)
    flag = Artifact.get("eval70-nightly-regressions")
    assert flag is not None and "grpo-nightly" in str(flag.data)
    assert [d for d in verify().drift if d.kind != "pending-events"] == []
    assert Path(bench).is_dir()


def test_a_nightly_with_nothing_to_evaluate_fails_with_the_reason(skillgate_home, bench, tiny_model_dir):
    """The scheduled nightly names no experiment: it follows every experiment with an export, and with
    none it ends Failed saying so (never a Completed run that evaluated nothing)."""
    from flows.eval_nightly import eval70_nightly
    from skillgate_core.evaluation.nightly import nightly_targets
    from skillgate_core.ownership import UnknownExport

    state = eval70_nightly(bench=str(bench), trigger="test", return_state=True)
    assert state.is_failed()
    with pytest.raises(UnknownExport, match="the nightly found no experiment with a published export"):
        state.result()
    state = eval70_nightly(trigger="test", return_state=True)  # no bench given, none on record
    with pytest.raises(FileNotFoundError, match="the nightly needs a bench: none is on record"):
        state.result()

    root = state_layout().experiments
    create_experiment(root, "grpo-empty", algorithm="grpo:test", data="d", init="i", hypothesis="h")
    create_experiment(root, "grpo-one", algorithm="grpo:test", data="d", init="i", hypothesis="h")
    start_segment(root, "seg-a", experiment_id="grpo-one")
    build_export(root, "grpo-one", "step-3", run_name="seg-a", step=3,
                 write=lambda tmp: shutil.copytree(tiny_model_dir, tmp, dirs_exist_ok=True))
    finish_segment(root, "grpo-one", "seg-a", "completed")
    [target] = nightly_targets(root)
    assert (target.experiment_id, target.export_id) == ("grpo-one", "step-3")

"""`skillgate runs` and `skillgate experiments` at 120 columns: every id whole on one line (it is
copied into the next command), the table kept when it fits, and an evaluation listed as the
reference `traj show` / `lineage` take."""

from __future__ import annotations

import shutil

from typer.testing import CliRunner

from deployments.cli import app
from skillgate_core.base.paths import StateLayout
from skillgate_core.ownership import (
    build_export,
    create_experiment,
    finish_segment,
    start_eval,
    start_segment,
)
from skillgate_core.policy.tiny_model import TinyModelConfig
from warehouse import StageRunRecorder, experiment_created, record

runner = CliRunner()
EXPERIMENT = "grpo-selector-clean-oracle-action-credit-20261207T232000-0a1b2c"


def _lines(output: str) -> list[str]:
    return output.splitlines()


def _whole_on_a_line(text: str, output: str) -> bool:
    return any(text in line for line in _lines(output))


def test_runs_at_120_columns_keep_each_id_on_one_line(state: StateLayout, tmp_path):
    root = state.home / "experiments"
    exp = create_experiment(root, EXPERIMENT, algorithm="grpo:test", data="d", init="i", hypothesis="h")
    record(experiment_created(exp, root), state=state)
    ids = [StageRunRecorder.start("grpo", TinyModelConfig(), trigger="cli", state=state,
                                  experiment_id=EXPERIMENT).run_id for _ in range(2)]
    ids.append(StageRunRecorder.start("rl-data-prep", TinyModelConfig(), trigger="cli", state=state).run_id)
    res = runner.invoke(app, ["runs"], env={"COLUMNS": "120"}, terminal_width=120)
    assert res.exit_code == 0, res.output
    assert max(len(line) for line in _lines(res.output)) <= 120, res.output
    for text in [*ids, EXPERIMENT]:
        assert _whole_on_a_line(text, res.output), (text, res.output)
    wide = runner.invoke(app, ["runs"], env={"COLUMNS": "250"}, terminal_width=250)
    assert "┃ run" in wide.output and all(_whole_on_a_line(t, wide.output) for t in ids), wide.output


def test_experiments_at_120_columns_list_whole_evaluation_references(state: StateLayout, tiny_model_dir):
    root = state.home / "experiments"
    create_experiment(root, EXPERIMENT, algorithm="grpo:test", data="d", init="i", hypothesis="h")
    start_segment(root, "seg-a", experiment_id=EXPERIMENT)
    build_export(root, EXPERIMENT, "step-00000200", run_name="seg-a", step=200,
                 write=lambda tmp: shutil.copytree(tiny_model_dir, tmp, dirs_exist_ok=True))
    finish_segment(root, EXPERIMENT, "seg-a", "completed")
    eval_id = "step-00000200__eval70_v1__3e98248947__nightly-2026-12-08"
    start_eval(root, EXPERIMENT, eval_id, export_id="step-00000200", protocol_fingerprint="f" * 64)
    res = runner.invoke(app, ["experiments"], env={"COLUMNS": "120"}, terminal_width=120)
    assert res.exit_code == 0, res.output
    assert _whole_on_a_line(EXPERIMENT, res.output) and _whole_on_a_line(f"{EXPERIMENT}/{eval_id}", res.output), \
        res.output

"""The grpo stage through the real Prefect task: warehouse rows with their lineage, artifacts, reuse
and resume as a user meets them (`skillgate run rl-train --resume`, the flow's `resume` parameter).

One training process (launcher = "process", one worker, one step of one group of two): each run is
~1 min on a loaded 2-core CPU. The Ray path of the same stage is tests/rl/test_grpo_stage.py's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from skillgate_core.base.paths import state_layout
from skillgate_core.ownership import experiment_dir, experiments_root, list_segments
from warehouse import query, verify

pytestmark = pytest.mark.usefixtures("prefect_server")

TINY_PROCESS = {
    "launcher": '"process"', "num_workers": 1, "steps": 1, "group_size": 2, "prompts_per_step": 1,
    "rollout_source": '"teacher"', "max_turns": 4, "teacher_misleading_rate": 0.5, "teacher_no_read_rate": 0.0,
    "learning_rate": 1e-3, "max_rejected_groups": 8, "force_after_groups": 2, "force_after_samples": 8,
    "backend": '"bwrap"', "sandbox_workers": 2,
}
# what the brief promises a researcher can read per step (every other finite number of the row too)
CURVE_METRICS = {
    "reward", "success_rate", "oracle_read_rate", "misleading_read_rate", "clean_oracle_rate",
    "selector_active_fraction", "task_token_mass", "selector_token_mass", "selection_token_share", "kl", "loss",
    "clip_fraction", "rollout_tokens_per_s", "train_tokens_per_s", "time_generate_s", "time_env_s", "time_train_s",
    "time_sync_s", "time_step_s",
}


def _overrides(policy: Path, bench: Path, **grpo: Any) -> list[str]:
    values = {**TINY_PROCESS, **grpo}
    return [f"inputs.sft_model={policy}", f"inputs.bench={bench}", "rl-data-prep.max_tasks=4",
            *(f"grpo.{k}={v}" for k, v in values.items())]


def _rows(sql: str, *params: Any) -> list[dict[str, Any]]:
    return query(sql, list(params)).dicts()


def _artifact(key: str) -> Any:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])),
                                      sort=ArtifactSort.CREATED_DESC, limit=1)
    assert found, f"no artifact {key}"
    return found[0]


def _check_training_rows(grpo: dict[str, Any], *, ordinal: int, steps: list[int]) -> str:
    """The warehouse rows of one trained grpo run; returns its segment id."""
    m, run_id = grpo["metrics"], grpo["run_id"]
    exp_id, seg_id = m["experiment_id"], f"{m['experiment_id']}/{m['run_name']}"
    (run,) = _rows("select * from v_run where run_id = ?", run_id)
    assert (run["stage"], run["experiment_id"], run["status"], run["reused"]) == ("grpo", exp_id, "completed", False)
    (seg,) = _rows("select * from v_segment where run_id = ?", run_id)  # the experiment's segment, no other
    assert (seg["segment_id"], seg["experiment_id"], seg["ordinal"], seg["exit_reason"]) == (
        seg_id, exp_id, ordinal, "completed")
    ckpts = _rows("select * from checkpoint where run_id = ? order by step", run_id)
    assert [(c["segment_id"], c["step"], c["uri"]) for c in ckpts] == [
        (seg_id, c["step"], c["path"]) for c in m["checkpoints"]]
    assert [c["step"] for c in ckpts] == [s + 1 for s in steps]
    (x,) = _rows("select * from export_lineage(?)", f"{exp_id}/{m['export_id']}")
    assert (x["run_id"], x["segment_id"], x["step"], x["weights_sha256"], x["uri"]) == (
        run_id, seg_id, m["export_step"], m["export_weights_sha256"], m["export_path"])
    assert {(i["role"], i["sha256"]) for i in x["inputs"]} == set(grpo["input_digests"].items())
    (ds,) = _rows("select * from dataset_version where sha256 = ?", m["export_weights_sha256"])
    assert (ds["kind"], ds["produced_by_run"]) == ("model_export", run_id)
    metrics = _rows("select * from training_metric where run_id = ?", run_id)
    assert {r["step"] for r in metrics} == set(steps)
    assert {(r["segment_id"], r["experiment_id"]) for r in metrics} == {(seg_id, exp_id)}
    for step in steps:
        names = {r["name"] for r in metrics if r["step"] == step}
        assert CURVE_METRICS <= names, CURVE_METRICS - names
    return seg_id


def test_grpo_run_is_recorded_reused_and_resumed(skillgate_home: Path, policy: Path, bench: Path):
    from deployments.cli import app
    from flows.skillgate import skillgate

    # 1. a fresh run: experiment, segment, checkpoint, export, per-step metrics, artifacts
    first = skillgate(recipe="rl-train", overrides=_overrides(policy, bench), trigger="test")["stages"]["grpo"]
    assert first["status"] == "completed", first
    m = first["metrics"]
    exp_id = m["experiment_id"]
    (exp,) = _rows("select * from experiment")
    assert (exp["experiment_id"], exp["algorithm"]) == (exp_id, "grpo:selector_clean_oracle_action_credit")
    seg_a = _check_training_rows(first, ordinal=0, steps=[0])
    file_rows = [json.loads(line) for line in Path(m["metrics_file"]).read_text().splitlines()]
    # the curve by SQL, through the CLI a researcher uses
    out = CliRunner().invoke(app, ["sql", f"select * from v_training_metric where experiment_id = '{exp_id}' "
                                          "and name = 'reward'", "--format", "json"])
    assert out.exit_code == 0, out.output
    assert [(r["step"], r["value"], r["segment_id"]) for r in json.loads(out.output)] == [
        (0, file_rows[0]["reward"], seg_a)]
    table = _artifact("grpo-training-metrics")
    data = json.loads(table.data) if isinstance(table.data, str) else table.data
    assert [r["step"] for r in data] == [0] and data[0]["reward"] == pytest.approx(file_rows[0]["reward"], rel=1e-3)
    report = _artifact("grpo-training-report")
    assert "![training curves](data:image/png;base64," in report.data and f"--resume {exp_id}" in report.data
    assert "Curves, full size: `SKILLGATE_HOME/" in report.data and "file://" not in report.data
    assert Path(m["curves"]).stat().st_size > 0
    report_ok = verify(state_layout())
    assert report_ok.ok, report_ok.drift
    assert report_ok.checked["checkpoints"] == 1 and report_ok.checked["training_steps"] == 1

    # 2. the same finished config again: reused, nothing trained, nothing new in the experiment
    again = skillgate(recipe="rl-train", overrides=_overrides(policy, bench), trigger="test")["stages"]["grpo"]
    assert again["status"] == "reused" and again["out_dir"] == first["out_dir"]
    assert _rows("select count(*) as n from segment where experiment_id = ?", exp_id) == [{"n": 1}]
    (run,) = _rows("select * from v_run where run_id = ?", again["run_id"])
    assert (run["reused"], run["experiment_id"]) == (True, exp_id)

    # 3. `skillgate run rl-train --resume EXP`: trains on from the checkpoint in a new segment
    args = ["run", "rl-train", "--execute", "--trigger", "test", "--resume", exp_id, *_overrides(policy, bench, steps=2)]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    (resumed,) = _rows("select * from v_run where stage = 'grpo' and not reused and run_id <> ?", first["run_id"])
    (seg_b,) = list_segments(experiment_dir(experiments_root(state_layout()), exp_id))[1:]
    assert seg_b.resumed_from is not None and seg_b.resumed_from.step == 1
    inputs = {r["role"]: r["sha256"] for r in _rows("select * from v_run_input where run_id = ?", resumed["run_id"])}
    resumed_metrics = json.loads(resumed["metrics"])
    assert resumed_metrics["resumed_from_step"] == 1 and resumed_metrics["run_name"] == seg_b.run_name
    seg_b_id = _check_training_rows({"metrics": resumed_metrics, "run_id": resumed["run_id"], "input_digests": inputs},
                                    ordinal=1, steps=[1])
    (row,) = _rows("select * from v_segment where segment_id = ?", seg_b_id)
    assert (row["resumed_from_segment"], row["resumed_from_step"]) == (seg_a, 1)
    curve = _rows("select * from training_curve(?)", exp_id)
    assert [(c["step"], c["optimizer_step"], c["segment_id"]) for c in curve] == [(0, 1, seg_a), (1, 2, seg_b_id)]
    report_ok = verify(state_layout())
    assert report_ok.ok, report_ok.drift

    # 4. the identical resume again is never answered from the stage cache: it tries to train, and
    #    says there is nothing left to train
    with pytest.raises(ValueError, match="nothing left to train"):
        skillgate(recipe="rl-train", overrides=_overrides(policy, bench, steps=2), trigger="test", resume=exp_id)
    (failed,) = _rows("select * from v_run where stage = 'grpo' and status = 'failed'")
    assert failed["experiment_id"] == exp_id and not failed["reused"]
    assert _rows("select count(*) as n from segment where run_id = ?", failed["run_id"]) == [{"n": 0}]
    report_ok = verify(state_layout())
    assert report_ok.ok, report_ok.drift


def test_a_failed_grpo_run_records_what_its_segment_left(skillgate_home: Path, policy: Path, bench: Path,
                                                         monkeypatch: pytest.MonkeyPatch):
    """Step 0 trains and checkpoints, step 1 dies in the update: the segment ends failed, checkpoint 1
    and step 0's metrics are in the warehouse, and verify agrees with the folders."""
    from flows.skillgate import skillgate
    from skillgate_core.rl import grpo

    real = grpo.update_policy
    calls = []

    def update_then_die(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("boom: killed in the second update")
        return real(*args, **kwargs)

    monkeypatch.setattr(grpo, "update_policy", update_then_die)
    with pytest.raises(RuntimeError, match="boom"):
        skillgate(recipe="rl.selector-action-credit", overrides=_overrides(policy, bench, steps=2), trigger="test")
    (run,) = _rows("select * from v_run where stage = 'grpo'")
    assert run["status"] == "failed" and "boom" in run["error"]
    (seg,) = _rows("select * from v_segment where run_id = ?", run["run_id"])
    assert seg["exit_reason"] == "failed" and seg["experiment_id"] == run["experiment_id"]
    assert [c["step"] for c in _rows("select * from checkpoint where run_id = ?", run["run_id"])] == [1]
    assert {r["step"] for r in _rows("select step from training_metric where segment_id = ?", seg["segment_id"])} == {0}
    assert _rows("select count(*) as n from model_export") == [{"n": 0}]
    report = verify(state_layout())
    assert report.ok, report.drift

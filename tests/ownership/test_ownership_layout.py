"""Experiments, checkpoints, evaluations and the on-demand listing: the on-disk layout of docs/method.md 10."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillgate_core.ownership import (
    CheckpointExists,
    EvalExists,
    EvalRowExists,
    ExperimentExists,
    InvalidName,
    OwnershipError,
    UnknownExperiment,
    UnknownExport,
    build_export,
    count_eval_rows,
    create_experiment,
    describe_experiments,
    experiment_dir,
    finish_eval,
    finish_segment,
    list_checkpoints,
    list_eval_rows,
    list_experiments,
    load_experiment,
    save_checkpoint,
    start_eval,
    start_segment,
    write_eval_row,
)
from skillgate_core.ownership.layout import TMP_PREFIX


def test_experiment_json_is_created_once(root: Path, experiment: str):
    exp = experiment_dir(root, experiment)
    data = json.loads(exp.experiment_file.read_text())
    assert data["experiment_id"] == "exp-1" and data["hypothesis"].startswith("selector credit")
    assert load_experiment(root, "exp-1").algorithm == "grpo:skillgate"
    with pytest.raises(ExperimentExists, match="a new experiment is only for a change"):
        create_experiment(root, "exp-1", algorithm="x", data="d", init="i", hypothesis="h")
    assert json.loads(exp.experiment_file.read_text()) == data, "the first record is never overwritten"
    assert [e.experiment_id for e in list_experiments(root)] == ["exp-1"]
    assert not [p for p in exp.root.iterdir() if p.name.startswith(TMP_PREFIX)]
    with pytest.raises(InvalidName):
        create_experiment(root, ".hidden", algorithm="x", data="d", init="i", hypothesis="h")


def test_checkpoints_are_complete_or_absent(root: Path, experiment: str):
    start_segment(root, "run-a", experiment_id=experiment)
    save_checkpoint(root, experiment, "run-a", 5, lambda d: (d / "w.bin").write_bytes(b"1"))
    with pytest.raises(CheckpointExists):
        save_checkpoint(root, experiment, "run-a", 5, lambda d: None)

    def crash(d: Path) -> None:
        (d / "w.bin").write_bytes(b"half")
        raise OSError("killed")

    with pytest.raises(OSError):
        save_checkpoint(root, experiment, "run-a", 6, crash)
    exp = experiment_dir(root, experiment)
    assert [c.step for c in list_checkpoints(exp)] == [5]
    assert sorted(p.name for p in exp.checkpoints("run-a").iterdir()) == ["step_00000005"]
    ended = finish_segment(root, experiment, "run-a", "completed")
    assert ended.exit_reason == "completed" and ended.ended_at
    with pytest.raises(OwnershipError, match="already ended"):
        finish_segment(root, experiment, "run-a", "failed")
    with pytest.raises(OwnershipError, match="start a new segment"):
        save_checkpoint(root, experiment, "run-a", 7, lambda d: None)


def test_evaluations_belong_to_the_experiment_of_their_export(root: Path, experiment: str, model_writer):
    start_segment(root, "run-a", experiment_id=experiment)
    build_export(root, experiment, "step-10", run_name="run-a", step=10, write=model_writer())
    with pytest.raises(UnknownExport, match="own models only"):
        start_eval(root, experiment, "ev-1", export_id="step-99", protocol_fingerprint="fp")
    rec = start_eval(root, experiment, "ev-1", export_id="step-10", protocol_fingerprint="eval70_v1-mixed-4-abc")
    assert rec.status == "running"
    with pytest.raises(EvalExists):
        start_eval(root, experiment, "ev-1", export_id="step-10", protocol_fingerprint="fp")
    for i in range(3):
        write_eval_row(root, experiment, "ev-1", f"t{i}", {"task_id": f"t{i}", "outcome": "resolved"},
                       files=lambda d: (d / "transcript.jsonl").write_text("{}\n"))
    with pytest.raises(EvalRowExists):
        write_eval_row(root, experiment, "ev-1", "t0", {})
    exp = experiment_dir(root, experiment)
    assert count_eval_rows(exp, "ev-1") == 3 and list_eval_rows(exp, "ev-1")["t1"]["task_id"] == "t1"
    assert (exp.row("ev-1", "t2") / "transcript.jsonl").is_file()
    assert finish_eval(root, experiment, "ev-1", "completed").status == "completed"
    with pytest.raises(OwnershipError, match="rows are added while it runs"):
        write_eval_row(root, experiment, "ev-1", "t9", {})


def test_listing_is_read_from_the_folders_when_asked(root: Path, experiment: str, model_writer):
    start_segment(root, "run-a", experiment_id=experiment)
    save_checkpoint(root, experiment, "run-a", 10, lambda d: (d / "w.bin").write_bytes(b"1"))
    build_export(root, experiment, "step-10", run_name="run-a", step=10, write=model_writer())
    start_eval(root, experiment, "ev-1", export_id="step-10", protocol_fingerprint="fp")
    write_eval_row(root, experiment, "ev-1", "t0", {})
    entry = describe_experiments(root)["exp-1"]
    exp = experiment_dir(root, experiment)
    assert entry["algorithm"] == "grpo:skillgate" and entry["path"] == str(exp.root)
    assert entry["exports"] == [{"export_id": "step-10", "run_name": "run-a", "step": 10, "path": str(exp.export("step-10"))}]
    assert entry["checkpoints"] == [{"run_name": "run-a", "step": 10, "path": str(exp.checkpoint("run-a", 10))}]
    assert entry["segments"][0]["run_name"] == "run-a" and entry["segments"][0]["exit_reason"] is None
    assert entry["evals"][0]["status"] == "running" and entry["evals"][0]["rows"] == 1
    # every change shows at once (nothing cached), and nothing but the experiment folders is written
    finish_eval(root, experiment, "ev-1", "failed")
    finish_segment(root, experiment, "run-a", "completed")
    entry = describe_experiments(root, "exp-1")["exp-1"]
    assert entry["evals"][0]["status"] == "failed" and entry["segments"][0]["exit_reason"] == "completed"
    assert sorted(p.name for p in root.iterdir()) == ["exp-1"]
    create_experiment(root, "exp-0", algorithm="a", data="d", init="i", hypothesis="h")
    assert list(describe_experiments(root)) == ["exp-0", "exp-1"]
    assert describe_experiments(root)["exp-0"]["segments"] == []
    with pytest.raises(UnknownExperiment, match="known: exp-0, exp-1"):
        describe_experiments(root, "exp-9")

"""`verify`: the experiment folders and the warehouse agree, and every kind of drift is listed."""

from __future__ import annotations

import shutil

from wh_scenario import Scenario, write_model

from skillgate_core.ownership import build_export, create_experiment, experiment_dir
from skillgate_core.ownership.layout import TMP_PREFIX
from warehouse import RunFinished, record, verify


def _kinds(sc: Scenario) -> set[tuple[str, str]]:
    return {(d.kind, d.subject) for d in verify(sc.state).drift}


def test_a_recorded_scenario_verifies_clean(scenario: Scenario):
    report = verify(scenario.state)
    assert report.ok, report.drift
    assert report.checked == {"experiments": 1, "segments": 2, "checkpoints": 1, "training_steps": 22, "exports": 2,
                              "evaluations": 1, "datasets": 1, "runs": 4}


def test_every_drift_is_listed(scenario: Scenario):
    exp = experiment_dir(scenario.root, "exp-1")
    build_export(scenario.root, "exp-1", "step-30", run_name="seg-b", step=30, write=write_model)  # not recorded
    create_experiment(scenario.root, "exp-2", algorithm="a", data="d", init="i", hypothesis="h")  # not recorded
    shutil.rmtree(exp.export("step-10"))                  # recorded, gone from disk
    with open(exp.export("step-20") / "model.safetensors", "ab") as fh:    # content changed
        fh.write(b"x")
    (exp.exports / f"{TMP_PREFIX}step-40-999999999-dead").mkdir()         # a killed build
    (exp.rows("eval70-step-20") / "t0-r0").rename(exp.rows("eval70-step-20") / "t0-rX")  # row ids differ
    (scenario.state.home / "artifacts" / "rl-data-prep" / "k1" / "rl_train.parquet").write_bytes(b"changed")
    record(RunFinished(run_id="nope", status="completed", finished_at="2025-01-01T00:00:00Z"), state=scenario.state)
    shutil.rmtree(exp.checkpoint("seg-a", 10))                                        # recorded, gone from disk
    exp.checkpoint("seg-b", 15).mkdir(parents=True)                                   # on disk, not recorded
    (exp.checkpoint("seg-b", 15) / "COMPLETE").write_text("2025-01-01T00:00:00Z\n")
    with open(exp.metrics_file("seg-b"), "a") as fh:                                   # a step not recorded
        fh.write('{"step": 20, "reward": 0.5}\n')

    found = _kinds(scenario)
    expected = {
        ("missing-on-disk", "exp-1/step-10"),
        ("digest-mismatch", "exp-1/step-20"),
        ("missing-in-warehouse", "exp-1/step-30"),
        ("missing-in-warehouse", "exp-2"),
        ("mismatch", "exp-1/eval70-step-20"),
        ("digest-mismatch", scenario.rl_sha),
        ("missing-on-disk", "exp-1/seg-a/step_00000010"),
        ("missing-in-warehouse", "exp-1/seg-b/step_00000015"),
        ("mismatch", "exp-1/seg-b"),
    }
    assert expected <= found, expected - found
    assert any(k == "stale-build" for k, _ in found)
    assert any(k == "rejected-event" for k, _ in found)
    quick = {(d.kind, d.subject) for d in verify(scenario.state, digests=False).drift}
    assert ("digest-mismatch", "exp-1/step-20") not in quick and ("missing-on-disk", "exp-1/step-10") in quick

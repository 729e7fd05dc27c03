"""Bad lineage cannot be inserted: each bad event is refused with its reason, later events go on."""

from __future__ import annotations

import json
from typing import Any

import pytest
from wh_scenario import T0, Scenario, run_started

from warehouse import (
    CheckpointSaved,
    DatasetVersion,
    EvalMetric,
    EvalMetrics,
    EvalTrial,
    EvalTrials,
    EvaluationFinished,
    EvaluationStarted,
    ExperimentCreated,
    ModelExported,
    RunFinished,
    RunInput,
    SegmentEnded,
    SegmentStarted,
    TrainingMetric,
    TrainingMetrics,
    event_log,
    ingest,
    query,
    record,
)
from warehouse.spool import list_rejected

SHA = "f" * 64
TRIAL = EvalTrial(row_id="r0", trial_index=0, task_id="t", benchmark="b", repeat=0, outcome="resolved")


def _export(**kw: Any) -> ModelExported:
    base = dict(export_id="exp-1/bad", export_name="bad", experiment_id="exp-1", run_id="grpo-2",
                segment_id="exp-1/seg-b", step=30, uri="/x", weights_sha256=SHA, validated=True, created_at=T0)
    return ModelExported(**{**base, **kw})  # type: ignore[arg-type]


def _checkpoint(**kw: Any) -> CheckpointSaved:
    base = dict(checkpoint_id="exp-1/seg-b/step_00000030", experiment_id="exp-1", segment_id="exp-1/seg-b",
                run_id="grpo-2", step=30, uri="/x", created_at=T0)
    return CheckpointSaved(**{**base, **kw})  # type: ignore[arg-type]


BAD: dict[str, tuple[list[Any], str]] = {
    "checkpoint of an unknown segment": ([_checkpoint(segment_id="exp-1/seg-z")], "segment 'exp-1/seg-z' is unknown"),
    "checkpoint whose segment belongs to another run": ([_checkpoint(run_id="grpo-1")], "foreign key"),
    "checkpoint whose segment belongs to another experiment": ([_checkpoint(experiment_id="exp-9")], "foreign key"),
    "a checkpoint recorded twice": ([_checkpoint(), _checkpoint(checkpoint_id="exp-1/seg-b/again")], "Duplicate key"),
    "training metrics of an unknown segment": (
        [TrainingMetrics(segment_id="exp-1/seg-z", run_id="grpo-2", metrics=(TrainingMetric(0, "reward", 1.0),))],
        "segment 'exp-1/seg-z' is unknown"),
    "training metrics of a segment of another run": (
        [TrainingMetrics(segment_id="exp-1/seg-b", run_id="grpo-1", metrics=(TrainingMetric(0, "reward", 1.0),))],
        "foreign key"),
    "a training metric recorded twice": (
        [TrainingMetrics(segment_id="exp-1/seg-b", run_id="grpo-2", metrics=(TrainingMetric(10, "reward", 1.0),))],
        "Duplicate key"),
    "a training metric that is not finite": (
        [TrainingMetrics(segment_id="exp-1/seg-b", run_id="grpo-2", metrics=(TrainingMetric(99, "kl", float("nan")),))],
        "CHECK constraint"),
    "training metrics of a segment outside any experiment": (
        [run_started("r-tm", "sft"),
         SegmentStarted(segment_id="r-tm", run_name="r-tm", run_id="r-tm", ordinal=0, host="h", pid=1, started_at=T0),
         TrainingMetrics(segment_id="r-tm", run_id="r-tm", metrics=(TrainingMetric(0, "reward", 1.0),))],
        "belongs to no experiment"),
    "export of an unknown run": ([_export(run_id="grpo-9")], "run 'grpo-9' is unknown"),
    "export whose segment belongs to another run": ([_export(run_id="grpo-1")], "foreign key"),
    "export of an unknown segment": ([_export(segment_id="exp-1/seg-z")], "foreign key"),
    "export of an unknown experiment": ([_export(experiment_id="exp-9")], "foreign key"),
    "evaluation of an unknown export": (
        [EvaluationStarted(eval_id="exp-1/ev-x", export_id="exp-1/step-99", protocol_fingerprint="eval70_v1-mixed-4-0123456789",
                           uri="/x", started_at=T0)], "foreign key"),
    "evaluation under an unknown protocol": (
        [EvaluationStarted(eval_id="exp-1/ev-y", export_id="exp-1/step-20", protocol_fingerprint="nope", uri="/x",
                           started_at=T0)], "foreign key"),
    "trials of an unknown evaluation": ([EvalTrials(eval_id="exp-1/ev-x", trials=(TRIAL,))], "evaluation 'exp-1/ev-x' is unknown"),
    "a trial recorded twice": ([EvalTrials(eval_id="exp-1/eval70-step-20", trials=(TRIAL, TRIAL))], "Duplicate key"),
    "metrics of an unknown evaluation": ([EvalMetrics(eval_id="exp-1/ev-x", metrics=(EvalMetric("m", 1.0),))], "is unknown"),
    "a metric recorded twice": (
        [EvalMetrics(eval_id="exp-1/eval70-step-20", metrics=(EvalMetric("trial_success", 0.3),))], "Duplicate key"),
    "an outcome outside resolved/fail/error": (
        [EvalTrials(eval_id="exp-1/eval70-step-20",
                    trials=(EvalTrial(row_id="r9", trial_index=9, task_id="t", benchmark="b", repeat=0, outcome="maybe"),))],  # type: ignore[arg-type]
        "CHECK constraint"),
    "input of an unrecorded dataset": ([RunInput(run_id="grpo-2", role="extra", dataset_sha256=SHA)], "foreign key"),
    "dataset of an unknown producing run": (
        [DatasetVersion(sha256=SHA, uri="/x", dataset_kind="k", created_at=T0, produced_by_run="nope")], "is unknown"),
    "a digest that is not sha256": ([DatasetVersion(sha256="abc", uri="/x", dataset_kind="k", created_at=T0)], "CHECK"),
    "an unknown trigger": ([run_started("r-trig", "sft", trigger="cron")], "CHECK constraint"),
    "a run finished twice": ([RunFinished(run_id="grpo-2", status="completed", finished_at=T0)], "already finished"),
    "a failed run without its error": ([run_started("r-f", "sft"), RunFinished(run_id="r-f", status="failed", finished_at=T0)],
                                       "CHECK constraint"),
    "the end of an unknown run": ([RunFinished(run_id="nope", status="completed", finished_at=T0)], "is unknown"),
    "a segment ended twice": ([SegmentEnded(segment_id="exp-1/seg-a", ended_at=T0, exit_reason="x")], "already ended"),
    "a segment ordinal reused": (
        [SegmentStarted(segment_id="exp-1/seg-c", run_name="seg-c", run_id="grpo-2", ordinal=1, host="h", pid=1,
                        started_at=T0, experiment_id="exp-1")], "Duplicate key"),
    "an evaluation finished twice": ([EvaluationFinished(eval_id="exp-1/eval70-step-20", status="failed", finished_at=T0)],
                                     "already finished"),
    "an experiment redefined": (
        [ExperimentCreated(experiment_id="exp-1", algorithm="other", data="d", init="i", hypothesis="h", uri="/x",
                           created_at=T0)], "different fields"),
}


def _counts(sc: Scenario) -> tuple[Any, ...]:
    return query("select (select count(*) from run), (select count(*) from model_export), (select count(*) from evaluation),"
                 " (select count(*) from eval_trial), (select count(*) from eval_metric), (select count(*) from run_end),"
                 " (select count(*) from dataset_version), (select count(*) from segment)", state=sc.state).rows[0]


def test_every_kind_of_bad_lineage_is_refused_with_its_reason(scenario: Scenario):
    before = _counts(scenario)
    files = {}
    for name, (events, _) in BAD.items():
        files[name] = record(*events, state=scenario.state, ingest_now=False).name
    good = record(run_started("after-the-bad-ones", "sft"), state=scenario.state, ingest_now=False)
    report = ingest(scenario.state, lock_wait_s=10, db_wait_s=10)
    assert (report.ingested, report.rejected, report.pending) == (1, len(BAD), 0)

    log = event_log(scenario.state)
    rejected = {p.name for p in list_rejected(log)}
    for name, (_, reason) in BAD.items():
        assert files[name] in rejected, f"{name}: was accepted"
        text = (log.rejected / (files[name][:-5] + ".reason.txt")).read_text()
        assert reason.lower() in text.lower(), f"{name}: reason {text!r} lacks {reason!r}"
    after = _counts(scenario)
    assert after[0] == before[0] + 1, "the good event after the bad ones is in"
    assert after[1:] == before[1:], "no row of any refused event (nor of its group) is in"
    assert (log.archive / good.name).is_file()


def test_a_group_is_applied_whole_or_not_at_all(scenario: Scenario):
    before = _counts(scenario)
    record(run_started("grp-1", "sft"), RunInput(run_id="grp-1", role="x", dataset_sha256=SHA),
           state=scenario.state, ingest_now=False)
    report = ingest(scenario.state, lock_wait_s=10, db_wait_s=10)
    assert report.rejected == 1 and _counts(scenario) == before


def test_an_unreadable_spool_file_is_rejected_not_fatal(scenario: Scenario):
    log = event_log(scenario.state)
    (log.spool / f"{1:020d}.json").write_text("{not json")
    (log.spool / f"{2:020d}.json").write_text(json.dumps({"format": 1, "events": [{"kind": "nope", "data": {}}]}))
    report = ingest(scenario.state, lock_wait_s=10, db_wait_s=10)
    assert report.rejected == 2 and report.pending == 0
    reasons = sorted(p.read_text() for p in log.rejected.glob("*.reason.txt"))
    assert "EventFormatError" in reasons[0] and "unknown event kind 'nope'" in reasons[1]


@pytest.mark.parametrize("sql", ["insert into run_end values ('x','completed',false,now(),null,null)", "drop table run"])
def test_sql_readers_cannot_write(scenario: Scenario, sql: str):
    import duckdb

    with pytest.raises(duckdb.Error, match="read-only"):
        query(sql, state=scenario.state)


def test_a_rejected_event_can_be_requeued_once_its_parent_exists(scenario: Scenario):
    from warehouse.spool import requeue_rejected

    orphan = record(RunFinished(run_id="late-parent", status="completed", finished_at=T0), state=scenario.state,
                    ingest_now=False)
    assert ingest(scenario.state, lock_wait_s=10, db_wait_s=10).rejected == 1
    record(run_started("late-parent", "sft"), state=scenario.state, ingest_now=False)
    log = event_log(scenario.state)
    requeued = requeue_rejected(log)
    assert len(requeued) == 1 and requeued[0].name > orphan.name, "re-queued after its fix"
    report = ingest(scenario.state, lock_wait_s=10, db_wait_s=10)
    assert (report.ingested, report.rejected) == (2, 0) and list_rejected(log) == []
    assert query("select status from v_run where run_id = 'late-parent'", state=scenario.state).rows == [("completed",)]

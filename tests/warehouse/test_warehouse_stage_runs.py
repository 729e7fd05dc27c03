"""Stage runs are recorded: run (status, trigger, flow run, commit, config), segment, inputs, outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillgate_core.base.digests import path_sha256
from skillgate_core.base.interrupts import SignalStop
from skillgate_core.base.paths import StateLayout
from skillgate_core.pipeline.run import StageRecord
from skillgate_core.policy.tiny_model import TinyModelConfig
from warehouse import StageRunRecorder, query
from warehouse.provenance import git_state


def _stage_record(state: StateLayout, reused: bool = False) -> StageRecord:
    src = state.home / "datasets" / "corpus.txt"
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text("hello")
    out = state.home / "artifacts" / "init-model" / "k" / "model"
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text("{}")
    return StageRecord(stage="init-model", config_digest="", config={}, inputs={"corpus": str(src)},
                       input_digests={"corpus": path_sha256(src)}, outputs={"base_model": str(out)},
                       output_digests={"base_model": path_sha256(out)}, out_dir=str(out.parent),
                       metrics={"params": 123}, seconds=0.1, reused=reused)


def test_a_completed_stage_run_is_recorded_with_its_inputs_and_outputs(state: StateLayout):
    run = StageRunRecorder.start("init-model", TinyModelConfig(), trigger="test", flow_run_id="f-1", state=state)
    row = query("select status, \"trigger\", flow_run_id, git_sha, git_dirty from v_run", state=state).rows
    git = git_state()
    assert row == [("running", "test", "f-1", git.sha, git.dirty)]
    rec = _stage_record(state)
    run.finish(rec)
    res = query("select status, reused, metrics->>'params', config_type from v_run join config using (config_digest)",
                state=state)
    assert res.rows == [("completed", False, "123", "TinyModelConfig")]
    inputs = query("select role, dataset_sha256 from run_input", state=state).rows
    assert inputs == [("corpus", rec.input_digests["corpus"])]
    outs = query("select sha256, kind, produced_by_run from dataset_version where produced_by_run is not null",
                 state=state).rows
    assert outs == [(rec.output_digests["base_model"], "base_model", run.run_id)]
    seg = query("select segment_id, ordinal, pid > 0, exit_reason from v_segment", state=state).rows
    assert seg == [(run.run_id, 0, True, "completed")]


def test_a_failed_stage_run_is_recorded_with_its_error(state: StateLayout):
    run = StageRunRecorder.start("init-model", TinyModelConfig(), trigger="cli", state=state)
    run.fail(RuntimeError("out of memory"))
    res = query("select status, error from v_run", state=state).rows
    assert res == [("failed", "RuntimeError: out of memory")]
    assert query("select exit_reason from v_segment", state=state).rows == [("failed: RuntimeError",)]


@pytest.mark.parametrize("stop", [SignalStop("SIGINT"), SignalStop("SIGTERM"), KeyboardInterrupt()],
                         ids=["sigint", "sigterm", "python-ctrl-c"])
def test_a_stage_run_stopped_by_a_signal_is_recorded_interrupted_with_the_signal(state: StateLayout, stop):
    run = StageRunRecorder.start("init-model", TinyModelConfig(), trigger="cli", state=state)
    run.fail(stop)
    [(status, error)] = query("select status, error from v_run", state=state).rows
    signal_name = stop.signal if isinstance(stop, SignalStop) else "SIGINT"
    assert status == "interrupted" and error.startswith(f"interrupted by {signal_name}")
    assert query("select exit_reason from v_segment", state=state).rows == [("interrupted",)]


def test_a_reused_output_keeps_its_first_producer(state: StateLayout):
    first = StageRunRecorder.start("init-model", TinyModelConfig(), trigger="test", state=state)
    first.finish(_stage_record(state))
    second = StageRunRecorder.start("init-model", TinyModelConfig(), trigger="test", state=state)
    second.finish(_stage_record(state, reused=True))
    rows = query("select run_id, reused from v_run order by started_at, run_id", state=state).rows
    assert {r[1] for r in rows} == {False, True}
    producer = query("select produced_by_run from dataset_version where kind = 'base_model'", state=state).rows
    assert producer == [(first.run_id,)]


def test_unknown_triggers_are_refused_before_anything_runs(state: StateLayout):
    with pytest.raises(ValueError, match="trigger must be one of"):
        StageRunRecorder.start("init-model", TinyModelConfig(), trigger="cron", state=state)


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_server")
def test_the_entry_flow_records_its_stage_runs(skillgate_home: Path):
    from flows.skillgate import skillgate

    small = ["init-model.corpus_lines=300", "init-model.vocab_size=600", "init-model.hidden_size=32"]
    result = skillgate(recipe="init-model", overrides=small, trigger="test")
    run_id = result["stages"]["init-model"]["run_id"]
    rows = query("select run_id, stage, status, \"trigger\", flow_run_id is not null, git_sha from v_run").rows
    assert rows == [(run_id, "init-model", "completed", "test", True, git_state().sha)]
    produced = query("select kind from dataset_version where produced_by_run = ?", [run_id]).rows
    assert produced == [("base_model",)]


@pytest.mark.slow
def test_ray_workers_never_touch_the_warehouse(state: StateLayout):
    import ray

    from warehouse.guard import NotInRayWorker

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        @ray.remote
        def try_record(home: str) -> str:
            from skillgate_core.base.paths import state_layout
            from warehouse import RunFinished, record

            try:
                record(RunFinished(run_id="x", status="completed", finished_at="2025-01-01T00:00:00Z"),
                       state=state_layout(home))
            except NotInRayWorker as exc:
                return str(exc)
            return "recorded"

        assert "inside a Ray worker" in ray.get(try_record.remote(str(state.home)))
    finally:
        ray.shutdown()
    assert not (state.home / "warehouse-log" / "spool").exists() or not any((state.home / "warehouse-log" / "spool").iterdir())


def test_a_training_stage_records_its_ownership_segment(state: StateLayout):
    from skillgate_core.ownership import create_experiment, experiments_root, start_segment
    from warehouse import experiment_created, record

    root = experiments_root(state)
    record(experiment_created(create_experiment(root, "exp-1", algorithm="grpo", data="d", init="i", hypothesis="h"),
                              root), state=state)
    seg = start_segment(root, "run-a", experiment_id="exp-1")
    run = StageRunRecorder.start("grpo", TinyModelConfig(), trigger="schedule", segment=seg, state=state)
    run.finish(_stage_record(state), exit_reason="completed")
    rows = query("select s.segment_id, s.ordinal, s.exit_reason, r.experiment_id, r.status from v_segment s"
                 " join v_run r using (run_id)", state=state).rows
    assert rows == [("exp-1/run-a", 0, "completed", "exp-1", "completed")] and run.segment_id == "exp-1/run-a"

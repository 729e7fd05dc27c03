"""The evaluation runner on a real tiny model, a tiny protocol (2 tasks x 2 repeats) and real bubblewrap
sandboxes: rows with the exact schema, owned by the model's experiment, in the warehouse as they land,
and resumed after a stop or a SIGKILL with only the missing trials played."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from support.trial_schema import POLARS_TRIAL_SCHEMA

from skillgate_core.base.paths import state_layout
from skillgate_core.evaluation.observer import observing
from skillgate_core.evaluation.owner import resolve_policy
from skillgate_core.evaluation.rows import trial_arrow_schema
from skillgate_core.evaluation.runner import EvalRunConfig, run_evaluation
from skillgate_core.evaluation.specs import build_protocol, load_spec
from skillgate_core.evaluation.trials import TRIAL_COLUMNS, trial_seed
from skillgate_core.ownership import (
    build_export,
    create_experiment,
    experiment_dir,
    finish_segment,
    load_eval,
    start_segment,
)

pytestmark = pytest.mark.usefixtures("bwrap_ready")

REPO = Path(__file__).resolve().parents[2]
FAST = EvalRunConfig(batch_episodes=2, sandbox_workers=2, cpu_threads=1)


def _owned_export(root: Path, model_dir: Path, experiment_id: str = "grpo-test-001") -> Path:
    create_experiment(root, experiment_id, algorithm="grpo:test", data="d", init="i", hypothesis="h")
    start_segment(root, "seg-a", experiment_id=experiment_id)
    rec = build_export(root, experiment_id, "step-2", run_name="seg-a", step=2,
                       write=lambda tmp: shutil.copytree(model_dir, tmp, dirs_exist_ok=True))
    finish_segment(root, experiment_id, "seg-a", "completed")
    return Path(rec.path)


def _comparable(rows) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


def test_runner_writes_owned_rows_with_the_schema_and_warehouse_rows(skillgate_home, tiny_model_dir, bench, tiny_spec):
    from warehouse import query, rebuild, verify
    from warehouse.evaluations import WarehouseEvalObserver

    root = state_layout().experiments
    export_dir = _owned_export(root, tiny_model_dir)
    resolved = build_protocol(load_spec(tiny_spec), bench)
    ref = resolve_policy(str(export_dir), root=root)
    assert (ref.kind, ref.experiment_id, ref.export_id, ref.created) == ("export", "grpo-test-001", "step-2", ())
    started = time.perf_counter()
    with observing(WarehouseEvalObserver(trigger="test")):
        result = run_evaluation(resolved, ref, FAST, progress=False)
    assert result.status == "completed" and result.trials_run == 4 and time.perf_counter() - started < 300
    frame = pl.read_parquet(result.parquet)
    assert frame.columns == list(TRIAL_COLUMNS) and dict(frame.schema) == POLARS_TRIAL_SCHEMA
    assert pq.read_schema(result.parquet).remove_metadata().equals(trial_arrow_schema())
    rows = frame.to_dicts()
    p = resolved.protocol
    assert [(r["task_id"], r["repeat"]) for r in rows] == [(t.task_id, k) for t in resolved.tasks for k in range(2)]
    for r in rows:
        assert (r["protocol_id"], r["fingerprint"], r["experiment_id"], r["export_id"], r["method"]) == (
            p.protocol_id(), p.fingerprint(), "grpo-test-001", "step-2", "step-2")
        assert r["policy"] == str(export_dir) and r["benchmark"] in ("constraints", "diagnosis")
        assert r["status"] in ("completed", "truncated") and r["outcome"] in ("resolved", "fail")
        assert r["error"] == "" and len(r["reads"]) == len(r["read_names"])
        assert r["first_read_category"] == (r["reads"][0] if r["reads"] else None)
        assert 1 <= r["turns"] <= 2 and r["loss_tokens"] <= r["response_tokens"] and r["seconds"] > 0
        assert r["seed"] == trial_seed(p.seed, r["task_id"], r["repeat"])
    # owned by the model's experiment, one folder per trial with its log
    exp = experiment_dir(root, "grpo-test-001")
    record = load_eval(exp, result.eval_id)
    assert record.status == "completed" and record.export_id == "step-2" and record.protocol_fingerprint == p.fingerprint()
    assert result.eval_id == f"step-2__{p.protocol_id()}"
    for r in rows:
        log = json.loads((result.rows_dir / f"{r['task_id']}--r{r['repeat']}" / "trajectory.json").read_text())
        assert log["messages"][0]["role"] == "system" and len(log["turns"]) == r["turns"]
    summary = json.loads((result.eval_dir / "summary.json").read_text())
    assert summary["trials"] == 4 and summary["protocol_id"] == p.protocol_id() and "pass@2" in summary
    # the cost block is the rows' own (it read 0 for every column until 2026-12-01)
    cost = summary["cost"]
    assert cost["response_tokens_per_trial"] == pytest.approx(sum(r["response_tokens"] for r in rows) / 4)
    assert cost["turns_per_trial"] == pytest.approx(sum(r["turns"] for r in rows) / 4)
    assert cost["seconds_per_trial"] == pytest.approx(sum(r["seconds"] for r in rows) / 4)
    assert cost["response_tokens_per_trial"] > 0 and cost["turns_per_trial"] >= 1 and cost["seconds_per_trial"] > 0
    # the warehouse holds one eval_trial row per trial with the same values, and agrees with the files
    wh = query("select * from v_eval_trial order by trial_index")
    assert list(wh.columns[: len(TRIAL_COLUMNS)]) == list(TRIAL_COLUMNS)
    wh_rows = [dict(zip(TRIAL_COLUMNS, row[: len(TRIAL_COLUMNS)], strict=True)) for row in wh.rows]
    assert _comparable(wh_rows) == _comparable(rows)
    assert query("select status, attempt, method, trials_total from v_evaluation").rows == [("completed", 1, "step-2", 4)]
    assert query("select value from eval_metric where name = 'trial_success' and scope = 'all'").rows == [
        (summary["trial_success"],)]
    report = verify()
    assert report.drift == [], report.drift
    # the archive of events rebuilds the same rows (the new event kinds replay)
    before = [query(f"select * from {t} order by all").rows for t in ("v_eval_trial", "v_evaluation", "eval_metric")]
    assert rebuild().failed == []
    assert [query(f"select * from {t} order by all").rows for t in ("v_eval_trial", "v_evaluation", "eval_metric")] == before
    # evaluating again returns the completed evaluation without playing anything
    again = run_evaluation(resolved, ref, FAST, progress=False)
    assert again.status == "completed" and again.trials_run == 0 and _comparable(again.rows) == _comparable(result.rows)


def test_an_unowned_model_gets_a_standalone_evaluation_experiment(skillgate_home, tiny_policy_dir, bench, tiny_spec):
    tiny_model_dir = tiny_policy_dir  # both shapes: Qwen2 and Llama (SmolLM2's)
    root = state_layout().experiments
    ref = resolve_policy(str(tiny_model_dir), root=root)
    assert ref.kind == "model" and ref.experiment_id.startswith("standalone-eval-") and ref.standalone
    assert ref.created == ("experiment", "segment", "export") and ref.export_id.startswith("model-")
    assert resolve_policy(str(tiny_model_dir), root=root).experiment_id == ref.experiment_id  # stable, nothing new
    resolved = build_protocol(load_spec(tiny_spec), bench, demo_repeats=1)
    result = run_evaluation(resolved, ref, FAST, progress=False)
    assert result.status == "completed" and len(result.rows) == 2
    assert {r["experiment_id"] for r in result.rows} == {ref.experiment_id}
    assert result.summary["demo"] == {"repeats": 1}


def test_stopped_evaluation_resumes_only_the_missing_trials(skillgate_home, tiny_model_dir, bench, tiny_spec,
                                                            tmp_path, monkeypatch):
    resolved = build_protocol(load_spec(tiny_spec), bench)
    ref = resolve_policy(str(tiny_model_dir), root=state_layout().experiments)
    # max_trials=1 plays 1 trial even when a batch holds 4 (it used to play the whole batch, and complete)
    first = run_evaluation(resolved, ref, EvalRunConfig(batch_episodes=4, max_trials=1), progress=False)
    assert (first.status, first.trials_done, first.trials_run) == ("incomplete", 1, 1)
    exp = experiment_dir(state_layout().experiments, ref.experiment_id)
    assert load_eval(exp, first.eval_id).status == "incomplete"
    second = run_evaluation(resolved, ref, EvalRunConfig(batch_episodes=3, max_trials=2), progress=False)
    assert (second.status, second.trials_done, second.trials_run) == ("incomplete", 3, 2)
    # another batch make-up on the resume: each trial samples from its own seed
    rest = run_evaluation(resolved, ref, EvalRunConfig(batch_episodes=3), progress=False)
    assert (rest.status, rest.trials_done, rest.trials_run) == ("completed", 4, 1)
    assert load_eval(exp, rest.eval_id).attempt == 3
    # the same rows as one uninterrupted run in a fresh state dir
    monkeypatch.setenv("SKILLGATE_HOME", str(tmp_path / "reference-home"))
    ref2 = resolve_policy(str(tiny_model_dir), root=state_layout().experiments)
    whole = run_evaluation(resolved, ref2, EvalRunConfig(batch_episodes=4), progress=False)
    assert whole.trials_run == 4 and _comparable(whole.rows) == _comparable(rest.rows)


_KILLED_RUN = """
import sys
from skillgate_core.evaluation.observer import observing
from skillgate_core.evaluation.owner import resolve_policy
from skillgate_core.evaluation.runner import EvalRunConfig, run_evaluation
from skillgate_core.evaluation.specs import build_protocol, load_spec
from skillgate_core.base.paths import state_layout
from warehouse.evaluations import WarehouseEvalObserver
spec, bench, model = sys.argv[1:4]
ref = resolve_policy(model, root=state_layout().experiments)
with observing(WarehouseEvalObserver(trigger="test")):
    run_evaluation(build_protocol(load_spec(spec), bench), ref, EvalRunConfig(batch_episodes=1), progress=False)
"""


def test_killed_evaluation_resumes_only_the_missing_trials(skillgate_home, tiny_model_dir, bench, tiny_spec):
    from warehouse import query, verify
    from warehouse.evaluations import WarehouseEvalObserver

    env = {**os.environ, "SKILLGATE_HOME": str(skillgate_home), "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_RUN, str(tiny_spec), str(bench), str(tiny_model_dir)],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    root = state_layout().experiments
    deadline = time.monotonic() + 600
    rows_dirs: list[Path] = []
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            rows_dirs = [p for p in root.glob("*/eval/*/rows/*") if (p / "row.json").is_file()]
            if rows_dirs:
                break
            time.sleep(0.2)
        assert rows_dirs, f"no trial row appeared; stderr: {proc.stderr.read() if proc.poll() is not None else ''}"
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed: make it slower"
    before = {p.name for p in root.glob("*/eval/*/rows/*") if (p / "row.json").is_file()}
    assert 1 <= len(before) < 4
    resolved = build_protocol(load_spec(tiny_spec), bench)
    ref = resolve_policy(str(tiny_model_dir), root=root)
    exp = experiment_dir(root, ref.experiment_id)
    [eval_dir] = list(exp.evals.iterdir())
    assert load_eval(exp, eval_dir.name).status == "running"  # killed: nobody said otherwise
    with observing(WarehouseEvalObserver(trigger="test")):
        result = run_evaluation(resolved, ref, FAST, progress=False)
    assert result.status == "completed" and result.trials_run == 4 - len(before)
    assert load_eval(exp, result.eval_id).attempt == 2
    statuses = query("select status, attempt from evaluation_status order by seq").rows
    assert statuses == [("incomplete", 1), ("running", 2)]
    assert query("select status from v_evaluation").rows == [("completed",)]
    assert query("select count(*) from eval_trial").rows == [(4,)]
    assert verify().drift == []


def test_a_row_published_but_never_recorded_is_recorded_by_the_next_attempt(skillgate_home, tiny_model_dir, bench,
                                                                             tiny_spec):
    """A process killed between a row's write and its warehouse record leaves a row on disk the warehouse lacks
    (an attempt with nobody recording stands in for that window here): the next recorded attempt records it, so
    the warehouse ends with every trial, once (before: 3 of 4, and the killed-run test above failed now and then)."""
    from warehouse import query, verify
    from warehouse.evaluations import WarehouseEvalObserver

    resolved = build_protocol(load_spec(tiny_spec), bench)
    ref = resolve_policy(str(tiny_model_dir), root=state_layout().experiments)
    one = EvalRunConfig(batch_episodes=1, sandbox_workers=2, cpu_threads=1, max_trials=1)
    with observing(WarehouseEvalObserver(trigger="test")):
        run_evaluation(resolved, ref, one, progress=False)
    assert query("select count(*) from eval_trial").rows == [(1,)]
    run_evaluation(resolved, ref, one, progress=False)  # published, never recorded
    assert query("select count(*) from eval_trial").rows == [(1,)]
    with observing(WarehouseEvalObserver(trigger="test")):
        result = run_evaluation(resolved, ref, FAST, progress=False)
    assert result.status == "completed" and result.trials_run == 2
    assert query("select count(*), count(distinct row_id) from eval_trial").rows == [(4, 4)]
    assert query("select status from v_evaluation").rows == [("completed",)]
    assert verify().drift == []


def test_a_protocol_longer_than_the_models_positions_is_said(skillgate_home, tiny_model_dir, bench, tiny_spec):
    """The tiny model has 8,192 positions: eval70_v1 (16,384) warns and names a protocol that fits; the tiny
    spec (4,096) does not warn."""
    import warnings

    root = state_layout().experiments
    ref = resolve_policy(str(tiny_model_dir), root=root)
    long = build_protocol(load_spec("eval70_v1"), bench, demo_repeats=1)
    with pytest.warns(UserWarning, match=r"allows 16,384 context tokens.*trained to 8,192 positions.*eval70_v1_ctx8k"):
        run_evaluation(long, ref, EvalRunConfig(batch_episodes=1, sandbox_workers=1, max_trials=1), progress=False)
    short = build_protocol(load_spec(tiny_spec), bench, demo_repeats=1)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*context tokens.*")
        run_evaluation(short, ref, EvalRunConfig(batch_episodes=1, sandbox_workers=1, max_trials=1), progress=False)


def test_each_evaluation_bar_is_labelled_with_its_method(skillgate_home, tiny_model_dir, bench, tiny_spec, capsys):
    # Two arms evaluated on one protocol in one run (the demo's eval70 and eval70:mixed-task-reward) used to
    # show two bars with the same label, the protocol id: which arm is which must be readable on the bar.
    resolved = build_protocol(load_spec(tiny_spec), bench, demo_repeats=1)
    ref = resolve_policy(str(tiny_model_dir), root=state_layout().experiments)
    labels = {}
    for method in ("arm-skillgate", "arm-baseline"):
        run_evaluation(resolved, ref, EvalRunConfig(batch_episodes=1, max_trials=1, method=method, tag=method))
        bar = capsys.readouterr().err.strip().splitlines()[-1]
        labels[method] = bar.split(":", 1)[0]
    assert labels["arm-skillgate"] != labels["arm-baseline"]
    for method, label in labels.items():
        assert method in label and resolved.protocol.protocol_id() in label, labels

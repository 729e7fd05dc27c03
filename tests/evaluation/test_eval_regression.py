"""The nightly regression flag on synthetic previous/current rows: the seeded task-cluster bootstrap,
the comparison with the previous nightly of the same fingerprint (ownership), and its warehouse row."""

from __future__ import annotations

import random

import pytest
from fake_export import write_fake_model

from skillgate_core.base.paths import state_layout
from skillgate_core.evaluation.nightly import compare_nightly, nightly_targets, previous_nightly
from skillgate_core.evaluation.regression import check_regression, paired_task_bootstrap, task_successes
from skillgate_core.ownership import (
    build_export,
    create_experiment,
    finish_eval,
    finish_segment,
    start_eval,
    start_segment,
    write_eval_row,
)


def rows(success: dict[str, list[bool]]) -> list[dict]:
    return [{"task_id": t, "benchmark": "procedural", "repeat": r, "outcome": "resolved" if ok else "fail"}
            for t, oks in success.items() for r, ok in enumerate(oks)]


def synthetic(rate: float, seed: int, tasks: int = 70, repeats: int = 4) -> dict[str, list[bool]]:
    rng = random.Random(seed)
    return {f"t{i:03d}": [rng.random() < rate for _ in range(repeats)] for i in range(tasks)}


def test_bootstrap_flags_only_a_drop_outside_the_interval():
    same = synthetic(0.6, seed=1)
    check = check_regression(rows(same), rows(same))
    assert (check.delta, check.ci_low, check.ci_high, check.regressed) == (0.0, 0.0, 0.0, False)
    big_drop = check_regression(rows(synthetic(0.2, seed=2)), rows(synthetic(0.8, seed=3)))
    assert big_drop.regressed and big_drop.ci_high < 0 and big_drop.delta < -0.4 and big_drop.tasks == 70
    noise = check_regression(rows(synthetic(0.58, seed=4)), rows(synthetic(0.6, seed=5)))
    assert not noise.regressed and noise.ci_low < 0 < noise.ci_high
    improved = check_regression(rows(synthetic(0.8, seed=2)), rows(synthetic(0.2, seed=3)))
    assert not improved.regressed and improved.ci_low > 0
    # seeded: the same draw gives the same interval; errors count as unresolved
    assert check_regression(rows(synthetic(0.2, seed=2)), rows(synthetic(0.8, seed=3))) == big_drop
    err = [{"task_id": "a", "outcome": "error"}, {"task_id": "a", "outcome": "resolved"}]
    assert task_successes(err) == {"a": (1, 2)}
    with pytest.raises(ValueError, match="different tasks"):
        paired_task_bootstrap({"a": (1, 1)}, {"b": (1, 1)})


def _experiment_with_export(root, experiment_id):
    create_experiment(root, experiment_id, algorithm="grpo:test", data="d", init="i", hypothesis="h")
    start_segment(root, "seg-a", experiment_id=experiment_id)
    for step in (10, 20):
        build_export(root, experiment_id, f"step-{step}", run_name="seg-a", step=step, write=write_fake_model)
    finish_segment(root, experiment_id, "seg-a", "completed")


def _nightly_eval(root, experiment_id, export_id, tag, success, fingerprint="f" * 64):
    eval_id = f"{export_id}__tiny__{tag}"
    start_eval(root, experiment_id, eval_id, export_id=export_id, protocol_fingerprint=fingerprint, extra={"tag": tag})
    for i, row in enumerate(rows(success)):
        write_eval_row(root, experiment_id, eval_id, f"{row['task_id']}--r{row['repeat']}", {**row, "trial_index": i})
    finish_eval(root, experiment_id, eval_id, "completed")
    return eval_id


def test_nightly_compares_with_the_previous_nightly_of_the_same_fingerprint_and_records_it(skillgate_home):
    from skillgate_core.ownership import experiment_dir, list_eval_rows
    from warehouse import query
    from warehouse.evaluations import ensure_export_recorded, record_regression, trial_event
    from warehouse.events import EvalProtocol, EvalTrials, EvaluationFinished, EvaluationStarted
    from warehouse.ids import eval_key, export_key
    from warehouse.recording import record

    root = state_layout().experiments
    _experiment_with_export(root, "exp-n")
    [target] = nightly_targets(root, experiments=["exp-n"])
    assert (target.experiment_id, target.export_id) == ("exp-n", "step-20")  # the newest export
    good, bad = synthetic(0.8, seed=3, tasks=30), synthetic(0.1, seed=4, tasks=30)
    first = _nightly_eval(root, "exp-n", "step-10", "nightly-2026-01-01", good)
    _nightly_eval(root, "exp-n", "step-10", "manual", bad)  # not a nightly: never the baseline
    _nightly_eval(root, "exp-n", "step-20", "nightly-2026-01-02", bad, fingerprint="e" * 64)  # other protocol
    current = _nightly_eval(root, "exp-n", "step-20", "nightly-2026-01-03", bad)
    assert previous_nightly(root, "exp-n", "f" * 64, current).eval_id == first
    assert compare_nightly(root, "exp-n", first).check is None  # the first nightly has nothing to compare with
    comparison = compare_nightly(root, "exp-n", current, n_boot=500)
    assert comparison.previous_eval_id == first and comparison.previous_export_id == "step-10"
    assert comparison.regressed and comparison.check.ci_high < 0
    # the warehouse row (evaluations recorded as the runner's observer would)
    ensure_export_recorded(root, "exp-n", "step-10")
    ensure_export_recorded(root, "exp-n", "step-20")
    record(EvalProtocol(fingerprint="f" * 64, spec_id="tiny", body={"x": 1}, created_at="2026-01-01T00:00:00Z"))
    for eval_id, export in ((first, "step-10"), (current, "step-20")):
        key = eval_key("exp-n", eval_id)
        trials = [trial_event({**r, "row_id": rid, "score": float(r["outcome"] == "resolved"), "turns": 1, "reads": [],
                               "read_names": [], "status": "completed", "raw_score": None, "error": "",
                               "first_read_category": None, "skill_reasoning": False, "response_tokens": 1,
                               "loss_tokens": 1, "seconds": 0.1, "seed": 1})
                  for rid, r in list_eval_rows(experiment_dir(root, "exp-n"), eval_id).items()]
        record(EvaluationStarted(eval_id=key, export_id=export_key("exp-n", export), protocol_fingerprint="f" * 64,
                                 uri="/x", started_at="2026-01-01T00:00:00Z"),
               EvalTrials(eval_id=key, trials=tuple(trials)),
               EvaluationFinished(eval_id=key, status="completed", finished_at="2026-01-01T00:00:01Z"))
    record_regression(comparison, flow_run_id="flow-1")
    got = query("select eval_id, baseline_eval_id, regressed, delta < 0, ci_high < 0, flow_run_id from eval_regression")
    assert got.rows == [(eval_key("exp-n", current), eval_key("exp-n", first), True, True, True, "flow-1")]

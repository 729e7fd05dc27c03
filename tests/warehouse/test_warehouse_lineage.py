"""The named lineage queries answer "which export, from which data, config and commit, made this number"."""

from __future__ import annotations

from wh_scenario import GIT, PROTOCOL, Scenario

from warehouse import (  # names, not logic: one imported name a line
    dataset_upstream,
    experiment_exports,
    export_lineage,
    lineage_tree,
    metric_lineage,
    query,
    read_connection,
    resolve_id,
)


def test_metric_lineage_is_one_query_from_number_to_commit_and_data(scenario: Scenario):
    with read_connection(scenario.state) as con:
        m = metric_lineage(con, "exp-1/eval70-step-20/trial_success")
        assert m is not None
        assert (m["value"], m["n_trials"], m["n_resolved"], m["n_error"]) == (0.25, 8, 2, 2)
        assert m["eval_status"] == "completed" and m["protocol_fingerprint"] == PROTOCOL
        assert m["eval_dataset_sha256"] == scenario.bench_sha  # the metric carries its dataset digest
        assert m["export_id"] == "exp-1/step-20" and m["weights_sha256"] == scenario.export_shas["step-20"]
        assert (m["run_id"], m["stage"], m["run_status"], m["git_sha"], m["git_dirty"]) == (
            "grpo-2", "grpo", "completed", GIT, False)
        assert len(m["config_digest"]) == 64 and '"lr"' in m["config"]
        assert [(i["role"], i["sha256"], i["produced_by_run"]) for i in m["inputs"]] == [
            ("rl_data", scenario.rl_sha, "prep-1")]
        # the view gives the same row for every metric (the macro is its fast one-metric form)
        for metric_id in scenario.metrics:
            view = query("select * from v_metric_lineage where metric_id = ?", [metric_id], scenario.state).dicts()[0]
            assert view == metric_lineage(con, metric_id)
        assert metric_lineage(con, "exp-1/nope") is None


def test_export_lineage_names_the_resumed_segment(scenario: Scenario):
    with read_connection(scenario.state) as con:
        x = export_lineage(con, "exp-1/step-20")
        assert x is not None
        assert (x["segment_id"], x["segment_ordinal"], x["resumed_from_segment"], x["resumed_from_step"]) == (
            "exp-1/seg-b", 1, "exp-1/seg-a", 10)
        assert x["exit_reason"] == "completed" and x["n_evaluations"] == 1 and x["run_id"] == "grpo-2"
        old = export_lineage(con, "exp-1/step-10")
        assert old is not None and old["run_status"] == "failed" and old["exit_reason"] == "preempted"
        rows = experiment_exports(con, "exp-1")
        assert [(r["export_id"], r["step"], r["n_evaluations"]) for r in rows] == [
            ("exp-1/step-10", 10, 0), ("exp-1/step-20", 20, 1)]


def test_dataset_upstream_is_recursive(scenario: Scenario):
    with read_connection(scenario.state) as con:
        up = dataset_upstream(con, scenario.export_shas["step-20"])
        assert [(r["depth"], r["sha256"], r["produced_by_run"], r["via_role"]) for r in up] == [
            (0, scenario.export_shas["step-20"], "grpo-2", None),
            (1, scenario.rl_sha, "prep-1", "rl_data"),
            (2, scenario.bench_sha, None, "bench"),
        ]


def test_lineage_tree_walks_metric_to_the_external_benchmark(scenario: Scenario):
    with read_connection(scenario.state) as con:
        assert resolve_id(con, scenario.metrics[0]) == "metric"
        assert resolve_id(con, "exp-1/step-10") == "export"
        assert resolve_id(con, scenario.bench_sha) == "dataset"
        assert resolve_id(con, "zzz") is None
        node = lineage_tree(con, scenario.metrics[0])
    chain = []
    while node is not None:
        chain.append((node.kind, node.id))
        node = next((c for c in node.children if c.kind != "config"), None)
    assert chain == [
        ("metric", scenario.metrics[0]), ("evaluation", scenario.eval_id), ("export", "exp-1/step-20"),
        ("run", "grpo-2"), ("dataset", scenario.rl_sha), ("run", "prep-1"), ("dataset", scenario.bench_sha),
    ]


def test_training_curve_continues_across_the_resume(scenario: Scenario):
    """seg-a trained steps 0-11, seg-b resumed from checkpoint 10 and trained 10-19: the curve is 0-19,
    with seg-b's rows for the steps both trained (as curves.png draws it); the raw table keeps both."""
    rows = query("select * from v_training_metric where experiment_id = 'exp-1' and name = 'reward' order by step",
                 state=scenario.state).dicts()
    assert [r["step"] for r in rows] == list(range(20))
    assert [r["optimizer_step"] for r in rows] == list(range(1, 21))
    assert [r["run_name"] for r in rows] == ["seg-a"] * 10 + ["seg-b"] * 10
    assert rows[10]["value"] == 1.1 and rows[9]["value"] == 0.09
    assert {(r["run_id"], r["rl_data_sha256"], r["git_sha"]) for r in rows} == {
        ("grpo-1", scenario.rl_sha, GIT), ("grpo-2", scenario.rl_sha, GIT)}
    names = {r[0] for r in query("select distinct name from training_metric", state=scenario.state).rows}
    assert names == {"reward", "rejected/zero_variance"}  # None, booleans and strings are not numbers
    raw = query("select count(*) from training_metric where name = 'reward'", state=scenario.state).rows
    assert raw == [(22,)]
    curve = query("select * from training_curve('exp-1')", state=scenario.state).dicts()
    assert [(c["step"], c["reward"], c["segment_id"]) for c in curve][9:12] == [
        (9, 0.09, "exp-1/seg-a"), (10, 1.1, "exp-1/seg-b"), (11, 1.11, "exp-1/seg-b")]
    assert curve[0]["kl"] is None
    ckpt = query("select checkpoint_id, segment_id, run_id, step from checkpoint", state=scenario.state).rows
    assert ckpt == [("exp-1/seg-a/step_00000010", "exp-1/seg-a", "grpo-1", 10)]

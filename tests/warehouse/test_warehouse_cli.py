"""`skillgate sql`, `skillgate lineage`, `skillgate warehouse status|verify|rebuild|ingest`."""

from __future__ import annotations

import json

from typer.testing import CliRunner
from wh_scenario import Scenario

from deployments.cli import app

runner = CliRunner()


def test_sql_prints_a_table_json_or_csv(scenario: Scenario):
    res = runner.invoke(app, ["sql", "select run_id, status from v_run order by run_id"])
    assert res.exit_code == 0, res.output
    assert "grpo-2" in res.output and "completed" in res.output and "4 row(s)" in res.output
    res = runner.invoke(app, ["sql", "select * from experiment_exports('exp-1')", "--format", "json"])
    rows = json.loads(res.output)
    assert [r["export_id"] for r in rows] == ["exp-1/step-10", "exp-1/step-20"]
    res = runner.invoke(app, ["sql", "select count(*) as n from eval_trial", "-f", "csv"])
    assert res.output.split() == ["n", "8"]


def test_sql_errors_are_one_line_and_exit_2(scenario: Scenario):
    res = runner.invoke(app, ["sql", "selec 1"])
    assert res.exit_code == 2 and "error" in res.output and "syntax error" in res.output
    res = runner.invoke(app, ["sql", "delete from run"])
    assert res.exit_code == 2 and "read-only" in res.output


def test_lineage_prints_the_chain_of_a_metric_and_of_an_export(scenario: Scenario):
    res = runner.invoke(app, ["lineage", "exp-1/eval70-step-20/trial_success"])
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    for part in ("metric exp-1/eval70-step-20/trial_success", "evaluation exp-1/eval70-step-20",
                 "export exp-1/step-20", "run grpo-2", "git_sha=0123456789abcdef", "config", "run prep-1"):
        assert part in out, part
    res = runner.invoke(app, ["lineage", "exp-1/step-10", "--json"])
    tree = json.loads(res.output)
    assert tree["kind"] == "export" and tree["facts"]["segment"] == "exp-1/seg-a" and tree["children"][0]["id"] == "grpo-1"
    res = runner.invoke(app, ["lineage", "exp-1/nothing"])
    assert res.exit_code == 1 and "nothing in the warehouse matches 'exp-1/nothing'" in res.output


def test_warehouse_subcommands(scenario: Scenario):
    res = runner.invoke(app, ["warehouse", "status"])
    assert res.exit_code == 0 and "schema version" in res.output and "eval_trial" in res.output
    res = runner.invoke(app, ["warehouse", "verify"])
    assert res.exit_code == 0 and "files and warehouse agree" in res.output
    scenario.state.warehouse_file.unlink()
    res = runner.invoke(app, ["warehouse", "rebuild"])
    assert res.exit_code == 0 and "rebuilt from" in res.output
    res = runner.invoke(app, ["warehouse", "verify", "--quick", "--json"])
    assert json.loads(res.output)["ok"] is True
    res = runner.invoke(app, ["warehouse", "ingest"])
    assert res.exit_code == 0 and "ingested 0" in res.output
    (scenario.root / "exp-1" / "model" / "exports" / "step-10" / "config.json").unlink()
    res = runner.invoke(app, ["warehouse", "verify"])
    assert res.exit_code == 1 and "digest-mismatch" in res.output


def test_experiments_lists_the_folders_when_asked(scenario: Scenario):
    res = runner.invoke(app, ["experiments", "--json"])
    assert res.exit_code == 0, res.output
    exp = json.loads(res.output)["exp-1"]
    assert [s["run_name"] for s in exp["segments"]] == ["seg-a", "seg-b"]
    assert [c["step"] for c in exp["checkpoints"]] == [10] and [x["export_id"] for x in exp["exports"]] == [
        "step-10", "step-20"]
    res = runner.invoke(app, ["experiments"])
    assert res.exit_code == 0 and "exp-1" in res.output and "step 10" in res.output
    res = runner.invoke(app, ["experiments", "exp-9"])
    assert res.exit_code == 1 and "no experiment 'exp-9'" in res.output


def test_the_training_curve_by_sql(scenario: Scenario):
    res = runner.invoke(app, ["sql", "select step, reward, segment_id from training_curve('exp-1') where step >= 9",
                              "-f", "json"])
    assert res.exit_code == 0, res.output
    assert [(r["step"], r["segment_id"]) for r in json.loads(res.output)] == [
        (9, "exp-1/seg-a"), *((k, "exp-1/seg-b") for k in range(10, 20))]


def test_sql_csv_and_json_print_every_row_and_a_cut_table_says_so(scenario: Scenario):
    query = "select * from range(2500) t(i)"
    res = runner.invoke(app, ["sql", query, "-f", "csv"])
    assert res.exit_code == 0 and res.stdout.split()[1:] == [str(i) for i in range(2500)]
    res = runner.invoke(app, ["sql", query, "-f", "json"])
    assert len(json.loads(res.stdout)) == 2500
    res = runner.invoke(app, ["sql", query, "-f", "csv", "--limit", "10"])
    assert res.stdout.split()[1:] == [str(i) for i in range(10)]
    assert "10 of 2500 rows" in res.stderr and "--limit 0" in res.stderr


def test_sql_prints_agent_text_without_its_terminal_escapes(scenario: Scenario):
    hostile = ("'ok' || chr(27) || '[2J' || chr(27) || ']8;;http://evil' || chr(7) || 'link' || chr(13) "
               "|| 'fake line' || chr(155) || '31m' || chr(10) || 'second' || chr(9) || 'tab'")
    for fmt in ("table", "vertical", "csv", "json"):
        res = runner.invoke(app, ["sql", f"select {hostile} as s", "-f", fmt])
        assert res.exit_code == 0, res.output
        assert not any(c in res.stdout for c in ("\x1b", "\x07", "\r", "\x9b")), (fmt, res.stdout)

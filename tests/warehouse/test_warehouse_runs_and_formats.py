"""`skillgate runs` and `skillgate sql --format table|vertical|csv|json` (vertical when too wide)."""

from __future__ import annotations

import json
import re

from typer.testing import CliRunner
from wh_scenario import Scenario

from deployments.cli import app
from skillgate_core.base.digests import path_sha256
from skillgate_core.base.paths import StateLayout
from skillgate_core.pipeline.run import StageRecord
from skillgate_core.policy.tiny_model import TinyModelConfig
from warehouse import StageRunRecorder

runner = CliRunner()
WIDE = "select * from v_run order by run_id"


def _sql(*args: str, columns: int) -> str:
    res = runner.invoke(app, ["sql", *args], env={"COLUMNS": str(columns)})
    assert res.exit_code == 0, res.output
    return res.output


def test_a_wide_result_is_printed_one_block_per_row(scenario: Scenario):
    out = _sql(WIDE, columns=100)
    assert out.count("-[ row ") == 4 and "(4 row(s))" in out
    # every value whole on its own `column: value` line: a digest can be copied back as it is
    digests = re.findall(r"^config_digest: +([0-9a-f]+)$", out, flags=re.M)
    assert len(digests) == 4 and all(len(d) == 64 for d in digests)
    assert re.search(r"^run_id: +eval-1$", out, flags=re.M) and "┃" not in out
    # the same rows fit a wide terminal: a table
    wide = _sql(WIDE, columns=1000)
    assert "-[ row" not in wide and "┃ run_id" in wide and "4 row(s)" in wide
    # an explicit format wins over the width
    assert "┏━" in _sql(WIDE, "--format", "table", columns=100)
    narrow = _sql("select run_id, status from v_run order by run_id", "-f", "vertical", columns=1000)
    assert narrow.splitlines()[:3] == ["-[ row 1 ]------", "run_id: eval-1", "status: completed"]
    res = runner.invoke(app, ["sql", "select 1", "--format", "wide"])
    assert res.exit_code == 2 and "table, vertical, csv, json" in res.output


def test_runs_lists_the_latest_stage_runs_and_their_outputs(scenario: Scenario):
    res = runner.invoke(app, ["runs"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    lines = [line for line in res.output.splitlines() if line.startswith("│")]
    assert [line.split("│")[1].strip() for line in lines] == ["prep-1", "grpo-2", "grpo-1", "eval-1"]
    grpo2 = next(line for line in lines if "grpo-2" in line)
    assert "completed" in grpo2 and "exp-1" in grpo2 and f"model_export={scenario.export_shas['step-20'][:12]}" in grpo2
    # a printed digest prefix is a reference `skillgate lineage` takes
    res = runner.invoke(app, ["lineage", scenario.export_shas["step-20"][:12]])
    assert res.exit_code == 0 and "run grpo-2" in " ".join(res.output.split()), res.output
    res = runner.invoke(app, ["runs", "--stage", "grpo", "--status", "failed", "--json"])
    (row,) = json.loads(res.output)
    assert (row["run_id"], row["status"], row["experiment_id"], row["error"]) == ("grpo-1", "failed", "exp-1",
                                                                                 "preempted")
    assert row["outputs"] == [{"role": "model_export", "sha256": scenario.export_shas["step-10"],
                               "uri": str(scenario.root / "exp-1" / "model" / "exports" / "step-10")}]
    assert len(json.loads(runner.invoke(app, ["runs", "--limit", "2", "--json"]).output)) == 2
    res = runner.invoke(app, ["runs", "--status", "done"])
    assert res.exit_code == 2 and "--status" in res.output and "interrupted" in res.output


def test_a_reused_run_shows_the_outputs_it_reused(state: StateLayout):
    out = state.home / "artifacts" / "init-model" / "k" / "model"
    out.mkdir(parents=True)
    (out / "config.json").write_text("{}")
    rec = StageRecord(stage="init-model", config_digest="", config={}, inputs={}, input_digests={},
                      outputs={"base_model": str(out)}, output_digests={"base_model": path_sha256(out)},
                      out_dir=str(out.parent), metrics={}, seconds=1.5, reused=False)
    first = StageRunRecorder.start("init-model", TinyModelConfig(), trigger="test", state=state)
    first.finish(rec)
    again = StageRunRecorder.start("init-model", TinyModelConfig(), trigger="cli", state=state)
    again.finish(StageRecord(**{**rec.__dict__, "reused": True, "seconds": 0.0}))
    rows = json.loads(runner.invoke(app, ["runs", "--json"]).output)
    by_id = {r["run_id"]: r for r in rows}
    assert by_id[again.run_id]["reused"] and by_id[again.run_id]["outputs_from"] == first.run_id
    assert by_id[again.run_id]["outputs"] == by_id[first.run_id]["outputs"] != []
    res = runner.invoke(app, ["runs"], env={"COLUMNS": "250"})
    line = next(x for x in res.output.splitlines() if again.run_id in x)
    assert "(reused)" in line and "cli" in line

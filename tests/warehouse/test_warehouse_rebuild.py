"""Delete the warehouse file, rebuild it from the event archive: every lineage answer is the same."""

from __future__ import annotations

from typing import Any

from wh_scenario import Scenario, run_started

from skillgate_core.base.paths import StateLayout
from warehouse import (
    dataset_upstream,
    experiment_exports,
    export_lineage,
    lineage_tree,
    metric_lineage,
    query,
    read_connection,
    rebuild,
    record,
)
from warehouse.status import COUNTED_TABLES

ALL_TABLES = (*COUNTED_TABLES, "config", "run_end", "segment_end", "run_input", "eval_protocol", "evaluation_end",
              "schema_version")


def snapshot(sc: Scenario) -> dict[str, Any]:
    """Every lineage query's answer for every id, and every table's rows (bookkeeping times aside)."""
    out: dict[str, Any] = {}
    with read_connection(sc.state) as con:
        for m in sc.metrics:
            out[f"metric_lineage {m}"] = metric_lineage(con, m)
            out[f"tree {m}"] = repr(lineage_tree(con, m))
        for x in sc.exports.values():
            out[f"export_lineage {x}"] = export_lineage(con, x)
            out[f"tree {x}"] = repr(lineage_tree(con, x))
        out["experiment_exports exp-1"] = experiment_exports(con, "exp-1")
        for sha in (sc.bench_sha, sc.rl_sha, *sc.export_shas.values()):
            out[f"dataset_upstream {sha}"] = dataset_upstream(con, sha)
        for t in ALL_TABLES:
            cols = "version, name" if t == "schema_version" else "*"
            out[f"table {t}"] = con.execute(f"select {cols} from {t} order by all").fetchall()
        out["ingested seqs"] = con.execute("select seq, kinds, written_at from ingested_event order by seq").fetchall()
    return out


def _delete_warehouse(state: StateLayout) -> None:
    for p in (state.warehouse_file, state.warehouse_file.with_name(state.warehouse_file.name + ".wal")):
        p.unlink(missing_ok=True)
    assert not state.warehouse_file.exists()


def test_rebuild_after_deleting_the_file_reproduces_every_lineage_answer(scenario: Scenario):
    before = snapshot(scenario)
    assert before["metric_lineage " + scenario.metrics[0]]["git_sha"]
    _delete_warehouse(scenario.state)
    report = rebuild(scenario.state)
    assert report.failed == [] and report.files > 10
    after = snapshot(scenario)
    assert after.keys() == before.keys()
    for key in before:
        assert after[key] == before[key], key


def test_a_write_to_a_deleted_warehouse_rebuilds_it_first(scenario: Scenario):
    before = snapshot(scenario)
    _delete_warehouse(scenario.state)
    record(run_started("late-run", "sft"), state=scenario.state)  # ingest finds the file gone
    after = snapshot(scenario)
    assert after["metric_lineage " + scenario.metrics[0]] == before["metric_lineage " + scenario.metrics[0]]
    runs = [r[0] for r in query("select run_id from run order by run_id", state=scenario.state).rows]
    assert "late-run" in runs and len(runs) == len(scenario.runs) + 1


def test_rebuild_keeps_pending_events(scenario: Scenario):
    record(run_started("pending-run", "sft"), state=scenario.state, ingest_now=False)
    report = rebuild(scenario.state)
    assert report.after is not None and report.after.ingested == 1
    assert query("select count(*) from run where run_id = 'pending-run'", state=scenario.state).rows == [(1,)]

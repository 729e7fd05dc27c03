"""Named lineage queries over an open connection (read.py gives one), and the lineage tree.

The SQL lives in the schema (migrations/002_lineage_queries.sql) as views and table macros, so the
same queries work from `skillgate sql` and from here:

    with read_connection() as con:
        metric_lineage(con, "exp-1/eval70-s200/trial_success")  # one dict: metric -> ... -> inputs
        export_lineage(con, "exp-1/step-200")
        experiment_exports(con, "exp-1")                        # list of dicts, by step
        dataset_upstream(con, sha256)                           # recursive, depth 0 = itself
        lineage_tree(con, "exp-1/step-200")                     # a LineageNode tree for the CLI

"Which export, trained from which data, config and commit, produced this number?" is
`metric_lineage`: one row with the export, its run's git sha and dirty flag, config digest and
body, the run's inputs, and the trial counts behind the number.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import duckdb

__all__ = [
    "LineageNode",
    "dataset_upstream",
    "experiment_exports",
    "export_lineage",
    "lineage_tree",
    "metric_lineage",
    "resolve_id",
]

Con = duckdb.DuckDBPyConnection
IdKind = Literal["metric", "evaluation", "export", "run", "dataset", "experiment"]


def _dicts(cur: Con) -> list[dict[str, Any]]:
    cols = [d[0] for d in cur.description or ()]
    return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]


def metric_lineage(con: Con, metric_id: str) -> dict[str, Any] | None:
    rows = _dicts(con.execute("select * from metric_lineage(?)", [metric_id]))
    return rows[0] if rows else None


def export_lineage(con: Con, export_id: str) -> dict[str, Any] | None:
    rows = _dicts(con.execute("select * from export_lineage(?)", [export_id]))
    return rows[0] if rows else None


def experiment_exports(con: Con, experiment_id: str) -> list[dict[str, Any]]:
    return _dicts(con.execute("select * from experiment_exports(?)", [experiment_id]))


def dataset_upstream(con: Con, sha256: str) -> list[dict[str, Any]]:
    return _dicts(con.execute("select * from dataset_upstream(?)", [sha256]))


_RESOLVE: tuple[tuple[IdKind, str], ...] = (
    ("metric", "select 1 from eval_metric where metric_id = ?"),
    ("export", "select 1 from model_export where export_id = ?"),
    ("evaluation", "select 1 from evaluation where eval_id = ?"),
    ("run", "select 1 from run where run_id = ?"),
    ("dataset", "select 1 from dataset_version where sha256 = ?"),
    ("experiment", "select 1 from experiment where experiment_id = ?"),
)


def resolve_id(con: Con, some_id: str) -> IdKind | None:
    """What `some_id` names: a metric, export, evaluation, run, dataset digest or experiment."""
    for kind, sql in _RESOLVE:
        if con.execute(sql, [some_id]).fetchone():
            return kind
    return None


@dataclass
class LineageNode:
    """One link of a lineage chain: what it is, its facts, and what it came from."""

    kind: str
    """metric, evaluation, export, segment, run, config, dataset, experiment."""
    id: str
    """Its id (digests are shown in full)."""
    facts: dict[str, Any] = field(default_factory=dict)
    """A few columns worth printing."""
    children: list[LineageNode] = field(default_factory=list)
    """Upstream links."""


def _run_node(con: Con, run_id: str, seen: set[str], depth: int = 0, with_config: bool = True) -> LineageNode:
    row = _dicts(con.execute("select * from run_provenance(?)", [run_id]))
    if not row:
        return LineageNode("run", run_id, {"missing": True})
    r = row[0]
    node = LineageNode("run", run_id, {
        "stage": r["stage"], "status": r["run_status"], "reused": r["reused"], "trigger": r["trigger"],
        "flow_run_id": r["flow_run_id"], "git_sha": r["git_sha"], "git_dirty": r["git_dirty"],
        "started_at": r["started_at"],
    })
    if with_config:
        node.children.append(LineageNode("config", r["config_digest"], {"type": r["config_type"], "body": r["config"]}))
    for inp in r["inputs"]:
        node.children.append(_dataset_node(con, inp["sha256"], inp["role"], seen, depth + 1))
    return node


def _dataset_node(con: Con, sha: str, role: str | None, seen: set[str], depth: int) -> LineageNode:
    row = _dicts(con.execute("select * from dataset_version where sha256 = ?", [sha]))
    facts: dict[str, Any] = {"role": role}
    if row:
        facts.update(kind=row[0]["kind"], uri=row[0]["uri"], produced_by_run=row[0]["produced_by_run"])
    node = LineageNode("dataset", sha, facts)
    producer = facts.get("produced_by_run")
    if producer and depth < 32:
        if producer in seen:  # a shared upstream run is expanded once
            node.children.append(LineageNode("run", producer, {"see": "above"}))
        else:
            seen.add(producer)
            node.children.append(_run_node(con, producer, seen, depth))
    return node


def _export_node(con: Con, export_id: str, seen: set[str]) -> LineageNode:
    x = export_lineage(con, export_id)
    if x is None:
        return LineageNode("export", export_id, {"missing": True})
    node = LineageNode("export", export_id, {
        "step": x["step"], "uri": x["uri"], "weights_sha256": x["weights_sha256"], "validated": x["validated"],
        "segment": x["segment_id"], "segment_ordinal": x["segment_ordinal"], "host": x["host"], "pid": x["pid"],
        "resumed_from": (f"{x['resumed_from_segment']}@{x['resumed_from_step']}" if x["resumed_from_segment"] else None),
        "experiment": x["experiment_id"],
    })
    seen.add(x["run_id"])
    node.children.append(_run_node(con, x["run_id"], seen))
    return node


def _evaluation_node(con: Con, eval_id: str, seen: set[str]) -> LineageNode:
    rows = _dicts(con.execute(
        "select e.*, p.spec_id, (select count(*) from eval_trial t where t.eval_id = e.eval_id) as n_trials"
        " from v_evaluation e join eval_protocol p on p.fingerprint = e.protocol_fingerprint where e.eval_id = ?",
        [eval_id],
    ))
    if not rows:
        return LineageNode("evaluation", eval_id, {"missing": True})
    e = rows[0]
    node = LineageNode("evaluation", eval_id, {
        "status": e["status"], "protocol": e["protocol_fingerprint"], "spec": e["spec_id"],
        "trials": e["n_trials"], "dataset_sha256": e["dataset_sha256"], "eval_run": e["run_id"],
    })
    node.children.append(_export_node(con, e["export_id"], seen))
    return node


def _config_node(con: Con, digest: str, seen: set[str], max_runs: int = 20) -> LineageNode:
    row = con.execute("select config_type, body from config where config_digest = ?", [digest]).fetchone()
    if row is None:
        return LineageNode("config", digest, {"missing": True})
    runs = [r[0] for r in con.execute(
        "select run_id from run where config_digest = ? order by started_at desc, run_id limit ?",
        [digest, max_runs + 1]).fetchall()]
    node = LineageNode("config", digest, {"type": row[0], "body": row[1],
                                          "runs": f"latest {max_runs} shown" if len(runs) > max_runs else len(runs)})
    for run_id in runs[:max_runs]:  # the runs made with this config, newest first
        seen.add(run_id)
        node.children.append(_run_node(con, run_id, seen, with_config=False))
    return node


def lineage_tree(con: Con, some_id: str, kind: str | None = None) -> LineageNode | None:
    """The upstream chain of a metric, evaluation, export, run, dataset digest or experiment (None if
    unknown). `kind` (a resolved reference's, warehouse.refs) skips the exact-id lookup and also
    allows "config": a config digest and the runs made with it."""
    kind = kind or resolve_id(con, some_id)
    seen: set[str] = set()
    if kind == "config":
        return _config_node(con, some_id, seen)
    if kind == "metric":
        m = metric_lineage(con, some_id)
        assert m is not None
        node = LineageNode("metric", some_id, {
            "value": m["value"], "n": m["n"], "scope": m["scope"], "trials": m["n_trials"],
            "resolved": m["n_resolved"], "errors": m["n_error"], "dataset_sha256": m["eval_dataset_sha256"],
        })
        node.children.append(_evaluation_node(con, m["eval_id"], seen))
        return node
    if kind == "evaluation":
        return _evaluation_node(con, some_id, seen)
    if kind == "export":
        return _export_node(con, some_id, seen)
    if kind == "run":
        seen.add(some_id)
        return _run_node(con, some_id, seen)
    if kind == "dataset":
        return _dataset_node(con, some_id, None, seen, 0)
    if kind == "experiment":
        node = LineageNode("experiment", some_id)
        for x in experiment_exports(con, some_id):
            node.children.append(_export_node(con, x["export_id"], seen))
        return node
    return None


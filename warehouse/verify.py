"""Do the files and the warehouse agree? List every difference (drift), change nothing.

Checked, both ways (on disk but not recorded, recorded but gone from disk):
  * experiments (experiment.json vs experiment rows, and their fields);
  * experiment segments (run.json vs segment rows: ordinal, resume point, exit reason);
  * checkpoints (COMPLETE step_N folders vs checkpoint rows: path, segment) and training metrics
    (the steps of a segment's metrics.jsonl vs its training_metric rows);
  * exports (COMPLETE folders vs model_export rows: path, step, segment, and with `digests` the
    recomputed folder sha256 vs weights_sha256); stale temp builds of dead processes;
  * evaluations (eval.json vs evaluation rows: export, protocol, status; ROW_IDs vs eval_trial);
  * datasets produced by runs: the uri still exists (and with `digests`, still has that sha256);
  * runs recorded as running whose process is gone (this host), and temp output folders of stage
    runs whose process is gone: `skillgate warehouse reap` marks the runs interrupted and deletes
    the folders (interrupted.py);
  * the event log: rejected events (with their reason) and events still pending;
  * record files that cannot be read (unreadable-record, naming the file and what is wrong): what
    they would describe is left out of the comparison, and everything else is still checked.

    report = verify(state_layout())
    report.ok, report.drift      # [Drift(kind="missing-in-warehouse", subject="exp-1/step-300", ...)]
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from skillgate_core.base.digests import path_sha256
from skillgate_core.base.paths import StateLayout, state_layout
from skillgate_core.ownership import (
    BadRecord,
    experiment_dir,
    experiments_root,
    list_checkpoints,
    list_evals,
    list_experiments,
    list_exports,
    list_segments,
    stale_builds,
)
from skillgate_core.ownership.layout import ROW_FILE
from skillgate_core.pipeline.stage_workdirs import dead_workdirs
from warehouse.ids import checkpoint_key, eval_key, export_key, segment_key
from warehouse.interrupted import find_dead_runs
from warehouse.read import read_connection, row_count
from warehouse.spool import event_log, list_pending, list_rejected

__all__ = ["DRIFT_KINDS", "Drift", "VerifyReport", "verify"]

DRIFT_KINDS = (
    "missing-in-warehouse",
    "missing-on-disk",
    "mismatch",
    "digest-mismatch",
    "stale-build",
    "dead-run",
    "rejected-event",
    "pending-events",
    "unreadable-record",
)


@dataclass(frozen=True)
class Drift:
    """One disagreement between the files and the warehouse."""

    kind: str
    """One of DRIFT_KINDS."""
    subject: str
    """What it is about (an id, a path, an event file)."""
    detail: str
    """What differs."""


@dataclass(frozen=True)
class VerifyReport:
    """Result of `verify`."""

    drift: list[Drift]
    """Every difference found (empty: files and warehouse agree)."""
    checked: dict[str, int] = field(default_factory=dict)
    """How many things of each kind were compared."""

    @property
    def ok(self) -> bool:
        return not self.drift


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    cur = con.execute(sql)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def _both_ways(drift: list[Drift], what: str, on_disk: set[str], in_wh: set[str], unread: frozenset[str]) -> None:
    for k in sorted(on_disk - in_wh):
        drift.append(Drift("missing-in-warehouse", k, f"{what} on disk has no warehouse row"))
    for k in sorted(in_wh - on_disk):
        if not _unread(k, unread):
            drift.append(Drift("missing-on-disk", k, f"{what} recorded in the warehouse is not on disk"))


def _unread_key(root: Path, bad: BadRecord) -> str:
    """The warehouse key of what an unreadable record describes: EXP for experiment.json, EXP/NAME
    for a segment's run.json, an export's lineage.json or an eval.json (the folder holding it)."""
    try:
        parts = bad.path.relative_to(root).parts
    except ValueError:
        return str(bad.path)
    return parts[0] if len(parts) <= 2 else f"{parts[0]}/{parts[-2]}"


def _unread(key: str, unread: frozenset[str]) -> bool:
    """Is `key` (or what contains it: its experiment, its segment) described by an unreadable record?"""
    return any(key == u or key.startswith(u + "/") for u in unread)


def _mismatch(drift: list[Drift], key: str, row: Mapping[str, Any], **want: object) -> None:
    """One "mismatch" drift for `key` listing every field whose value on disk (`want`) differs from `row`'s."""
    diffs = [f"{f}: disk {v!r} != warehouse {row[f]!r}" for f, v in want.items() if row[f] != v]
    if diffs:
        drift.append(Drift("mismatch", key, "; ".join(diffs)))


def _metric_steps(path: Path) -> set[int]:
    """The steps of a segment's metrics.jsonl (a torn last line of a killed writer is skipped)."""
    if not path.is_file():
        return set()
    steps = set()
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            steps.add(int(json.loads(line)["step"]))
        except (ValueError, KeyError, TypeError):
            continue
    return steps


def verify(state: StateLayout | None = None, *, digests: bool = True) -> VerifyReport:
    state = state or state_layout()
    root = experiments_root(state)
    drift: list[Drift] = []
    with read_connection(state) as con:
        wh_exp = {r["experiment_id"]: r for r in _rows(con, "select * from experiment")}
        wh_seg = {r["segment_id"]: r for r in _rows(con, "select * from v_segment where experiment_id is not null")}
        wh_exp_rows = {r["export_id"]: r for r in _rows(con, "select * from model_export")}
        wh_ckpt = {r["checkpoint_id"]: r for r in _rows(con, "select * from checkpoint")}
        metric_steps: dict[str, set[int]] = {}
        for segment_id, step in con.execute("select distinct segment_id, step from training_metric").fetchall():
            metric_steps.setdefault(segment_id, set()).add(int(step))
        wh_eval = {r["eval_id"]: r for r in _rows(con, "select * from v_evaluation")}
        trial_rows: dict[str, set[str]] = {}
        for eval_id, row_id in con.execute("select eval_id, row_id from eval_trial").fetchall():
            trial_rows.setdefault(eval_id, set()).add(row_id)
        datasets = _rows(con, "select * from dataset_version where produced_by_run is not null and kind <> 'model_export'")
        n_runs = row_count(con, "run")
        dead_runs = find_dead_runs(con)

    disk_exp, disk_seg, disk_x, disk_eval, disk_ckpt = {}, {}, {}, {}, {}
    disk_steps: dict[str, set[int]] = {}
    bad: list[BadRecord] = []
    for rec in list_experiments(root, bad.append):
        exp = experiment_dir(root, rec.experiment_id)
        disk_exp[rec.experiment_id] = (rec, exp)
        for s in list_segments(exp, bad.append):
            disk_seg[segment_key(rec.experiment_id, s.run_name)] = s
            steps = _metric_steps(exp.metrics_file(s.run_name))
            if steps:
                disk_steps[segment_key(rec.experiment_id, s.run_name)] = steps
        for c in list_checkpoints(exp, on_bad=lambda _: None):  # a bad run.json is reported once, above
            disk_ckpt[checkpoint_key(rec.experiment_id, c.run_name, c.step)] = c
        for x in list_exports(exp, on_bad=bad.append):
            disk_x[export_key(rec.experiment_id, x.export_id)] = x
        for tmp in stale_builds(exp.exports):
            drift.append(Drift("stale-build", str(tmp), "temp build of a dead process (removed by the next export)"))
        for e in list_evals(exp, bad.append):
            disk_eval[eval_key(rec.experiment_id, e.eval_id)] = (e, exp)

    for b in bad:
        drift.append(Drift("unreadable-record", str(b.path), f"{b.problem}; what it describes is not compared"))
    unread = frozenset(_unread_key(root, b) for b in bad)

    _both_ways(drift, "experiment", set(disk_exp), set(wh_exp), unread)
    for k in sorted(set(disk_exp) & set(wh_exp)):
        rec, exp = disk_exp[k]
        row = wh_exp[k]
        _mismatch(drift, k, row, algorithm=rec.algorithm, data=rec.data, init=rec.init, hypothesis=rec.hypothesis,
                  uri=str(exp.root))

    _both_ways(drift, "segment", set(disk_seg), set(wh_seg), unread)
    for k in sorted(set(disk_seg) & set(wh_seg)):
        s, row = disk_seg[k], wh_seg[k]
        _mismatch(drift, k, row, ordinal=s.ordinal, exit_reason=s.exit_reason,
                  resumed_from_step=s.resumed_from.step if s.resumed_from else None)

    _both_ways(drift, "checkpoint", set(disk_ckpt), set(wh_ckpt), unread)
    for k in sorted(set(disk_ckpt) & set(wh_ckpt)):
        c, row = disk_ckpt[k], wh_ckpt[k]
        _mismatch(drift, k, row, uri=c.path, step=c.step, segment_id=segment_key(row["experiment_id"], c.run_name))

    for k in sorted(set(disk_steps) | set(metric_steps)):
        if _unread(k, unread):
            continue
        on_disk, recorded = disk_steps.get(k, set()), metric_steps.get(k, set())
        if on_disk != recorded:
            drift.append(Drift("mismatch", k, (
                f"training metrics: {len(on_disk)} step(s) in metrics.jsonl, {len(recorded)} in training_metric; "
                f"only on disk: {sorted(on_disk - recorded)[:5]}, only recorded: {sorted(recorded - on_disk)[:5]}"
            )))

    _both_ways(drift, "export", set(disk_x), set(wh_exp_rows), unread)
    for k in sorted(set(disk_x) & set(wh_exp_rows)):
        x, row = disk_x[k], wh_exp_rows[k]
        _mismatch(drift, k, row, uri=x.path, step=x.step, segment_id=segment_key(x.experiment_id, x.run_name),
                  validated=True)
        if digests:
            actual = path_sha256(Path(x.path))
            if actual != row["weights_sha256"]:
                drift.append(Drift("digest-mismatch", k,
                                   f"folder sha256 {actual[:16]}... != recorded {row['weights_sha256'][:16]}..."))

    _both_ways(drift, "evaluation", set(disk_eval), set(wh_eval), unread)
    for k in sorted(set(disk_eval) & set(wh_eval)):
        (e, exp), row = disk_eval[k], wh_eval[k]
        _mismatch(drift, k, row, export_id=export_key(e.experiment_id, e.export_id),
                  protocol_fingerprint=e.protocol_fingerprint, status=e.status)
        rows_dir = exp.rows(e.eval_id)
        rows_on_disk = {p.name for p in rows_dir.iterdir() if (p / ROW_FILE).is_file()} if rows_dir.is_dir() else set()
        rows_recorded = trial_rows.get(k, set())
        if rows_on_disk != rows_recorded:
            drift.append(Drift("mismatch", k, (
                f"trial rows: {len(rows_on_disk)} on disk, {len(rows_recorded)} in eval_trial; only on disk: "
                f"{sorted(rows_on_disk - rows_recorded)[:5]}, only recorded: {sorted(rows_recorded - rows_on_disk)[:5]}"
            )))

    for d in datasets:
        p = Path(d["uri"])
        if not p.exists():
            drift.append(Drift("missing-on-disk", d["sha256"], f"{d['kind']} of run {d['produced_by_run']}: {p} is gone"))
        elif digests and path_sha256(p) != d["sha256"]:
            drift.append(Drift("digest-mismatch", d["sha256"], f"{d['kind']} at {p} changed since run {d['produced_by_run']}"))

    for run in dead_runs:
        drift.append(Drift("dead-run", run.run_id, f"{run.stage} run is recorded as running but its {run.detail()}: "
                                                    "`skillgate warehouse reap` marks it interrupted"))
    for work in dead_workdirs(state.artifacts):
        drift.append(Drift("stale-build", str(work), "temp output folder of a stage run whose process is gone "
                                                     "(removed by `skillgate warehouse reap` or the stage's next run)"))

    log_ = event_log(state)
    for p in list_rejected(log_):
        reason_file = p.with_name(p.name[:-5] + ".reason.txt")
        reason = reason_file.read_text().strip() if reason_file.is_file() else "no reason recorded"
        drift.append(Drift("rejected-event", p.name, reason))
    pending = list_pending(log_)
    if pending:
        drift.append(Drift("pending-events", str(log_.spool), f"{len(pending)} event file(s) not ingested yet"))

    checked = {"experiments": len(disk_exp), "segments": len(disk_seg), "checkpoints": len(disk_ckpt),
               "training_steps": sum(len(v) for v in disk_steps.values()), "exports": len(disk_x),
               "evaluations": len(disk_eval), "datasets": len(datasets), "runs": n_runs}
    return VerifyReport(drift=drift, checked=checked)

"""Recording evaluations as the runner reports them (skillgate_core.evaluation.observer).

    with observing(WarehouseEvalObserver(run_id=run.run_id, trigger="cli")):
        run_evaluation(...)

started: the owning experiment and the evaluated export are recorded first when the warehouse does
not hold them yet (a standalone evaluation experiment the runner just created, or an export whose
training run was not recorded: its segment then belongs to a `model-import` run made here), then
the protocol, the bench as a dataset version and EvaluationStarted (or, on a resume,
EvaluationStatus running, after an `incomplete` for an attempt whose process was killed).
trials: one EvalTrials per batch of published rows. ended: EvaluationFinished + EvalMetrics when
completed, EvaluationStatus incomplete / failed otherwise. A nightly comparison is one
EvalRegression row (`record_regression`).
"""

from __future__ import annotations

import functools
import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ParamSpec

from skillgate_core.base.config import canonical_json
from skillgate_core.base.digests import path_sha256
from skillgate_core.base.paths import StateLayout, state_layout
from skillgate_core.evaluation.nightly import NightlyComparison
from skillgate_core.evaluation.observer import EvalInfo
from skillgate_core.ownership import (
    experiment_dir,
    list_eval_rows,
    load_export,
    load_segment,
    open_experiment,
)
from skillgate_core.ownership.records import EvalRecord, utc_now
from warehouse.events import (
    DatasetVersion,
    EvalMetric,
    EvalMetrics,
    EvalProtocol,
    EvalRegression,
    EvalTrial,
    EvalTrials,
    EvaluationFinished,
    EvaluationStarted,
    EvaluationStatus,
    RunFinished,
    RunStarted,
    Trigger,
)
from warehouse.ids import eval_key, export_key, new_run_id, segment_key
from warehouse.provenance import git_state
from warehouse.read import query
from warehouse.recording import experiment_created, model_exported, record, segment_ended, segment_started

__all__ = ["WarehouseEvalObserver", "ensure_export_recorded", "metrics_from_summary", "record_regression",
           "trial_event"]

log = logging.getLogger(__name__)

IMPORT_STAGE = "model-import"
"""Stage name of the run that records an export whose producing run the warehouse never saw."""

P = ParamSpec("P")


def _exists(sql: str, params: list[Any], state: StateLayout) -> bool:
    return bool(query(sql, params, state).rows)


def ensure_export_recorded(root: Path, experiment_id: str, export_id: str, *, trigger: Trigger = "cli",
                           state: StateLayout | None = None) -> None:
    """Record the experiment and the export (with its segment) unless the warehouse already holds them."""
    state = state or state_layout()
    exp, exp_rec = open_experiment(root, experiment_id)
    events: list[Any] = []
    if not _exists("select 1 from experiment where experiment_id = ?", [experiment_id], state):
        events.append(experiment_created(exp_rec, root))
    if _exists("select 1 from model_export where export_id = ?", [export_key(experiment_id, export_id)], state):
        if events:
            record(*events, state=state)
        return
    export = load_export(exp, export_id, digest=True)
    if export is None:
        raise ValueError(f"export '{export_id}' of experiment '{experiment_id}' is not published")
    seg_id = segment_key(experiment_id, export.run_name)
    found = query("select run_id from segment where segment_id = ?", [seg_id], state).rows
    import_run = None
    if found:
        run_id = found[0][0]
    else:
        run_id = import_run = new_run_id(IMPORT_STAGE)
        git = git_state()
        body = {"experiment_id": experiment_id, "export_id": export_id, "path": export.path}
        events.append(RunStarted(
            run_id=run_id, stage=IMPORT_STAGE, trigger=trigger, git_sha=git.sha, git_dirty=git.dirty,
            config_digest=hashlib.sha256(canonical_json({"type": "ModelImport", "values": body}).encode()).hexdigest(),
            config_type="ModelImport", config_body=body, started_at=utc_now(), experiment_id=experiment_id))
        segment = load_segment(exp, export.run_name)
        events.append(segment_started(segment, run_id))
        if segment.ended_at is not None:
            events.append(segment_ended(segment))
    events.append(model_exported(export, run_id))
    if import_run is not None:
        events.append(RunFinished(run_id=import_run, status="completed", finished_at=utc_now(),
                                  metrics={"experiment_id": experiment_id, "export_id": export_id}))
    record(*events, state=state)


def trial_event(row: Mapping[str, Any]) -> EvalTrial:
    """A published trial row as the warehouse's EvalTrial."""
    return EvalTrial(
        row_id=row["row_id"], trial_index=int(row["trial_index"]), task_id=row["task_id"], benchmark=row["benchmark"],
        repeat=int(row["repeat"]), outcome=row["outcome"], reward=row["score"], n_turns=row["turns"],
        n_reads=len(row["reads"]), status=row["status"], raw_score=row["raw_score"], error=row["error"],
        reads=tuple(row["reads"]), read_names=tuple(row["read_names"]), first_read_category=row["first_read_category"],
        skill_reasoning=bool(row["skill_reasoning"]), response_tokens=row["response_tokens"],
        loss_tokens=row["loss_tokens"], seconds=row["seconds"], seed=row["seed"],
        consulted_names=None if row.get("consulted_names") is None else tuple(row["consulted_names"]),
        # absent from rows published before the premise columns (an evaluation resumed across the change)
        name_tokens=row.get("name_tokens"), read_call_tokens=row.get("read_call_tokens"),
        reasoning_tokens=row.get("reasoning_tokens"),
    )


def metrics_from_summary(summary: Mapping[str, Any]) -> tuple[EvalMetric, ...]:
    """The numbers of a summarize_trials summary as metric rows ('all' scope, per-benchmark success)."""
    trials, tasks = int(summary["trials"]), int(summary["tasks"])
    out = [EvalMetric("trials", trials, n=trials), EvalMetric("errors", summary["errors"], n=trials)]
    for name, value in summary.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or name in ("trials", "tasks", "errors",
                                                                                      "attempts"):
            continue
        n = tasks if name.startswith("pass@") else trials
        out.append(EvalMetric(name.replace("@", "_at_"), float(value), n=n))
    for bench, value in (summary.get("trial_success_by_benchmark") or {}).items():
        out.append(EvalMetric("trial_success", float(value), scope=bench))
    for k, v in (summary.get("tasks_with_at_least") or {}).items():
        out.append(EvalMetric(f"tasks_solved_{k.replace('>=', 'ge').replace('/', '_of_')}", float(v), n=tasks))
    for cat, v in (summary.get("first_read_category") or {}).items():
        if v is not None:
            out.append(EvalMetric(f"first_read_{cat}", float(v)))
    for cat, v in (summary.get("read_share_by_category") or {}).items():
        if v is not None:
            out.append(EvalMetric(f"read_share_{cat}", float(v)))
    return tuple(out)


def _logged(method: Callable[P, None]) -> Callable[P, None]:
    """An evaluation never fails because the warehouse could not be written or read: the failure is
    logged (and `skillgate warehouse verify` shows the evaluation missing or behind)."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            method(*args, **kwargs)
        except Exception as exc:
            log.warning("warehouse: could not record evaluation %s (%s: %s)", method.__name__, type(exc).__name__, exc)

    return wrapper


class WarehouseEvalObserver:
    """Records what the runner reports (module docstring). Never raises because of the warehouse."""

    def __init__(self, *, run_id: str | None = None, trigger: Trigger = "cli", state: StateLayout | None = None) -> None:
        self.run_id, self.trigger = run_id, trigger
        self.state = state or state_layout()

    def _key(self, info: EvalInfo) -> str:
        return eval_key(info.record.experiment_id, info.record.eval_id)

    @_logged
    def started(self, info: EvalInfo) -> None:
        rec = info.record
        ensure_export_recorded(info.root, rec.experiment_id, rec.export_id, trigger=self.trigger, state=self.state)
        key = self._key(info)
        events: list[Any] = [EvalProtocol(fingerprint=info.protocol.fingerprint(), spec_id=info.protocol.spec_id,
                                          body=info.protocol.body(), created_at=utc_now())]
        known = _exists("select 1 from evaluation where eval_id = ?", [key], self.state)
        if not known:
            bench_sha = path_sha256(info.bench)
            events += [
                DatasetVersion(sha256=bench_sha, uri=str(info.bench), dataset_kind="bench", created_at=utc_now()),
                EvaluationStarted(
                    eval_id=key, export_id=export_key(rec.experiment_id, rec.export_id),
                    protocol_fingerprint=rec.protocol_fingerprint, uri=str(info.eval_dir), started_at=rec.started_at,
                    run_id=self.run_id, dataset_sha256=bench_sha, protocol_id=info.protocol.protocol_id(),
                    method=info.method, policy=info.policy, tag=info.tag, trials_total=info.trials_total),
            ]
        # rows of earlier attempts nobody recorded: all of them for an evaluation new to the warehouse; for a known
        # one, those a killed process published but never recorded (killed between a row's write and its record)
        rows = list_eval_rows(experiment_dir(info.root, rec.experiment_id), rec.eval_id)
        recorded = ({r[0] for r in query("select row_id from eval_trial where eval_id = ?", [key], self.state).rows}
                    if known else set())
        unrecorded = [r for r in rows.values() if r["row_id"] not in recorded]
        if unrecorded:
            events.append(EvalTrials(eval_id=key, trials=tuple(trial_event(r) for r in unrecorded)))
        if info.previous_status is not None:
            status_now = query("select status from v_evaluation where eval_id = ?", [key], self.state).rows
            latest = status_now[0][0] if status_now else "running"
            if latest == "running" or not known:
                # the previous attempt's process died without saying so (or was never recorded)
                events.append(EvaluationStatus(eval_id=key, status="incomplete", attempt=max(1, rec.attempt - 1),
                                               at=utc_now(), detail="the attempt's process was gone"))
            events.append(EvaluationStatus(eval_id=key, status="running", attempt=rec.attempt, at=utc_now()))
        record(*events, state=self.state)

    @_logged
    def trials(self, info: EvalInfo, rows: Sequence[Mapping[str, Any]]) -> None:
        if rows:
            record(EvalTrials(eval_id=self._key(info), trials=tuple(trial_event(r) for r in rows)), state=self.state)

    @_logged
    def ended(self, info: EvalInfo, rec: EvalRecord, summary: Mapping[str, Any] | None) -> None:
        key = self._key(info)
        done = len(list_eval_rows(experiment_dir(info.root, rec.experiment_id), rec.eval_id))
        if rec.status == "completed":
            events: list[Any] = [EvaluationFinished(eval_id=key, status="completed", finished_at=rec.finished_at or utc_now())]
            if summary is not None:
                events.append(EvalMetrics(eval_id=key, metrics=metrics_from_summary(summary)))
            record(*events, state=self.state)
        else:
            record(EvaluationStatus(eval_id=key, status=rec.status, attempt=rec.attempt,
                                    at=rec.finished_at or utc_now(), trials_done=done, detail=rec.detail or None),
                   state=self.state)


def record_regression(comparison: NightlyComparison, *, flow_run_id: str | None = None,
                      state: StateLayout | None = None) -> EvalRegression:
    """One eval_regression row for a nightly comparison (the first nightly has no baseline)."""
    c = comparison.check
    # The comparison's own number (from the evaluation's rows): a metric looked up here could be
    # missing (not ingested yet) and was then written as 0.0, a number that was never measured.
    event = EvalRegression(
        eval_id=eval_key(comparison.experiment_id, comparison.eval_id),
        protocol_fingerprint=comparison.fingerprint, metric="trial_success", current_value=comparison.trial_success,
        regressed=comparison.regressed, created_at=utc_now(),
        baseline_eval_id=eval_key(comparison.experiment_id, comparison.previous_eval_id)
        if comparison.previous_eval_id else None,
        baseline_value=c.previous if c else None, delta=c.delta if c else None, ci_low=c.ci_low if c else None,
        ci_high=c.ci_high if c else None, alpha=c.alpha if c else None, n_boot=c.n_boot if c else None,
        seed=c.seed if c else None, tasks=c.tasks if c else None, flow_run_id=flow_run_id,
    )
    record(event, state=state)
    return event

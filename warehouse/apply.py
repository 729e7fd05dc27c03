"""Apply events to an open read-write DuckDB connection (the one writer calls this, nobody else).

Each event kind has one handler of plain parameterised SQL. The schema's keys and constraints do
most of the refusing (an export whose run or segment does not exist, an evaluation of an unknown
export, a trial of an unknown evaluation, a second end of a run, a bad digest, an unknown
trigger); handlers add the checks a constraint cannot express (a re-recorded definition must not
change) and turn the common refusals into plain messages. The tables are append-only (001's
header says why): an end is an insert into run_end / segment_end / evaluation_end, never an
UPDATE. Anything refused raises one of REJECTABLE, which the caller turns into a rejected event
with its reason; other errors (disk, I/O) propagate and leave the events pending.

Definitions keyed by content (config, dataset_version, eval_protocol, experiment) are idempotent:
recording the same one twice is fine; recording a different body under the same key is refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import duckdb

from warehouse.events import (  # names, not logic: one imported name a line
    CheckpointSaved,
    DatasetVersion,
    EvalMetrics,
    EvalProtocol,
    EvalRegression,
    EvalTrials,
    EvaluationFinished,
    EvaluationStarted,
    EvaluationStatus,
    Event,
    EventFormatError,
    ExperimentCreated,
    ModelExported,
    RunFinished,
    RunInput,
    RunStarted,
    SegmentEnded,
    SegmentStarted,
    TrainingMetrics,
)
from warehouse.ids import metric_key

__all__ = ["REJECTABLE", "LineageError", "apply_event", "apply_events"]


class LineageError(ValueError):
    """An event contradicts the recorded lineage in a way no table constraint expresses."""


REJECTABLE: tuple[type[BaseException], ...] = (
    LineageError,
    EventFormatError,
    duckdb.ConstraintException,
    duckdb.ConversionException,
    duckdb.InvalidInputException,
    duckdb.OutOfRangeException,
    duckdb.TypeMismatchException,
)
"""The errors an event's content is expected to cause (ingest refuses any other non-environmental
error too, flagged as unexpected, so a handler bug cannot block later events)."""

Con = duckdb.DuckDBPyConnection


def _json(value: object) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, separators=(",", ":"))


def _one(con: Con, sql: str, params: list[Any]) -> tuple[Any, ...] | None:
    return con.execute(sql, params).fetchone()


def _require_unfinished(con: Con, table: str, key_column: str, key: str) -> None:
    """The run or evaluation `key` is recorded and has no end yet (in TABLE_end); else LineageError
    saying which of the two it is not."""
    if _one(con, f"select 1 from {table} where {key_column} = ?", [key]) is None:
        raise LineageError(f"{table} '{key}' is unknown")
    ended = _one(con, f"select status from {table}_end where {key_column} = ?", [key])
    if ended is not None:
        raise LineageError(f"{table} '{key}' already finished ({ended[0]})")


def _insert_rows(con: Con, table: str, columns: str, rows: list[list[Any]]) -> None:
    """Insert `rows` with ONE statement: each column is one list parameter, unnested side by side.

    Not executemany, which runs one statement per row (~0.7 ms a trial row here, 61 % of an ingest
    profiled). Measured back to back, 50,000 trial rows (benchmarks/results/warehouse_read_json_50k*.json):
    ingest 37.0 s -> 6.7 s (1,351 -> 7,438 trial rows/s), rebuild 47.7 s -> 6.6 s; an evaluation's
    280 rows no longer hold the write lock ~0.2 s. Keys, checks and casts refuse the same rows with
    the same errors (tests/warehouse).
    """
    n = columns.count(",") + 1
    con.execute(f"insert into {table} ({columns}) select {', '.join(['unnest(?)'] * n)}",
                [list(col) for col in zip(*rows, strict=True)])


# Alike by design below: each event kind has one handler of parameterised SQL (module docstring).
def _experiment(con: Con, e: ExperimentCreated) -> None:
    values = [e.algorithm, e.data, e.init, e.hypothesis, e.uri]
    row = _one(con, "select algorithm, data, init, hypothesis, uri from experiment where experiment_id = ?",
               [e.experiment_id])
    if row is None:
        con.execute("insert into experiment values (?, ?, ?, ?, ?, ?, ?::timestamptz)",
                    [e.experiment_id, *values, e.created_at])
    elif list(row) != values:
        raise LineageError(f"experiment '{e.experiment_id}' already recorded with different fields")


def _config(con: Con, digest: str, config_type: str, body: object) -> None:
    text = _json(body)
    row = _one(con, "select config_type, body::varchar from config where config_digest = ?", [digest])
    if row is None:
        con.execute("insert into config values (?, ?, ?::json)", [digest, config_type, text])
    elif row[0] != config_type or json.loads(row[1]) != body:
        raise LineageError(f"config {digest[:12]} already recorded with a different body")


def _run_started(con: Con, e: RunStarted) -> None:
    _config(con, e.config_digest, e.config_type, e.config_body)
    con.execute(
        "insert into run (run_id, stage, experiment_id, \"trigger\", flow_run_id, git_sha, git_dirty,"
        " config_digest, started_at) values (?, ?, ?, ?, ?, ?, ?, ?, ?::timestamptz)",
        [e.run_id, e.stage, e.experiment_id, e.trigger, e.flow_run_id, e.git_sha, e.git_dirty,
         e.config_digest, e.started_at],
    )


def _run_finished(con: Con, e: RunFinished) -> None:
    # run_end's key refuses a second end; the explicit checks only make the message say which case
    _require_unfinished(con, "run", "run_id", e.run_id)
    con.execute(
        "insert into run_end values (?, ?, ?, ?::timestamptz, ?, ?::json)",
        [e.run_id, e.status, e.reused, e.finished_at, e.error, _json(e.metrics)],
    )


def _segment_started(con: Con, e: SegmentStarted) -> None:
    con.execute(
        "insert into segment (segment_id, run_name, run_id, experiment_id, ordinal, host, pid,"
        " resumed_from_segment, resumed_from_step, started_at, process_start)"
        " values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?::timestamptz, ?)",
        [e.segment_id, e.run_name, e.run_id, e.experiment_id, e.ordinal, e.host, e.pid,
         e.resumed_from_segment, e.resumed_from_step, e.started_at, e.process_start],
    )


def _segment_ended(con: Con, e: SegmentEnded) -> None:
    if _one(con, "select 1 from segment where segment_id = ?", [e.segment_id]) is None:
        raise LineageError(f"segment '{e.segment_id}' is unknown")
    if _one(con, "select 1 from segment_end where segment_id = ?", [e.segment_id]) is not None:
        raise LineageError(f"segment '{e.segment_id}' already ended")
    con.execute("insert into segment_end values (?, ?::timestamptz, ?)", [e.segment_id, e.ended_at, e.exit_reason])


def _dataset(con: Con, sha: str, uri: str, kind: str, produced_by: str | None, created_at: str) -> None:
    # Same content recorded again (a reused stage, a second copy): the first producer stays.
    con.execute(
        "insert into dataset_version values (?, ?, ?, ?, ?::timestamptz) on conflict do nothing",
        [sha, uri, kind, produced_by, created_at],
    )


def _dataset_version(con: Con, e: DatasetVersion) -> None:
    if e.produced_by_run is not None and _one(con, "select 1 from run where run_id = ?", [e.produced_by_run]) is None:
        raise LineageError(f"dataset {e.sha256[:12]}: producing run '{e.produced_by_run}' is unknown")
    _dataset(con, e.sha256, e.uri, e.dataset_kind, e.produced_by_run, e.created_at)


def _run_input(con: Con, e: RunInput) -> None:
    con.execute("insert into run_input values (?, ?, ?)", [e.run_id, e.role, e.dataset_sha256])


def _model_exported(con: Con, e: ModelExported) -> None:
    if _one(con, "select 1 from run where run_id = ?", [e.run_id]) is None:
        raise LineageError(f"export '{e.export_id}': run '{e.run_id}' is unknown")
    _dataset(con, e.weights_sha256, e.uri, "model_export", e.run_id, e.created_at)
    con.execute(
        "insert into model_export values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?::timestamptz)",
        [e.export_id, e.export_name, e.experiment_id, e.run_id, e.segment_id, e.step, e.uri,
         e.weights_sha256, e.validated, e.created_at],
    )


def _eval_protocol(con: Con, e: EvalProtocol) -> None:
    row = _one(con, "select spec_id, body::varchar from eval_protocol where fingerprint = ?", [e.fingerprint])
    if row is None:
        con.execute("insert into eval_protocol values (?, ?, ?::json, ?::timestamptz)",
                    [e.fingerprint, e.spec_id, _json(e.body), e.created_at])
    elif row[0] != e.spec_id or json.loads(row[1]) != e.body:
        raise LineageError(f"protocol fingerprint '{e.fingerprint}' already recorded with a different body")


def _evaluation_started(con: Con, e: EvaluationStarted) -> None:
    con.execute(
        "insert into evaluation (eval_id, export_id, protocol_fingerprint, run_id, dataset_sha256, uri,"
        " started_at, protocol_id, method, policy, tag, trials_total)"
        " values (?, ?, ?, ?, ?, ?, ?::timestamptz, ?, ?, ?, ?, ?)",
        [e.eval_id, e.export_id, e.protocol_fingerprint, e.run_id, e.dataset_sha256, e.uri, e.started_at,
         e.protocol_id, e.method, e.policy, e.tag, e.trials_total],
    )


_RESUMABLE_FROM = {"running": ("incomplete", "failed"), "incomplete": ("running",), "failed": ("running",)}
"""new status -> the latest status it may follow (none recorded yet counts as running)."""


def _evaluation_status(con: Con, e: EvaluationStatus) -> None:
    _require_unfinished(con, "evaluation", "eval_id", e.eval_id)
    last = _one(con, "select seq, status from evaluation_status where eval_id = ? order by seq desc limit 1",
                [e.eval_id])
    seq, current = (last[0], last[1]) if last else (0, "running")
    if current not in _RESUMABLE_FROM.get(e.status, ()):
        raise LineageError(f"evaluation '{e.eval_id}' is {current}; it cannot become {e.status}")
    con.execute("insert into evaluation_status values (?, ?, ?, ?, ?, ?, ?::timestamptz)",
                [e.eval_id, seq + 1, e.status, e.attempt, e.trials_done, e.detail, e.at])


def _evaluation_finished(con: Con, e: EvaluationFinished) -> None:
    _require_unfinished(con, "evaluation", "eval_id", e.eval_id)
    last = _one(con, "select status from evaluation_status where eval_id = ? order by seq desc limit 1", [e.eval_id])
    if last is not None and last[0] != "running":
        raise LineageError(f"evaluation '{e.eval_id}' is {last[0]}; only a running evaluation finishes")
    con.execute("insert into evaluation_end values (?, ?, ?::timestamptz)", [e.eval_id, e.status, e.finished_at])


def _require_evaluation(con: Con, eval_id: str) -> tuple[Any, ...]:
    row = _one(con, "select export_id, dataset_sha256 from evaluation where eval_id = ?", [eval_id])
    if row is None:
        raise LineageError(f"evaluation '{eval_id}' is unknown")
    return row


def _eval_trials(con: Con, e: EvalTrials) -> None:
    _require_evaluation(con, e.eval_id)
    if e.trials:
        _insert_rows(
            con, "eval_trial", "eval_id, row_id, trial_index, task_id, benchmark, \"repeat\", outcome, reward, n_turns,"
            " n_reads, status, raw_score, error, reads, read_names, first_read_category, skill_reasoning,"
            " response_tokens, loss_tokens, seconds, seed, consulted_names, name_tokens, read_call_tokens,"
            " reasoning_tokens",
            [[e.eval_id, t.row_id, t.trial_index, t.task_id, t.benchmark, t.repeat, t.outcome, t.reward,
              t.n_turns, t.n_reads, t.status, t.raw_score, t.error,
              None if t.reads is None else list(t.reads), None if t.read_names is None else list(t.read_names),
              t.first_read_category, t.skill_reasoning, t.response_tokens, t.loss_tokens, t.seconds, t.seed,
              None if t.consulted_names is None else list(t.consulted_names),
              t.name_tokens, t.read_call_tokens, t.reasoning_tokens]
             for t in e.trials],
        )


def _eval_regression(con: Con, e: EvalRegression) -> None:
    row = _one(con, "select protocol_fingerprint from evaluation where eval_id = ?", [e.eval_id])
    if row is None:
        raise LineageError(f"evaluation '{e.eval_id}' is unknown")
    if row[0] != e.protocol_fingerprint:
        raise LineageError(f"evaluation '{e.eval_id}' has protocol fingerprint {row[0]}, not {e.protocol_fingerprint}")
    if e.baseline_eval_id is not None:
        base = _one(con, "select protocol_fingerprint from evaluation where eval_id = ?", [e.baseline_eval_id])
        if base is None:
            raise LineageError(f"baseline evaluation '{e.baseline_eval_id}' is unknown")
        if base[0] != e.protocol_fingerprint:
            raise LineageError(f"baseline '{e.baseline_eval_id}' has protocol fingerprint {base[0]}, not "
                               f"{e.protocol_fingerprint}: only one fingerprint compares")
    con.execute(
        "insert into eval_regression values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::timestamptz)",
        [e.eval_id, e.baseline_eval_id, e.protocol_fingerprint, e.metric, e.current_value, e.baseline_value,
         e.delta, e.ci_low, e.ci_high, e.alpha, e.n_boot, e.seed, e.tasks, e.regressed, e.flow_run_id, e.created_at],
    )


def _eval_metrics(con: Con, e: EvalMetrics) -> None:
    export_id, dataset_sha256 = _require_evaluation(con, e.eval_id)
    if e.metrics:
        _insert_rows(
            con, "eval_metric", "metric_id, eval_id, export_id, dataset_sha256, name, scope, value, n",
            [[metric_key(e.eval_id, m.name, m.scope), e.eval_id, export_id, dataset_sha256, m.name, m.scope,
              m.value, m.n] for m in e.metrics],
        )


def _checkpoint_saved(con: Con, e: CheckpointSaved) -> None:
    if _one(con, "select 1 from segment where segment_id = ?", [e.segment_id]) is None:
        raise LineageError(f"checkpoint '{e.checkpoint_id}': segment '{e.segment_id}' is unknown")
    con.execute(
        "insert into checkpoint values (?, ?, ?, ?, ?, ?, ?::timestamptz)",
        [e.checkpoint_id, e.experiment_id, e.segment_id, e.run_id, e.step, e.uri, e.created_at],
    )


def _training_metrics(con: Con, e: TrainingMetrics) -> None:
    row = _one(con, "select experiment_id from segment where segment_id = ?", [e.segment_id])
    if row is None:
        raise LineageError(f"training metrics: segment '{e.segment_id}' is unknown")
    if row[0] is None:
        raise LineageError(f"training metrics: segment '{e.segment_id}' belongs to no experiment")
    if e.metrics:
        _insert_rows(
            con, "training_metric", "segment_id, run_id, experiment_id, step, name, value",
            [[e.segment_id, e.run_id, row[0], m.step, m.name, m.value] for m in e.metrics],
        )


_HANDLERS: dict[type, Callable[[Con, Any], None]] = {
    ExperimentCreated: _experiment,
    RunStarted: _run_started,
    RunFinished: _run_finished,
    SegmentStarted: _segment_started,
    SegmentEnded: _segment_ended,
    DatasetVersion: _dataset_version,
    RunInput: _run_input,
    ModelExported: _model_exported,
    EvalProtocol: _eval_protocol,
    EvaluationStarted: _evaluation_started,
    EvaluationFinished: _evaluation_finished,
    EvalTrials: _eval_trials,
    EvalMetrics: _eval_metrics,
    CheckpointSaved: _checkpoint_saved,
    TrainingMetrics: _training_metrics,
    EvaluationStatus: _evaluation_status,
    EvalRegression: _eval_regression,
}


def apply_event(con: Con, event: Event) -> None:
    handler = _HANDLERS.get(type(event))
    if handler is None:
        raise EventFormatError(f"no handler for {type(event).__name__}")
    handler(con, event)


def apply_events(con: Con, events: Iterable[Any]) -> None:
    """Apply events in order inside the caller's transaction."""
    for event in events:
        apply_event(con, event)

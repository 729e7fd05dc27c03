"""The experiment warehouse: one DuckDB file of lineage, written by one writer, read by anyone.

"Which model export, trained from which data, config and commit, produced this number?" is one
query: `select * from metric_lineage('EXP/EVAL/trial_success')` (or `skillgate lineage ID`).

How it fits together (each module's docstring says more):
  events.py     the facts, as frozen dataclasses (RunStarted, ModelExported, EvalTrials, ...)
  spool.py      writers append event files to SKILLGATE_HOME/warehouse-log/spool; never DuckDB
  ingest.py     the one writer: spool -> DuckDB in order, one short transaction per batch,
                refused events to rejected/ with a reason, applied ones to archive/; and the
                other way, `rebuild`: delete the file -> replay the archive -> identical warehouse
  apply.py      event -> SQL; migrations/*.sql hold the tables, keys and constraints
  read.py       readers ingest first (best effort), then open read-only with retry/backoff
  queries.py    lineage queries (also views/macros in the schema) and the lineage tree; a
                training run's curve is `select * from training_curve('EXPERIMENT_ID')` (004)
  runs.py       recent stage runs with their outputs (`skillgate runs`)
  refs.py       any id, digest (or unique prefix) or output path a user has -> what it names
                (`resolve_ref(state, text)`: `skillgate lineage X`, inputs given by digest)
  verify.py     files (skillgate_core.ownership) vs warehouse: every drift listed
  interrupted.py  runs whose process died (SIGKILL): marked interrupted, temp outputs removed
  recording.py  record(*events), builders from ownership records
  stage_runs.py StageRunRecorder: one stage run, start to end (marks dead runs first)
  status.py     a look without changing anything (doctor, `skillgate warehouse status`)
  guard.py      Ray workers never record, ingest or read: the driver (a Prefect task) does
  evaluations.py  recording evaluations as the runner reports them (the observer)
  eval_cost.py  what an evaluation will cost, said before it starts (trials x recorded wall time)
  provenance.py the git sha, dirty flag and host every run row carries
  sql_guard.py  someone else's SQL, read-only for real (`warehouse.query`, `skillgate sql`)
  damage.py     a damaged file told apart from other errors, with how to recover

Why an event log and not "short connections with retry" alone: appending a file never waits on
DuckDB's one-writer lock, so a writer never blocks or fails because a reader or another writer
holds the file; the archive of applied events makes `rebuild` exact; a refused event is kept
with its reason instead of being lost in a log line. And why tables, not DuckDB reading the archive
at query time (read_json; measured, benchmarks/results/warehouse_read_json.md, 200,000 trial rows,
2 cores): metric_lineage takes 6.5 ms on the tables, 0.74 s over the 74.5 MB archive (read_text +
JSON functions; 2.0 s with read_json), +8 ms per archive MB, past the 200 ms target from ~15 MB.
Reading the archive keeps 2 of the 5 guarantees (exact rebuild, readers never block writers): a
dangling reference or a duplicate id is served as a fact instead of refused with a reason, and one
damaged file fails every query (or, filtered out, vanishes without a reason). Ingest costs 23.5 s
for all 200,000 rows (8.5k rows/s), the price of ~32 archive queries, paid once.

    from warehouse import record, query, RunStarted
    record(RunStarted(...))
    query("select stage, status from run order by started_at").rows
"""

# Names, not logic, below: the public surface, one name a line (the modules import the same names).
from warehouse.events import (
    TRIGGERS,
    CheckpointSaved,
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
    ExperimentCreated,
    ModelExported,
    RunFinished,
    RunInput,
    RunStarted,
    SegmentEnded,
    SegmentStarted,
    TrainingMetric,
    TrainingMetrics,
    Trigger,
    check_trigger,
)
from warehouse.guard import NotInRayWorker
from warehouse.ids import checkpoint_key, eval_key, export_key, metric_key, new_run_id, segment_key
from warehouse.ingest import IngestReport, RebuildReport, ingest, rebuild
from warehouse.interrupted import DeadRun, InterruptReport, find_dead_runs, mark_interrupted
from warehouse.migrate import LATEST_VERSION, current_version
from warehouse.queries import (
    LineageNode,
    dataset_upstream,
    experiment_exports,
    export_lineage,
    lineage_tree,
    metric_lineage,
    resolve_id,
)
from warehouse.read import QueryResult, QueryStream, WarehouseBusy, query, query_stream, read_connection
from warehouse.recording import (
    checkpoint_saved,
    evaluation_started,
    experiment_created,
    left_on_disk,
    model_exported,
    read_metric_rows,
    record,
    segment_ended,
    segment_started,
    training_metrics,
    training_records,
)
from warehouse.refs import AmbiguousRef, RefError, RefMatch, UnknownRef, match_ref, resolve_ref
from warehouse.runs import RUN_STATUSES, recent_runs
from warehouse.spool import event_log
from warehouse.stage_runs import StageRunRecorder
from warehouse.status import WarehouseStatus, warehouse_status
from warehouse.verify import Drift, VerifyReport, verify

__all__ = [
    "LATEST_VERSION",
    "RUN_STATUSES",
    "TRIGGERS",
    "AmbiguousRef",
    "CheckpointSaved",
    "DatasetVersion",
    "DeadRun",
    "Drift",
    "EvalMetric",
    "EvalMetrics",
    "EvalProtocol",
    "EvalRegression",
    "EvalTrial",
    "EvalTrials",
    "EvaluationFinished",
    "EvaluationStarted",
    "EvaluationStatus",
    "ExperimentCreated",
    "IngestReport",
    "InterruptReport",
    "LineageNode",
    "ModelExported",
    "NotInRayWorker",
    "QueryResult",
    "QueryStream",
    "RebuildReport",
    "RefError",
    "RefMatch",
    "RunFinished",
    "RunInput",
    "RunStarted",
    "SegmentEnded",
    "SegmentStarted",
    "StageRunRecorder",
    "TrainingMetric",
    "TrainingMetrics",
    "Trigger",
    "UnknownRef",
    "VerifyReport",
    "WarehouseBusy",
    "WarehouseStatus",
    "check_trigger",
    "checkpoint_key",
    "checkpoint_saved",
    "current_version",
    "dataset_upstream",
    "eval_key",
    "evaluation_started",
    "event_log",
    "experiment_created",
    "experiment_exports",
    "find_dead_runs",
    "export_key",
    "export_lineage",
    "ingest",
    "left_on_disk",
    "lineage_tree",
    "mark_interrupted",
    "match_ref",
    "metric_key",
    "metric_lineage",
    "model_exported",
    "new_run_id",
    "query",
    "query_stream",
    "read_metric_rows",
    "read_connection",
    "recent_runs",
    "rebuild",
    "record",
    "resolve_id",
    "resolve_ref",
    "segment_ended",
    "segment_key",
    "segment_started",
    "training_metrics",
    "training_records",
    "verify",
    "warehouse_status",
]

"""The warehouse's events: every fact enters as one of these frozen dataclasses, never as SQL.

Writers build events and hand them to `warehouse.record(...)`, which appends them to the spool
(spool.py); the one writer (ingest.py) applies them in order (apply.py). Events carry their own
timestamps, so replaying the archive (rebuild.py) reproduces every row exactly.

    record(RunStarted(run_id=..., stage="sft", trigger="cli", ...),
           SegmentStarted(segment_id=..., run_id=..., ...))

Ids of things owned by an experiment are qualified "EXPERIMENT_ID/NAME" (ids.py builds them), so
two experiments may both have an export named "step-200".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from skillgate_core.base.dataclass_json import dataclass_from_json

__all__ = [
    "EVENT_TYPES",
    "TRIGGERS",
    "CheckpointSaved",
    "DatasetVersion",
    "EvalMetric",
    "EvalMetrics",
    "EvalProtocol",
    "EvalRegression",
    "EvalTrial",
    "EvalTrials",
    "EvaluationFinished",
    "EvaluationStarted",
    "EvaluationStatus",
    "Event",
    "EventFormatError",
    "ExperimentCreated",
    "ModelExported",
    "RunFinished",
    "RunInput",
    "RunStarted",
    "SegmentEnded",
    "SegmentStarted",
    "TrainingMetric",
    "TrainingMetrics",
    "Trigger",
    "check_trigger",
    "event_from_json",
    "event_to_json",
]

Trigger = Literal["ui", "schedule", "cli", "test"]
"""Who started a run: the Prefect UI, a deployment schedule, the command line, a test."""
TRIGGERS: tuple[Trigger, ...] = ("ui", "schedule", "cli", "test")


def check_trigger(text: str) -> Trigger:
    """`text` as a Trigger (a flow parameter or a run tag); ValueError naming the valid ones."""
    for trigger in TRIGGERS:
        if text == trigger:
            return trigger
    raise ValueError(f"trigger must be one of {', '.join(TRIGGERS)}, got {text!r}")


class EventFormatError(ValueError):
    """A spool file or event payload does not have the expected shape (unknown kind, missing field)."""


# Data, not logic, below: one frozen declaration per event kind, each field documented where declared.
@dataclass(frozen=True)
class ExperimentCreated:
    """A scientific experiment (its experiment.json)."""

    kind: ClassVar[str] = "experiment_created"
    experiment_id: str
    """Stable across resumes."""
    algorithm: str
    """Training algorithm / profile."""
    data: str
    """Training data (name or digest)."""
    init: str
    """Initial model (name, export id or digest)."""
    hypothesis: str
    """What it tests."""
    uri: str
    """Its folder."""
    created_at: str
    """UTC ISO time."""


@dataclass(frozen=True)
class RunStarted:
    """One stage execution began (status 'running'); also records its config (digest -> JSON)."""

    kind: ClassVar[str] = "run_started"
    run_id: str
    """Unique run id (ids.new_run_id)."""
    stage: str
    """Stage name (skillgate_core.pipeline.stages)."""
    trigger: Trigger
    """Who started it."""
    git_sha: str
    """Commit of the code ('unknown' outside a git checkout)."""
    git_dirty: bool
    """True when the working tree differed from the commit."""
    config_digest: str
    """skillgate_core.base.config.config_digest of the stage config."""
    config_type: str
    """Config class name."""
    config_body: Mapping[str, Any]
    """The config values (config_to_dict)."""
    started_at: str
    """UTC ISO time."""
    flow_run_id: str | None = None
    """Prefect flow-run id (None outside Prefect)."""
    experiment_id: str | None = None
    """The experiment it works for, when it has one (training, evaluation)."""


@dataclass(frozen=True)
class RunFinished:
    """A running run ended."""

    kind: ClassVar[str] = "run_finished"
    run_id: str
    """The run."""
    status: Literal["completed", "failed", "interrupted", "cancelled"]
    """Outcome; interrupted: stopped on request (Ctrl-C, SIGTERM: the run says so as it ends), or its
    process died without saying so (found by warehouse/interrupted.py); cancelled: cancelled from the
    orchestrator (the Prefect UI's Cancel; tasks/cancellation.py)."""
    finished_at: str
    """UTC ISO time."""
    reused: bool = False
    """True when an identical finished run was reused instead of recomputed."""
    error: str | None = None
    """Error text when failed; when interrupted, the signal that stopped it or how the process was found gone;
    when cancelled, who cancelled it."""
    metrics: Mapping[str, Any] | None = None
    """Small JSON facts the stage reported."""


@dataclass(frozen=True)
class SegmentStarted:
    """One process lifetime of a run (for experiments: segments/RUN_NAME)."""

    kind: ClassVar[str] = "segment_started"
    segment_id: str
    """EXPERIMENT_ID/RUN_NAME, or the run id for a run outside any experiment."""
    run_name: str
    """RUN_NAME (the folder name)."""
    run_id: str
    """The run this process executes."""
    ordinal: int
    """Position among the experiment's segments (0 for the first)."""
    host: str
    """Hostname."""
    pid: int
    """Process id."""
    started_at: str
    """UTC ISO time."""
    experiment_id: str | None = None
    """Owning experiment, if any."""
    resumed_from_segment: str | None = None
    """segment_id whose checkpoint it resumed from (None: fresh start)."""
    resumed_from_step: int | None = None
    """That checkpoint's step."""
    process_start: str | None = None
    """Start stamp of the process (skillgate_core.base.processes): with host and pid it names one process,
    so a later process given the same pid is not taken for it. None when unknown."""


@dataclass(frozen=True)
class SegmentEnded:
    """A segment's process ended (normally or not)."""

    kind: ClassVar[str] = "segment_ended"
    segment_id: str
    """The segment."""
    ended_at: str
    """UTC ISO time."""
    exit_reason: str
    """'completed', 'failed: ...', 'preempted', ..."""


@dataclass(frozen=True)
class DatasetVersion:
    """Content-addressed data (a file or folder); the first producer recorded wins."""

    kind: ClassVar[str] = "dataset_version"
    sha256: str
    """skillgate_core.base.digests.path_sha256 of the content."""
    uri: str
    """Where it lives."""
    dataset_kind: str
    """What it is (the stage role: base_model, bench, trajectories, rl_data, eval_rows, ...)."""
    created_at: str
    """UTC ISO time."""
    produced_by_run: str | None = None
    """The run that wrote it; None for external inputs."""


@dataclass(frozen=True)
class RunInput:
    """Edge: a run read a dataset in a role."""

    kind: ClassVar[str] = "run_input"
    run_id: str
    """The reading run."""
    role: str
    """Input role (stage spec)."""
    dataset_sha256: str
    """The dataset read (must be recorded first)."""


@dataclass(frozen=True)
class ModelExported:
    """A validated export was published (also records it as a dataset_version of its run)."""

    kind: ClassVar[str] = "model_exported"
    export_id: str
    """EXPERIMENT_ID/EXPORT_NAME."""
    export_name: str
    """Folder name under model/exports/."""
    experiment_id: str
    """Owning experiment."""
    run_id: str
    """Run that produced it."""
    segment_id: str
    """Segment whose weights these are (same run and experiment)."""
    step: int
    """Optimizer step."""
    uri: str
    """Published folder."""
    weights_sha256: str
    """path_sha256 of the folder (equals a downstream stage's input digest of it)."""
    validated: bool
    """Passed ownership.exports validation."""
    created_at: str
    """UTC ISO time."""


@dataclass(frozen=True)
class CheckpointSaved:
    """A complete checkpoint of a training segment (segments/RUN_NAME/checkpoints/step_N, COMPLETE)."""

    kind: ClassVar[str] = "checkpoint_saved"
    checkpoint_id: str
    """EXPERIMENT_ID/RUN_NAME/step_NNNNNNNN (ids.checkpoint_key)."""
    experiment_id: str
    """Owning experiment."""
    segment_id: str
    """Segment that wrote it (same run and experiment)."""
    run_id: str
    """Run that wrote it."""
    step: int
    """Optimizer steps done (a resume continues from here)."""
    uri: str
    """The checkpoint folder."""
    created_at: str
    """UTC ISO time (its COMPLETE marker)."""


@dataclass(frozen=True)
class TrainingMetric:
    """One number of one optimizer step; part of TrainingMetrics."""

    step: int
    """The step as metrics.jsonl numbers it (0-based; the checkpoint after it is step + 1)."""
    name: str
    """Metric name (reward, success_rate, kl, ...; nested counts as 'rejected/REASON')."""
    value: float
    """Its value (finite)."""


@dataclass(frozen=True)
class TrainingMetrics:
    """Per-step metrics of one training segment; each row gets the segment's experiment."""

    kind: ClassVar[str] = "training_metrics"
    segment_id: str
    """The segment (recorded first) whose process trained these steps."""
    run_id: str
    """Its run."""
    metrics: tuple[TrainingMetric, ...]
    """The numbers."""


@dataclass(frozen=True)
class EvalProtocol:
    """A frozen evaluation protocol (docs/method.md 8)."""

    kind: ClassVar[str] = "eval_protocol"
    fingerprint: str
    """Protocol identity (spec id + mode + repeats + payload hash)."""
    spec_id: str
    """e.g. 'eval70_v1'."""
    body: Mapping[str, Any]
    """The fingerprinted payload."""
    created_at: str
    """UTC ISO time."""


@dataclass(frozen=True)
class EvaluationStarted:
    """One export evaluated under one protocol began."""

    kind: ClassVar[str] = "evaluation_started"
    eval_id: str
    """EXPERIMENT_ID/EVAL_NAME."""
    export_id: str
    """The evaluated export."""
    protocol_fingerprint: str
    """The protocol (recorded first)."""
    uri: str
    """eval/EVAL_NAME folder."""
    started_at: str
    """UTC ISO time."""
    run_id: str | None = None
    """The evaluation stage run, if any."""
    dataset_sha256: str | None = None
    """The benchmark data evaluated on (copied onto every metric row)."""
    protocol_id: str | None = None
    """SPEC__MODE__rREPEATS__FP10."""
    method: str | None = None
    """The rows' method label (profile name, export id, served model name)."""
    policy: str | None = None
    """Model path or endpoint URL."""
    tag: str | None = None
    """Evaluation tag ('' or nightly-YYYY-MM-DD, ...)."""
    trials_total: int | None = None
    """Trials the protocol has."""


@dataclass(frozen=True)
class EvaluationFinished:
    """A running evaluation ended."""

    kind: ClassVar[str] = "evaluation_finished"
    eval_id: str
    """The evaluation."""
    status: Literal["completed", "failed"]
    """Outcome."""
    finished_at: str
    """UTC ISO time."""


@dataclass(frozen=True)
class EvaluationStatus:
    """A resumable end of an evaluation attempt (incomplete, failed) or a resume (running)."""

    kind: ClassVar[str] = "evaluation_status"
    eval_id: str
    """The evaluation."""
    status: Literal["running", "incomplete", "failed"]
    """running: resumed; incomplete: stopped with trials missing; failed: an error stopped it."""
    attempt: int
    """The attempt this status belongs to (1 = the first run)."""
    at: str
    """UTC ISO time."""
    trials_done: int | None = None
    """Trial rows published so far."""
    detail: str | None = None
    """Why (stopped after N trials, the error, process gone)."""


@dataclass(frozen=True)
class EvalTrial:
    """One trial row (task x repeat) of an evaluation; part of EvalTrials."""

    row_id: str
    """ROW_ID folder name under eval/EVAL/rows/."""
    trial_index: int
    """Position in the protocol's trial list."""
    task_id: str
    """Benchmark task."""
    benchmark: str
    """Benchmark family."""
    repeat: int
    """Repeat number (0-based)."""
    outcome: Literal["resolved", "fail", "error"]
    """Errors are their own outcome and count as unresolved."""
    reward: float | None = None
    """Verifier score."""
    n_turns: int | None = None
    """Assistant turns."""
    n_reads: int | None = None
    """Skill reads."""
    status: str | None = None
    """Episode status: completed, truncated or aborted."""
    raw_score: float | None = None
    """Verifier score before clipping (None when missing)."""
    error: str | None = None
    """'' unless the outcome is error."""
    reads: tuple[str, ...] | None = None
    """Read categories in order."""
    read_names: tuple[str, ...] | None = None
    """Skill names read, aligned with reads."""
    first_read_category: str | None = None
    """reads[0], None without reads."""
    skill_reasoning: bool | None = None
    """The first turn opened with <skill_reasoning>."""
    response_tokens: int | None = None
    """Response token ids (sampled + observation glue)."""
    loss_tokens: int | None = None
    """Sampled tokens (loss mask 1)."""
    seconds: float | None = None
    """Episode wall time."""
    seed: int | None = None
    """The trial's sampling seed."""
    consulted_names: tuple[str, ...] | None = None
    """Skills any file of which the trial opened or executed (reads included), in order (docs/reads.md)."""
    name_tokens: int | None = None
    """Sampled tokens that are skill-name tokens of attributed reads (docs/method.md 8b); None: not measured."""
    read_call_tokens: int | None = None
    """Sampled tokens of those reads' whole calls; None: not measured."""
    reasoning_tokens: int | None = None
    """Sampled tokens inside <skill_reasoning>; None: not measured."""


@dataclass(frozen=True)
class EvalTrials:
    """A batch of trial rows of one evaluation."""

    kind: ClassVar[str] = "eval_trials"
    eval_id: str
    """The evaluation (recorded first)."""
    trials: tuple[EvalTrial, ...]
    """The rows."""


@dataclass(frozen=True)
class EvalMetric:
    """One number computed from an evaluation's trials; part of EvalMetrics."""

    name: str
    """Metric name (trial_success, pass_at_4, read_rate, ...)."""
    value: float
    """Its value."""
    scope: str = "all"
    """'all' or a slice (a benchmark family)."""
    n: int | None = None
    """Denominator (trials or tasks)."""


@dataclass(frozen=True)
class EvalMetrics:
    """Metrics of one evaluation; each row gets the evaluation's export and dataset digest."""

    kind: ClassVar[str] = "eval_metrics"
    eval_id: str
    """The evaluation (recorded first)."""
    metrics: tuple[EvalMetric, ...]
    """The numbers."""


@dataclass(frozen=True)
class EvalRegression:
    """A nightly comparison of an evaluation with the previous one of the same protocol fingerprint."""

    kind: ClassVar[str] = "eval_regression"
    eval_id: str
    """The evaluation checked."""
    protocol_fingerprint: str
    """Shared by both evaluations."""
    metric: str
    """What was compared (trial_success)."""
    current_value: float
    """Its value now."""
    regressed: bool
    """A drop whose whole bootstrap interval lies below 0."""
    created_at: str
    """UTC ISO time."""
    baseline_eval_id: str | None = None
    """The previous nightly evaluation (None: the first one, nothing to compare)."""
    baseline_value: float | None = None
    delta: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    alpha: float | None = None
    n_boot: int | None = None
    seed: int | None = None
    tasks: int | None = None
    flow_run_id: str | None = None
    """The Prefect flow run that checked it."""


Event = (
    ExperimentCreated | RunStarted | RunFinished | SegmentStarted | SegmentEnded | DatasetVersion
    | RunInput | ModelExported | EvalProtocol | EvaluationStarted | EvaluationFinished | EvalTrials
    | EvalMetrics | CheckpointSaved | TrainingMetrics | EvaluationStatus | EvalRegression
)

EVENT_TYPES: dict[str, type] = {
    cls.kind: cls
    for cls in (
        ExperimentCreated, RunStarted, RunFinished, SegmentStarted, SegmentEnded, DatasetVersion,
        RunInput, ModelExported, EvalProtocol, EvaluationStarted, EvaluationFinished, EvalTrials,
        EvalMetrics, CheckpointSaved, TrainingMetrics, EvaluationStatus, EvalRegression,
    )
}


def event_to_json(event: Event) -> dict[str, Any]:
    """{"kind": ..., "data": {...}} (nested rows become lists of objects)."""
    if type(event) not in EVENT_TYPES.values():
        raise EventFormatError(f"not a warehouse event: {type(event).__name__}")
    return {"kind": event.kind, "data": dataclasses.asdict(event)}


def event_from_json(obj: Mapping[str, Any]) -> Any:
    """Inverse of event_to_json; EventFormatError on an unknown kind or a bad field set."""
    kind = obj.get("kind") if isinstance(obj, Mapping) else None
    cls = EVENT_TYPES.get(str(kind))
    data = obj.get("data") if isinstance(obj, Mapping) else None
    if cls is None or not isinstance(data, Mapping):
        raise EventFormatError(f"unknown event kind {kind!r}; known: {', '.join(EVENT_TYPES)}")
    # Exact: a field this version does not know is an error (the spool is written by the same code).
    return dataclass_from_json(cls, data, source=str(kind), strictness="exact", error=EventFormatError)

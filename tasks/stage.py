"""The pattern every stage follows: a Prefect task calling a pure skillgate_core function.

Inputs cross the task boundary as JSON (config values, role -> path); the result comes back as
JSON (paths + sha256 digests + metrics), never live objects, so Prefect can hash, persist and show
it. The task rebuilds the frozen config from its JSON, which re-checks every key and type.

Every execution is recorded in the warehouse (warehouse.StageRunRecorder): the run (status running
-> completed/failed, trigger, Prefect flow-run id, git sha + dirty flag, config digest), one segment
for this process, its inputs (run_input of dataset_version) and outputs (dataset_version produced
by this run). The trigger comes from a `trigger:VALUE` tag that the entry flow sets (default cli).

A stage whose runs belong to an experiment (StageSpec.experiment: grpo) is recorded as that
experiment's: the experiment before the run, then its own segment, checkpoints, per-step metrics
and export (tasks/training.py), plus a per-step table and a curves report as artifacts.
An evaluation the stage runs (eval70) reports each batch of trial rows to the warehouse as it lands
(warehouse/evaluations.py), so an interrupted evaluation is visible, and resumable, as such.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

from prefect import runtime, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from skillgate_core.base.config import config_from_mapping
from skillgate_core.base.interrupts import read_cancellations
from skillgate_core.base.paths import state_layout
from skillgate_core.base.stage_events import listening
from skillgate_core.evaluation.observer import observing
from skillgate_core.ownership import experiments_root
from skillgate_core.pipeline.run import run_stage
from skillgate_core.pipeline.stages import get_stage
from tasks.cancellation import prefect_cancellation
from tasks.paper import publish_paper_report
from tasks.training import TrainingRecorder, training_artifacts
from warehouse import StageRunRecorder, Trigger, check_trigger, experiment_created, record
from warehouse.evaluations import WarehouseEvalObserver

__all__ = ["INFRASTRUCTURE_ERRORS", "TRIGGER_TAG_PREFIX", "is_infrastructure_failure", "run_stage_task"]

TRIGGER_TAG_PREFIX = "trigger:"

INFRASTRUCTURE_ERRORS = frozenset({
    "ConnectionError", "TimeoutError", "BrokenPipeError",          # a service went away mid-call
    "RaySystemError", "RayActorError", "ActorDiedError", "WorkerCrashedError", "NodeDiedError",
    "GetTimeoutError",                                             # the Ray cluster, not our code
    "APIError", "DockerException",                                 # the Docker daemon
    "WarehouseBusy",                                               # another writer held the file too long
})
"""Exception class names (anywhere in the class's MRO) that mean the machine, not the inputs or the
code, failed: only these are retried. A config error, a bug or a bad task package fails at once (a
retry would fail the same way and hide the first error under two more)."""


def is_infrastructure_failure(exc: BaseException | None) -> bool:
    return exc is not None and any(c.__name__ in INFRASTRUCTURE_ERRORS for c in type(exc).__mro__)


def _retry_on_infrastructure(task_, task_run, state) -> bool:
    exc = state.data if isinstance(state.data, BaseException) else state.result(raise_on_failure=False)
    return is_infrastructure_failure(exc if isinstance(exc, BaseException) else None)


def _summary_markdown(stage: str, record: dict[str, Any]) -> str:
    lines = [f"# stage `{stage}`: {'reused' if record['reused'] else 'completed'} in {record['seconds']} s",
             "", f"config digest `{record['config_digest'][:16]}`, folder `{record['out_dir']}`", "",
             "| input | path | sha256 |", "|---|---|---|"]
    lines += [f"| {r} | `{p}` | `{record['input_digests'][r][:16]}` |" for r, p in record["inputs"].items()]
    lines += ["", "| output | path | sha256 |", "|---|---|---|"]
    lines += [f"| {r} | `{p}` | `{record['output_digests'][r][:16]}` |" for r, p in record["outputs"].items()]
    return "\n".join(lines)


def _metric_rows(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """Scalar metrics as rows (nested values are in the outputs, not in a table cell)."""
    return [{"metric": k, "value": v} for k, v in sorted(metrics.items())
            if isinstance(v, (int, float, str, bool)) or v is None]

_PUBLISHERS = {"paper-tables": publish_paper_report}
"""Stages whose output deserves its own artifact beyond the outputs table."""


def _trigger() -> Trigger:
    tags = runtime.task_run.tags or []
    return check_trigger(next((t[len(TRIGGER_TAG_PREFIX):] for t in tags if t.startswith(TRIGGER_TAG_PREFIX)), "cli"))


# Retries: 2, for infrastructure failures only. Never cached by Prefect: reuse is the stage's own
# content-keyed folder (pipeline.run_stage), which a training run with `resume` always bypasses.
# log_prints=False, explicitly: None would inherit the entry flow's True, and Prefect's print patch
# then logs every print(file=None), even one a library made while it had swapped sys.stdout for a
# buffer to capture it (dill's global detection disassembles each function datasets fingerprints:
# a page of bytecode per TRL dataset map in the sft stage). Library prints stay on stdout.
@task(name="run-stage", task_run_name="{stage}", retries=2, retry_delay_seconds=10,
      retry_condition_fn=_retry_on_infrastructure, cache_policy=NO_CACHE, log_prints=False)
def run_stage_task(stage: str, config: dict[str, Any], inputs: dict[str, str]) -> dict[str, Any]:
    """Run one stage; returns the StageRecord as JSON (outputs, digests, metrics, timing)."""
    read_cancellations(prefect_cancellation)  # a Cancel from the UI is recorded cancelled, not failed
    spec = get_stage(stage)
    frozen = config_from_mapping(spec.config_class(), config, f"flow parameter config of stage '{stage}'")
    layout = state_layout()
    prepare = spec.experiment_function()
    experiment = prepare(frozen, inputs) if prepare else None
    if experiment is not None:
        record(experiment_created(experiment, experiments_root(layout)), state=layout)
    run = StageRunRecorder.start(stage, frozen, trigger=_trigger(), flow_run_id=runtime.flow_run.id, state=layout,
                                 experiment_id=experiment.experiment_id if experiment else None)
    training = TrainingRecorder(run, experiments_root(layout)) if experiment else None
    try:
        # An evaluation inside the stage (eval70) records its trials as they land, owned by the model's experiment.
        with (listening(training.on_report) if training else nullcontext(),
              observing(WarehouseEvalObserver(run_id=run.run_id, trigger=_trigger(), state=layout))):
            result = run_stage(stage, frozen, inputs, layout)
    except BaseException as exc:
        if training:
            training.record_failed()
        run.fail(exc)
        raise
    if training and not result.reused:
        try:
            training.record_finished(result)
        except BaseException as exc:
            run.fail(exc)
            raise
    run.finish(result)
    rows = [{"role": r, "path": p, "sha256": result.output_digests[r]} for r, p in result.outputs.items()]
    create_table_artifact(
        key=f"{stage}-outputs",
        table=rows,
        description=f"Outputs of stage {stage} (config {result.config_digest[:12]}, reused={result.reused})",
    )
    create_markdown_artifact(key=f"{stage}-summary", markdown=_summary_markdown(stage, result.to_json()),
                             description=f"stage {stage}: inputs, outputs, digests")
    if metric_rows := _metric_rows(dict(result.metrics)):
        create_table_artifact(key=f"{stage}-metrics", table=metric_rows, description=f"metrics of stage {stage}")
    if training:
        training_artifacts(stage, result)
    if stage in _PUBLISHERS:
        _PUBLISHERS[stage](result.to_json())
    return {**result.to_json(), "run_id": run.run_id}

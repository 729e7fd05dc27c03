"""The pattern every stage follows: a Prefect task calling a pure skillgate_core function.

Inputs cross the task boundary as JSON (config values, role -> path); the result comes back as
JSON (paths + sha256 digests + metrics), never live objects, so Prefect can hash, persist and show
it. The task rebuilds the frozen config from its JSON, which re-checks every key and type.
"""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.artifacts import create_table_artifact

from skillgate_core.config import config_from_mapping
from skillgate_core.paths import state_layout
from skillgate_core.pipeline import run_stage
from skillgate_core.stages import get_stage

__all__ = ["run_stage_task"]


@task(name="run-stage", task_run_name="{stage}", retries=0)
def run_stage_task(stage: str, config: dict[str, Any], inputs: dict[str, str]) -> dict[str, Any]:
    """Run one stage; returns the StageRecord as JSON (outputs, digests, metrics, timing)."""
    spec = get_stage(stage)
    frozen = config_from_mapping(spec.config_class(), config, f"flow parameter config of stage '{stage}'")
    record = run_stage(stage, frozen, inputs, state_layout())
    rows = [{"role": r, "path": p, "sha256": record.output_digests[r]} for r, p in record.outputs.items()]
    create_table_artifact(
        key=f"{stage}-outputs",
        table=rows,
        description=f"Outputs of stage {stage} (config {record.config_digest[:12]}, reused={record.reused})",
    )
    return record.to_json()

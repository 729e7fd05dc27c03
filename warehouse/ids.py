"""Warehouse ids: qualified ids of owned things and fresh run ids.

Segments, exports and evaluations are named per experiment on disk (segments/RUN_NAME,
model/exports/EXPORT_ID, eval/EVAL_ID); in the warehouse they are qualified "EXPERIMENT_ID/NAME" so
names may repeat across experiments. Metric ids extend the evaluation id.

    export_key("exp-1", "step-200")                      -> "exp-1/step-200"
    checkpoint_key("exp-1", "seg-a", 200)                -> "exp-1/seg-a/step_00000200"
    metric_key("exp-1/eval70-s200", "trial_success")     -> "exp-1/eval70-s200/trial_success"
    metric_key("exp-1/eval70-s200", "trial_success", "procedural")
                                                         -> "exp-1/eval70-s200/trial_success@procedural"
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime

from skillgate_core.ownership.layout import checkpoint_name

__all__ = ["checkpoint_key", "eval_key", "export_key", "metric_key", "new_run_id", "segment_key"]


def segment_key(experiment_id: str | None, run_name: str) -> str:
    return f"{experiment_id}/{run_name}" if experiment_id else run_name


def checkpoint_key(experiment_id: str, run_name: str, step: int) -> str:
    """EXPERIMENT_ID/RUN_NAME/step_NNNNNNNN: the checkpoint folder's path below the experiment, less 'checkpoints'."""
    return f"{experiment_id}/{run_name}/{checkpoint_name(step)}"


def export_key(experiment_id: str, export_name: str) -> str:
    return f"{experiment_id}/{export_name}"


def eval_key(experiment_id: str, eval_name: str) -> str:
    return f"{experiment_id}/{eval_name}"


def metric_key(eval_id: str, name: str, scope: str = "all") -> str:
    return f"{eval_id}/{name}" if scope == "all" else f"{eval_id}/{name}@{scope}"


def new_run_id(stage: str) -> str:
    """'{stage}-{UTC yyyymmddThhmmss}-{6 hex}': sortable by start, unique without coordination."""
    return f"{stage}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"

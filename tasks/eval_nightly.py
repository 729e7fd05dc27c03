"""Prefect tasks of the nightly regression: pick the exports, compare each nightly evaluation with the
previous one of the same fingerprint, and record the comparison (warehouse eval_regression row).

The evaluations themselves run as ordinary `eval70` stage sub-flows (tasks/stage.py), so each is a
recorded stage run whose trials land in the warehouse as they are played.
"""

from __future__ import annotations

from typing import Any

from prefect import runtime, task

from skillgate_core.base.paths import state_layout
from skillgate_core.evaluation.nightly import compare_nightly, nightly_targets
from warehouse.evaluations import record_regression

__all__ = ["compare_task", "targets_task"]


@task(name="nightly-targets")
def targets_task(experiments: list[str], export: str) -> list[dict[str, str]]:
    """The newest export of each named experiment (or the one named export), as JSON."""
    root = state_layout().experiments
    return [{"experiment_id": t.experiment_id, "export_id": t.export_id, "path": str(t.path)}
            for t in nightly_targets(root, experiments, export)]


@task(name="nightly-compare", task_run_name="compare-{experiment_id}")
def compare_task(experiment_id: str, eval_id: str, n_boot: int, seed: int, alpha: float) -> dict[str, Any]:
    """Compare with the previous nightly of the same fingerprint; record the warehouse row; return it as JSON."""
    comparison = compare_nightly(state_layout().experiments, experiment_id, eval_id, n_boot=n_boot, seed=seed,
                                 alpha=alpha)
    record_regression(comparison, flow_run_id=str(runtime.flow_run.id) if runtime.flow_run.id else None)
    return comparison.to_json()

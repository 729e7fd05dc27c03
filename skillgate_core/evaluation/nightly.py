"""The nightly regression's library side: which exports to evaluate, and what to compare them with.

The Prefect flow (flows/eval_nightly.py) evaluates each target with stage `eval70` under the tag
nightly-YYYY-MM-DD, then compares it with the previous nightly evaluation of the same experiment
and the same protocol fingerprint (read from the experiment's own evaluation folders), flags a drop
outside the bootstrap interval (evaluation/regression.py) and fails the run.

    targets = nightly_targets(root, experiments=["grpo-skillgate-001"], export="")
    previous = previous_nightly(root, "grpo-skillgate-001", fingerprint, current_eval_id)
    compare_nightly(root, "grpo-skillgate-001", current_eval_id)   # NightlyComparison
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillgate_core.evaluation.regression import RegressionCheck, check_regression, trial_success
from skillgate_core.ownership import (
    EvalRecord,
    UnknownExport,
    experiment_dir,
    list_eval_rows,
    list_evals,
    list_experiments,
    list_exports,
    load_eval,
    load_export,
    open_experiment,
)

__all__ = ["NIGHTLY_TAG_PREFIX", "NightlyComparison", "NightlyTarget", "compare_nightly", "nightly_tag",
           "nightly_targets", "previous_nightly"]

NIGHTLY_TAG_PREFIX = "nightly-"


def nightly_tag(date: str) -> str:
    """The evaluation tag of the nightly of `date` (YYYY-MM-DD)."""
    return NIGHTLY_TAG_PREFIX + date


# Declarations below, not logic: each field documented where it is declared (docs/design.md, Style).
@dataclass(frozen=True)
class NightlyTarget:
    """One export the nightly evaluates."""

    experiment_id: str
    export_id: str
    path: Path
    """The published export folder."""


@dataclass(frozen=True)
class NightlyComparison:
    """One nightly evaluation against the previous one."""

    experiment_id: str
    eval_id: str
    export_id: str
    fingerprint: str
    trial_success: float
    """Trial success of this evaluation over all its trials (shown even when there is nothing to compare)."""
    previous_eval_id: str | None
    """None when this is the first nightly of this experiment and fingerprint."""
    previous_export_id: str | None
    check: RegressionCheck | None
    """None without a previous nightly."""

    @property
    def regressed(self) -> bool:
        return bool(self.check and self.check.regressed)

    def to_json(self) -> dict[str, Any]:
        return {"experiment_id": self.experiment_id, "eval_id": self.eval_id, "export_id": self.export_id,
                "fingerprint": self.fingerprint, "trial_success": self.trial_success, "previous_eval_id": self.previous_eval_id,
                "previous_export_id": self.previous_export_id, "regressed": self.regressed,
                "check": self.check.to_json() if self.check else None}


def nightly_targets(root: Path, experiments: Sequence[str] = (), export: str = "") -> list[NightlyTarget]:
    """The newest published export (highest step, then latest) of each named experiment, or the one
    export named EXPERIMENT_ID/EXPORT_ID; neither named: of every experiment that has an export (what
    the scheduled nightly follows). Nothing to evaluate is an error: a nightly that evaluated nothing
    must not end Completed."""
    targets = []
    if not experiments and not export:
        experiments = [e.experiment_id for e in list_experiments(root)
                       if list_exports(open_experiment(root, e.experiment_id)[0])]
        if not experiments:
            raise UnknownExport(f"the nightly found no experiment with a published export under {root}: train one "
                                "first (e.g. `skillgate run rl-train --execute`), or name experiments/export")
    if export:
        experiment_id, _, export_id = export.partition("/")
        if not export_id:
            raise ValueError(f"export {export!r}: expected EXPERIMENT_ID/EXPORT_ID")
        exp, _ = open_experiment(root, experiment_id)
        rec = load_export(exp, export_id)
        if rec is None:
            raise UnknownExport(f"no published export '{export_id}' in experiment '{experiment_id}'")
        targets.append(NightlyTarget(experiment_id, export_id, Path(rec.path)))
    for experiment_id in experiments:
        exp, _ = open_experiment(root, experiment_id)
        exports = list_exports(exp)
        if not exports:
            raise UnknownExport(f"experiment '{experiment_id}' has no published export to evaluate")
        newest = max(exports, key=lambda r: (r.step, r.created_at, r.export_id))
        targets.append(NightlyTarget(experiment_id, newest.export_id, Path(newest.path)))
    return targets


def previous_nightly(root: Path, experiment_id: str, fingerprint: str, current_eval_id: str) -> EvalRecord | None:
    """The latest completed nightly evaluation of this experiment and fingerprint started before the
    current one (any export of the experiment)."""
    exp = experiment_dir(root, experiment_id)
    current = load_eval(exp, current_eval_id)
    candidates = [
        e for e in list_evals(exp)
        if e.eval_id != current_eval_id and e.status == "completed" and e.protocol_fingerprint == fingerprint
        and str(e.extra.get("tag", "")).startswith(NIGHTLY_TAG_PREFIX) and e.started_at < current.started_at
    ]
    return max(candidates, key=lambda e: e.started_at, default=None)


def compare_nightly(root: Path, experiment_id: str, eval_id: str, *, n_boot: int = 2000, seed: int = 0,
                    alpha: float = 0.05) -> NightlyComparison:
    """This nightly evaluation vs the previous one of the same fingerprint (None check when there is none)."""
    exp = experiment_dir(root, experiment_id)
    current = load_eval(exp, eval_id)
    if current.status != "completed":
        raise ValueError(f"evaluation {experiment_id}/{eval_id} is {current.status}; compare completed ones only")
    rows = list_eval_rows(exp, eval_id).values()
    success = trial_success(rows)
    previous = previous_nightly(root, experiment_id, current.protocol_fingerprint, eval_id)
    if previous is None:
        return NightlyComparison(experiment_id, eval_id, current.export_id, current.protocol_fingerprint, success,
                                 None, None, None)
    check = check_regression(rows, list_eval_rows(exp, previous.eval_id).values(), n_boot=n_boot, seed=seed,
                             alpha=alpha)
    return NightlyComparison(experiment_id, eval_id, current.export_id, current.protocol_fingerprint, success,
                             previous.eval_id, previous.export_id, check)

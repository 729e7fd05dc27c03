"""What an experiments root holds, read from the folders when asked (nothing is cached on disk).

The folders are the truth and the warehouse is the queryable copy; a listing is derived on demand,
so there is no third copy of the lineage to keep current or to drift. Reading is cheap: one JSON
file per experiment, segment, export and evaluation (no weights are read).

    describe_experiments(root)["exp-1"]["exports"]     # [{"export_id": "step-10", "run_name": ..., "step": 10}]
    describe_experiments(root, "exp-1")                # only that experiment (UnknownExperiment if absent)
    describe_experiments(root, on_bad=bad.append)      # an unreadable record is handed over and skipped
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skillgate_core.ownership.errors import OnBadRecord
from skillgate_core.ownership.evals import count_eval_rows, list_evals
from skillgate_core.ownership.experiment import list_experiments, open_experiment
from skillgate_core.ownership.exports import list_exports
from skillgate_core.ownership.layout import ExperimentDir, experiment_dir
from skillgate_core.ownership.records import ExperimentRecord
from skillgate_core.ownership.segments import list_checkpoints, list_segments

__all__ = ["describe_experiments"]


def _describe(rec: ExperimentRecord, exp: ExperimentDir, on_bad: OnBadRecord | None) -> dict[str, Any]:
    return {
        "algorithm": rec.algorithm,
        "data": rec.data,
        "init": rec.init,
        "hypothesis": rec.hypothesis,
        "created_at": rec.created_at,
        "path": str(exp.root),
        "segments": [
            {"run_name": s.run_name, "ordinal": s.ordinal, "started_at": s.started_at, "ended_at": s.ended_at,
             "exit_reason": s.exit_reason, "resumed_from_step": s.resumed_from.step if s.resumed_from else None}
            for s in list_segments(exp, on_bad)
        ],
        "checkpoints": [{"run_name": c.run_name, "step": c.step, "path": c.path} for c in list_checkpoints(exp, on_bad=_quiet(on_bad))],
        "exports": [
            {"export_id": x.export_id, "run_name": x.run_name, "step": x.step, "path": x.path}
            for x in list_exports(exp, on_bad=on_bad)
        ],
        "evals": [
            {"eval_id": e.eval_id, "export_id": e.export_id, "status": e.status,
             "protocol_fingerprint": e.protocol_fingerprint, "rows": count_eval_rows(exp, e.eval_id)}
            for e in list_evals(exp, on_bad)
        ],
    }


def _quiet(on_bad: OnBadRecord | None) -> OnBadRecord | None:
    """For a second pass over records already reported: skip them without reporting them twice."""
    return None if on_bad is None else (lambda _: None)


def describe_experiments(
    root: Path, experiment_id: str | None = None, on_bad: OnBadRecord | None = None
) -> dict[str, dict[str, Any]]:
    """{EXPERIMENT_ID: its facts, segments, checkpoints, exports and evaluations}, sorted by id.

    With `experiment_id`, only that one (UnknownExperiment, listing the known ids, if it is absent).
    An unreadable record file is BadRecord, or with `on_bad` handed to it and left out of the listing.
    """
    if experiment_id is not None:
        exp, rec = open_experiment(root, experiment_id)
        return {experiment_id: _describe(rec, exp, on_bad)}
    return {rec.experiment_id: _describe(rec, experiment_dir(root, rec.experiment_id), on_bad)
            for rec in list_experiments(root, on_bad)}

"""Create, load and list experiments (experiment.json under SKILLGATE_HOME/experiments/ID/).

    rec = create_experiment(root, "grpo-sg-001", algorithm="grpo:skillgate", data="rl_train@3f2a...",
                            init="sft-merged@9c1d...", hypothesis="selector credit beats task-only")
    load_experiment(root, "grpo-sg-001")        # UnknownExperiment if absent
"""

from __future__ import annotations

from pathlib import Path

from skillgate_core.base.atomic import atomic_create_json
from skillgate_core.ownership.errors import ExperimentExists, OnBadRecord, UnknownExperiment
from skillgate_core.ownership.layout import EXPERIMENT_FILE, ExperimentDir, experiment_dir
from skillgate_core.ownership.records import ExperimentRecord, read_or_report, read_record, utc_now

__all__ = ["create_experiment", "list_experiments", "load_experiment", "open_experiment"]


def create_experiment(
    root: Path, experiment_id: str, *, algorithm: str, data: str, init: str, hypothesis: str
) -> ExperimentRecord:
    """Create the experiment folder and its experiment.json; ExperimentExists if it already has one."""
    exp = experiment_dir(root, experiment_id)
    exp.root.mkdir(parents=True, exist_ok=True)
    record = ExperimentRecord(
        experiment_id=experiment_id, algorithm=algorithm, data=data, init=init,
        hypothesis=hypothesis, created_at=utc_now(),
    )
    try:
        atomic_create_json(exp.experiment_file, record.to_json())  # exclusive and never half-written
    except FileExistsError:
        raise ExperimentExists(
            f"experiment '{experiment_id}' already exists at {exp.root}; a new experiment is only for a "
            "change of algorithm, data, init or hypothesis: resume it, or pick a new id"
        ) from None
    return record


def open_experiment(root: Path, experiment_id: str | None) -> tuple[ExperimentDir, ExperimentRecord]:
    """The folder and record of an existing experiment; UnknownExperiment if it has no experiment.json,
    BadRecord if it cannot be read."""
    exp = experiment_dir(root, experiment_id or "")
    if not exp.experiment_file.is_file():
        known = ", ".join(r.experiment_id for r in list_experiments(root, on_bad=lambda _: None)[:10]) or "none"
        raise UnknownExperiment(
            f"no experiment '{experiment_id}' under {Path(root).resolve()} (no {EXPERIMENT_FILE}); known: {known}"
        )
    return exp, read_record(ExperimentRecord, exp.experiment_file, experiment_id=exp.experiment_id)


def load_experiment(root: Path, experiment_id: str) -> ExperimentRecord:
    return open_experiment(root, experiment_id)[1]


def list_experiments(root: Path, on_bad: OnBadRecord | None = None) -> list[ExperimentRecord]:
    """Every experiment with an experiment.json under `root`, sorted by id.

    An unreadable experiment.json is BadRecord, or with `on_bad` handed to it and skipped."""
    base = Path(root)
    if not base.is_dir():
        return []
    out = []
    for p in sorted(base.iterdir()):
        f = p / EXPERIMENT_FILE
        if p.is_dir() and not p.name.startswith(".") and f.is_file():
            rec = read_or_report(on_bad, ExperimentRecord, f, experiment_id=p.name)
            if rec is not None:
                out.append(rec)
    return out

"""Experiment ownership on disk (docs/method.md 10): pure file operations, no Prefect, no warehouse.

One scientific experiment owns its segments (one per process lifetime), its model exports and every
evaluation of its models, all under SKILLGATE_HOME/experiments/EXPERIMENT_ID/ (layout.py draws the
tree). Every JSON record is written to a temp file and renamed; exports, checkpoints and eval rows
are built in a temp folder and renamed into place; the resume rules raise one error class each
(errors.py). The warehouse records what these functions return; `skillgate warehouse verify`
checks the two agree. Nothing else keeps a copy: `describe_experiments` (listing.py) reads a
listing from the folders when asked.

Modules, lowest first (an import only points down; pyproject's import-linter contract holds it):
errors, layout, records, experiment, segments/exports, evals, listing (atomic publishing: base.atomic).

    from skillgate_core.ownership import create_experiment, start_segment, build_export
    root = experiments_root(state_layout())
    create_experiment(root, "exp-1", algorithm="grpo:skillgate", data="...", init="...", hypothesis="...")
    start_segment(root, "run-a", experiment_id="exp-1")
    build_export(root, "exp-1", "step-200", run_name="run-a", step=200, write=model.save_pretrained)
"""

from skillgate_core.base.atomic import remove_stale_builds, stale_builds
from skillgate_core.ownership.errors import (
    BadRecord,
    CheckpointExists,
    CheckpointOutsideExperiment,
    EvalExists,
    EvalRowExists,
    ExperimentExists,
    ExperimentIdRequired,
    ExportExists,
    ExportInvalid,
    InvalidName,
    LatestStepMismatch,
    OwnershipError,
    ResumeError,
    ResumeRequired,
    SegmentNotEmpty,
    UnknownEval,
    UnknownExperiment,
    UnknownExport,
    UnknownSegment,
)
from skillgate_core.ownership.evals import (
    EVAL_STATUSES,
    count_eval_rows,
    finish_eval,
    list_eval_rows,
    list_evals,
    load_eval,
    reopen_eval,
    runner_alive,
    start_eval,
    write_eval_row,
)
from skillgate_core.ownership.experiment import (
    create_experiment,
    list_experiments,
    load_experiment,
    open_experiment,
)
from skillgate_core.ownership.exports import (
    build_endpoint_export,
    build_export,
    list_exports,
    load_export,
    validate_export_dir,
)
from skillgate_core.ownership.layout import ExperimentDir, experiment_dir, experiments_root
from skillgate_core.ownership.listing import describe_experiments
from skillgate_core.ownership.records import (
    CheckpointRef,
    EvalRecord,
    ExperimentRecord,
    ExportRecord,
    ResumePoint,
    SegmentRecord,
)
from skillgate_core.ownership.segments import (
    finish_segment,
    latest_checkpoint,
    list_checkpoints,
    list_segments,
    load_segment,
    save_checkpoint,
    start_segment,
)

__all__ = [
    "EVAL_STATUSES",
    "BadRecord",
    "CheckpointExists",
    "CheckpointOutsideExperiment",
    "CheckpointRef",
    "EvalExists",
    "EvalRecord",
    "EvalRowExists",
    "ExperimentDir",
    "ExperimentExists",
    "ExperimentIdRequired",
    "ExperimentRecord",
    "ExportExists",
    "ExportInvalid",
    "ExportRecord",
    "InvalidName",
    "LatestStepMismatch",
    "OwnershipError",
    "ResumeError",
    "ResumePoint",
    "ResumeRequired",
    "SegmentNotEmpty",
    "SegmentRecord",
    "UnknownEval",
    "UnknownExperiment",
    "UnknownExport",
    "UnknownSegment",
    "build_endpoint_export",
    "build_export",
    "count_eval_rows",
    "create_experiment",
    "describe_experiments",
    "experiment_dir",
    "experiments_root",
    "finish_eval",
    "finish_segment",
    "latest_checkpoint",
    "list_checkpoints",
    "list_eval_rows",
    "list_evals",
    "list_experiments",
    "list_exports",
    "list_segments",
    "load_eval",
    "load_experiment",
    "load_export",
    "load_segment",
    "open_experiment",
    "remove_stale_builds",
    "reopen_eval",
    "runner_alive",
    "save_checkpoint",
    "stale_builds",
    "start_eval",
    "start_segment",
    "validate_export_dir",
    "write_eval_row",
]

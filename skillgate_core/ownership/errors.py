"""Errors of the ownership layout: one class per rule, each with a stable code.

Every error prints as `[CODE] message`, and the message says what was found, what was expected and
what to do. Callers (the CLI, Prefect tasks, tests) match on the class or on `.code`, never on text.

    try:
        start_segment(root, "run-2", experiment_id="exp-1", resume_from=ckpts, expected_step=200)
    except LatestStepMismatch as exc:
        print(exc.code, exc)   # E_RESUME_STEP_MISMATCH [E_RESUME_STEP_MISMATCH] ...
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar

__all__ = [
    "BadRecord",
    "CheckpointExists",
    "CheckpointOutsideExperiment",
    "EvalExists",
    "EvalRowExists",
    "ExperimentExists",
    "ExperimentIdRequired",
    "ExportExists",
    "ExportInvalid",
    "InvalidName",
    "LatestStepMismatch",
    "OnBadRecord",
    "OwnershipError",
    "ResumeError",
    "ResumeRequired",
    "SegmentNotEmpty",
    "UnknownEval",
    "UnknownExperiment",
    "UnknownExport",
    "UnknownSegment",
]


class OwnershipError(Exception):
    """Base of every ownership error; `code` is stable and machine-readable."""

    code: ClassVar[str] = "E_OWNERSHIP"

    def __str__(self) -> str:
        return f"[{self.code}] {self.args[0] if self.args else ''}"


class InvalidName(OwnershipError, ValueError):
    """An id used as a folder name is empty, too long, or holds characters other than [A-Za-z0-9._-]."""

    code = "E_INVALID_NAME"


class ExperimentExists(OwnershipError):
    code = "E_EXPERIMENT_EXISTS"


class UnknownExperiment(OwnershipError):
    code = "E_UNKNOWN_EXPERIMENT"


class UnknownSegment(OwnershipError):
    code = "E_UNKNOWN_SEGMENT"


class UnknownExport(OwnershipError):
    code = "E_UNKNOWN_EXPORT"


class UnknownEval(OwnershipError):
    code = "E_UNKNOWN_EVAL"


class CheckpointExists(OwnershipError):
    code = "E_CHECKPOINT_EXISTS"


class ExportExists(OwnershipError):
    code = "E_EXPORT_EXISTS"


class EvalExists(OwnershipError):
    code = "E_EVAL_EXISTS"


class EvalRowExists(OwnershipError):
    code = "E_EVAL_ROW_EXISTS"


class BadRecord(OwnershipError):
    """A record file (experiment.json, run.json, lineage.json, eval.json) that cannot be read as its
    record: not UTF-8 or JSON, a field of the wrong type, or a name that differs from its folder's."""

    code = "E_BAD_RECORD"

    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


OnBadRecord = Callable[[BadRecord], None]
"""What a listing does with an unreadable record when given one: report it (and skip it)."""


class ExportInvalid(OwnershipError):
    """An export failed validation; `problems` lists every failed check (not only the first)."""

    code = "E_EXPORT_INVALID"

    def __init__(self, export_id: str, problems: Sequence[str]) -> None:
        self.export_id = export_id
        self.problems = tuple(problems)
        super().__init__(f"export '{export_id}' is invalid: " + "; ".join(self.problems))


# --- resume rules (docs/method.md 10): one class per rule ------------------------------------------


class ResumeError(OwnershipError):
    """Base of the resume-rule violations."""

    code = "E_RESUME"


class ExperimentIdRequired(ResumeError):
    """Rule 1: a segment (fresh or resumed) names its experiment explicitly; we never guess it."""

    code = "E_RESUME_EXPERIMENT_ID_REQUIRED"


class CheckpointOutsideExperiment(ResumeError):
    """Rule 2: the checkpoint root must lie inside the experiment's own segments/ folder."""

    code = "E_RESUME_CHECKPOINT_OUTSIDE_EXPERIMENT"


class LatestStepMismatch(ResumeError):
    """Rule 3: the caller's expected latest step must equal the latest complete checkpoint found."""

    code = "E_RESUME_STEP_MISMATCH"


class SegmentNotEmpty(ResumeError):
    """Rule 4: a segment folder that holds anything is never reused; every restart gets a new RUN_NAME."""

    code = "E_SEGMENT_NOT_EMPTY"


class ResumeRequired(ResumeError):
    """Rule 5: an experiment that already has checkpoints continues only by an explicit resume."""

    code = "E_RESUME_REQUIRED"

"""Segments (one per process lifetime), their checkpoints, and the resume rules of docs/method.md 10.

A training process starts a segment of an existing experiment under a new RUN_NAME, saves complete
checkpoints into it, and ends it with an exit reason. A restart is a *new* segment that resumes
from a checkpoint; the rules, each with its own error (errors.py):

  1. the experiment id is given explicitly ............................. ExperimentIdRequired
     (and names an existing experiment) .................................. UnknownExperiment
  2. the checkpoint root lies inside that experiment's segments/ ......... CheckpointOutsideExperiment
  3. the caller's expected latest step equals the latest complete
     checkpoint there, and no other segment holds a newer one ............ LatestStepMismatch
  4. a non-empty segment folder is never reused .......................... SegmentNotEmpty
  5. an experiment with checkpoints continues only by a resume ........... ResumeRequired

    seg = start_segment(root, "run-b", experiment_id="exp-1",
                        resume_from=exp.checkpoints("run-a"), expected_step=200)
    save_checkpoint(root, "exp-1", "run-b", 300, lambda d: (d / "state.pt").write_bytes(blob))
    finish_segment(root, "exp-1", "run-b", "completed")
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

from skillgate_core.base.atomic import atomic_create_json, atomic_write_json, building_dir
from skillgate_core.base.file_locks import file_lock
from skillgate_core.ownership.errors import (
    CheckpointExists,
    CheckpointOutsideExperiment,
    ExperimentIdRequired,
    LatestStepMismatch,
    OnBadRecord,
    OwnershipError,
    ResumeRequired,
    SegmentNotEmpty,
    UnknownSegment,
)
from skillgate_core.ownership.experiment import open_experiment
from skillgate_core.ownership.layout import (
    COMPLETE_MARKER,
    SEGMENT_FILE,
    ExperimentDir,
    parse_checkpoint_name,
)
from skillgate_core.ownership.records import (
    CheckpointRef,
    ResumePoint,
    SegmentRecord,
    current_host,
    read_or_report,
    read_record,
    utc_now,
)

__all__ = [
    "finish_segment",
    "latest_checkpoint",
    "list_checkpoints",
    "list_segments",
    "load_segment",
    "save_checkpoint",
    "start_segment",
]


def start_segment(
    root: Path,
    run_name: str,
    *,
    experiment_id: str | None,
    resume_from: Path | None = None,
    expected_step: int | None = None,
    host: str | None = None,
    pid: int | None = None,
) -> SegmentRecord:
    """Start segment RUN_NAME of `experiment_id`, fresh or resuming from `resume_from`.

    `resume_from` is a checkpoint root: segments/RUN/checkpoints (or the segment folder, or one
    step_N folder in it). Writes segments/RUN_NAME/run.json and returns its record.
    """
    if not experiment_id:
        raise ExperimentIdRequired(
            "a segment needs the explicit experiment id (EXPERIMENT_ID); it is never guessed from the "
            "checkpoint path or the latest experiment"
        )
    exp, _ = open_experiment(root, experiment_id)
    seg_dir = exp.segment(run_name)
    with file_lock(exp.lock_file):  # ordinal allocation and the emptiness check are one step
        if seg_dir.exists() and any(seg_dir.iterdir()):
            raise SegmentNotEmpty(
                f"segment '{run_name}' of experiment '{experiment_id}' already holds "
                f"{', '.join(sorted(p.name for p in seg_dir.iterdir())[:5])}; every restart gets a new RUN_NAME"
            )
        latest = latest_checkpoint(exp)
        resumed: ResumePoint | None = None
        if resume_from is None:
            if latest is not None:
                raise ResumeRequired(
                    f"experiment '{experiment_id}' already has checkpoints (latest: step {latest.step} in "
                    f"segment '{latest.run_name}'); continue it with resume_from={latest.path!s} and "
                    f"expected_step={latest.step}, or start a new experiment"
                )
        else:
            resumed = _check_resume(exp, Path(resume_from), expected_step, latest)
        ordinal = len(list_segments(exp))
        seg_dir.mkdir(parents=True, exist_ok=True)
        record = SegmentRecord(
            experiment_id=experiment_id, run_name=run_name, ordinal=ordinal,
            host=host or current_host(), pid=pid if pid is not None else os.getpid(),
            started_at=utc_now(), resumed_from=resumed,
        )
        atomic_create_json(seg_dir / SEGMENT_FILE, record.to_json())
    return record


def _checkpoints_root(exp: ExperimentDir, given: Path) -> Path:
    """Normalise `given` to a segments/RUN/checkpoints folder of `exp`, or raise rule 2."""
    path = given.expanduser().resolve()  # resolve symlinks: a link must not smuggle in a foreign root
    segments = exp.segments.resolve()
    if not path.is_relative_to(exp.root.resolve()):
        raise CheckpointOutsideExperiment(
            f"checkpoint root {path} is outside experiment '{exp.experiment_id}' (expected a folder under "
            f"{segments}/RUN_NAME/checkpoints); a checkpoint of another experiment is never resumed"
        )
    parts = path.relative_to(segments).parts if path.is_relative_to(segments) else ()
    if len(parts) == 1:  # the segment folder itself
        return path / "checkpoints"
    if len(parts) >= 2 and parts[1] == "checkpoints" and len(parts) <= 3:
        return segments / parts[0] / "checkpoints"
    raise CheckpointOutsideExperiment(
        f"checkpoint root {path} is inside experiment '{exp.experiment_id}' but not a checkpoint root "
        f"(expected {segments}/RUN_NAME/checkpoints)"
    )


def _check_resume(
    exp: ExperimentDir, resume_from: Path, expected_step: int | None, latest: CheckpointRef | None
) -> ResumePoint:
    ck_root = _checkpoints_root(exp, resume_from)
    run_name = ck_root.parent.name
    found = max(_complete_checkpoints(ck_root, run_name), key=lambda c: c.step, default=None)
    where = f"{ck_root}"
    if expected_step is None:
        raise LatestStepMismatch(
            f"resume needs the expected latest checkpoint step (EXPECTED_LATEST_CKPT); the latest complete "
            f"checkpoint in {where} is {'step ' + str(found.step) if found else 'none'}"
        )
    if found is None:
        raise LatestStepMismatch(f"no complete checkpoint in {where}; expected step {expected_step}")
    if found.step != expected_step:
        raise LatestStepMismatch(
            f"latest complete checkpoint in {where} is step {found.step}, expected step {expected_step}"
        )
    if latest is not None and latest.step > found.step:
        raise LatestStepMismatch(
            f"experiment '{exp.experiment_id}' has a newer checkpoint (step {latest.step} in segment "
            f"'{latest.run_name}') than the expected step {expected_step} in {where}: resuming would drop it"
        )
    return ResumePoint(run_name=run_name, step=found.step, checkpoint=found.path)


def load_segment(exp: ExperimentDir, run_name: str) -> SegmentRecord:
    f = exp.segment_file(run_name)
    if not f.is_file():
        raise UnknownSegment(f"no segment '{run_name}' in experiment '{exp.experiment_id}' ({f} missing)")
    return read_record(SegmentRecord, f, run_name=run_name, experiment_id=exp.experiment_id)


def list_segments(exp: ExperimentDir, on_bad: OnBadRecord | None = None) -> list[SegmentRecord]:
    """Every segment with a run.json, by ordinal.

    An unreadable run.json is BadRecord, or with `on_bad` handed to it and skipped."""
    if not exp.segments.is_dir():
        return []
    found = (
        read_or_report(on_bad, SegmentRecord, p / SEGMENT_FILE, run_name=p.name, experiment_id=exp.experiment_id)
        for p in exp.segments.iterdir()
        if p.is_dir() and not p.name.startswith(".") and (p / SEGMENT_FILE).is_file()
    )
    return sorted((r for r in found if r is not None), key=lambda r: (r.ordinal, r.run_name))


def finish_segment(root: Path, experiment_id: str, run_name: str, exit_reason: str) -> SegmentRecord:
    """Record the end of a segment (once): ended_at and exit_reason in its run.json."""
    exp, _ = open_experiment(root, experiment_id)
    with file_lock(exp.lock_file):
        record = load_segment(exp, run_name)
        if record.ended_at is not None:
            raise OwnershipError(
                f"segment '{run_name}' already ended at {record.ended_at} ({record.exit_reason})"
            )
        record = dataclasses.replace(record, ended_at=utc_now(), exit_reason=exit_reason)
        atomic_write_json(exp.segment_file(run_name), record.to_json())
    return record


def _complete_checkpoints(ck_root: Path, run_name: str) -> list[CheckpointRef]:
    if not ck_root.is_dir():
        return []
    out = []
    for p in ck_root.iterdir():
        step = parse_checkpoint_name(p.name)
        if step is not None and (p / COMPLETE_MARKER).is_file():
            out.append(CheckpointRef(run_name=run_name, step=step, path=str(p)))
    return out


def list_checkpoints(
    exp: ExperimentDir, run_name: str | None = None, on_bad: OnBadRecord | None = None
) -> list[CheckpointRef]:
    """Complete checkpoints (COMPLETE marker present) of one segment or of all, by step.

    `on_bad`: as for list_segments (the checkpoints of a segment with a bad run.json are not listed)."""
    names = [run_name] if run_name else [r.run_name for r in list_segments(exp, on_bad)]
    out = [c for n in names for c in _complete_checkpoints(exp.checkpoints(n), n)]
    return sorted(out, key=lambda c: (c.step, c.run_name))


def latest_checkpoint(exp: ExperimentDir) -> CheckpointRef | None:
    cks = list_checkpoints(exp)
    return cks[-1] if cks else None


def save_checkpoint(
    root: Path, experiment_id: str, run_name: str, step: int, write: Callable[[Path], None]
) -> CheckpointRef:
    """Build checkpoint `step` of a running segment with `write(tmp_dir)`; publish it atomically."""
    exp, _ = open_experiment(root, experiment_id)
    record = load_segment(exp, run_name)
    if record.ended_at is not None:
        raise OwnershipError(f"segment '{run_name}' ended at {record.ended_at}; start a new segment")
    final = exp.checkpoint(run_name, step)
    try:
        with building_dir(final) as tmp:
            write(tmp)
            (tmp / COMPLETE_MARKER).write_text(utc_now() + "\n")
    except FileExistsError:
        raise CheckpointExists(f"checkpoint step {step} of segment '{run_name}' already exists ({final})") from None
    return CheckpointRef(run_name=run_name, step=step, path=str(final))

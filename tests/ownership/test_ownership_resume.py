"""The resume rules of docs/method.md 10: each violation raises its own error class with its own code."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from skillgate_core.ownership import (
    BadRecord,
    CheckpointOutsideExperiment,
    ExperimentIdRequired,
    InvalidName,
    LatestStepMismatch,
    ResumeRequired,
    SegmentNotEmpty,
    UnknownExperiment,
    create_experiment,
    experiment_dir,
    finish_segment,
    latest_checkpoint,
    list_segments,
    save_checkpoint,
    start_segment,
)
from skillgate_core.ownership import errors as errors_mod


def _ckpt(root: Path, exp: str, run: str, step: int) -> None:
    save_checkpoint(root, exp, run, step, lambda d: (d / "state.bin").write_bytes(b"x" * 8))


@pytest.fixture
def trained(root: Path, experiment: str) -> str:
    """exp-1 with segment run-a holding complete checkpoints 10 and 20 (ended: preempted)."""
    start_segment(root, "run-a", experiment_id=experiment)
    _ckpt(root, experiment, "run-a", 10)
    _ckpt(root, experiment, "run-a", 20)
    finish_segment(root, experiment, "run-a", "preempted")
    return experiment


def test_fresh_segment_then_a_valid_resume(root: Path, trained: str):
    exp = experiment_dir(root, trained)
    seg = start_segment(root, "run-b", experiment_id=trained, resume_from=exp.checkpoints("run-a"), expected_step=20)
    assert seg.ordinal == 1 and seg.pid == os.getpid()
    assert seg.resumed_from is not None and seg.resumed_from.step == 20 and seg.resumed_from.run_name == "run-a"
    assert [s.run_name for s in list_segments(exp)] == ["run-a", "run-b"]
    assert exp.segment_file("run-b").is_file()
    # the segment folder or one step folder are accepted as the checkpoint root too
    _ckpt(root, trained, "run-b", 30)
    seg_c = start_segment(root, "run-c", experiment_id=trained, resume_from=exp.checkpoint("run-b", 30), expected_step=30)
    assert seg_c.resumed_from is not None and seg_c.resumed_from.step == 30 and seg_c.ordinal == 2


@pytest.mark.parametrize("missing", [None, ""])
def test_rule_1_experiment_id_required(root: Path, trained: str, missing: str | None):
    exp = experiment_dir(root, trained)
    with pytest.raises(ExperimentIdRequired, match="explicit experiment id") as info:
        start_segment(root, "run-b", experiment_id=missing, resume_from=exp.checkpoints("run-a"), expected_step=20)
    assert info.value.code == "E_RESUME_EXPERIMENT_ID_REQUIRED"


def test_rule_1_unknown_experiment(root: Path, trained: str):
    with pytest.raises(UnknownExperiment, match="no experiment 'exp-9'.*known: exp-1") as info:
        start_segment(root, "run-b", experiment_id="exp-9")
    assert info.value.code == "E_UNKNOWN_EXPERIMENT"


def test_rule_2_checkpoint_root_outside_the_experiment(root: Path, trained: str, tmp_path: Path):
    create_experiment(root, "exp-2", algorithm="a", data="d", init="i", hypothesis="h")
    start_segment(root, "run-x", experiment_id="exp-2")
    _ckpt(root, "exp-2", "run-x", 20)
    foreign = experiment_dir(root, "exp-2").checkpoints("run-x")
    with pytest.raises(CheckpointOutsideExperiment, match="outside experiment 'exp-1'") as info:
        start_segment(root, "run-b", experiment_id=trained, resume_from=foreign, expected_step=20)
    assert info.value.code == "E_RESUME_CHECKPOINT_OUTSIDE_EXPERIMENT"
    # a symlink inside the experiment that points elsewhere is resolved, not trusted
    link = experiment_dir(root, trained).root / "sneaky"
    link.symlink_to(foreign.parent)
    with pytest.raises(CheckpointOutsideExperiment):
        start_segment(root, "run-b", experiment_id=trained, resume_from=link / "checkpoints", expected_step=20)
    link.unlink()
    # planted among the segments, the foreign run.json is refused as a record of this experiment
    link = experiment_dir(root, trained).segments / "sneaky"
    link.symlink_to(foreign.parent)
    with pytest.raises(BadRecord, match="run_name is 'run-x', expected 'sneaky'"):
        start_segment(root, "run-b", experiment_id=trained, resume_from=link / "checkpoints", expected_step=20)
    link.unlink()
    # inside the experiment, but not a checkpoint root
    with pytest.raises(CheckpointOutsideExperiment, match="not a checkpoint root"):
        start_segment(root, "run-b", experiment_id=trained, resume_from=experiment_dir(root, trained).root,
                      expected_step=20)
    assert not experiment_dir(root, trained).segment("run-b").exists()


def test_rule_3_expected_latest_step_must_match(root: Path, trained: str):
    ck = experiment_dir(root, trained).checkpoints("run-a")
    with pytest.raises(LatestStepMismatch, match="is step 20, expected step 10") as info:
        start_segment(root, "run-b", experiment_id=trained, resume_from=ck, expected_step=10)
    assert info.value.code == "E_RESUME_STEP_MISMATCH"
    with pytest.raises(LatestStepMismatch, match="needs the expected latest checkpoint step"):
        start_segment(root, "run-b", experiment_id=trained, resume_from=ck, expected_step=None)


def test_rule_3_a_newer_checkpoint_elsewhere_is_not_silently_dropped(root: Path, trained: str):
    exp = experiment_dir(root, trained)
    start_segment(root, "run-b", experiment_id=trained, resume_from=exp.checkpoints("run-a"), expected_step=20)
    _ckpt(root, trained, "run-b", 40)
    with pytest.raises(LatestStepMismatch, match="newer checkpoint \\(step 40 in segment 'run-b'\\)"):
        start_segment(root, "run-c", experiment_id=trained, resume_from=exp.checkpoints("run-a"), expected_step=20)


def test_rule_3_incomplete_checkpoints_do_not_count(root: Path, trained: str):
    exp = experiment_dir(root, trained)
    half = exp.checkpoints("run-a") / "step_00000030"  # no COMPLETE marker: a killed save
    half.mkdir()
    assert latest_checkpoint(exp).step == 20  # type: ignore[union-attr]
    with pytest.raises(LatestStepMismatch, match="is step 20, expected step 30"):
        start_segment(root, "run-b", experiment_id=trained, resume_from=exp.checkpoints("run-a"), expected_step=30)


def test_rule_4_a_non_empty_segment_is_never_reused(root: Path, trained: str):
    exp = experiment_dir(root, trained)
    with pytest.raises(SegmentNotEmpty, match="segment 'run-a' .* already holds") as info:
        start_segment(root, "run-a", experiment_id=trained, resume_from=exp.checkpoints("run-a"), expected_step=20)
    assert info.value.code == "E_SEGMENT_NOT_EMPTY"
    # an empty folder (created, then the process died before writing) may be used
    exp.segment("run-empty").mkdir(parents=True)
    seg = start_segment(root, "run-empty", experiment_id=trained, resume_from=exp.checkpoints("run-a"), expected_step=20)
    assert seg.ordinal == 1


def test_rule_5_an_experiment_with_checkpoints_continues_only_by_resume(root: Path, trained: str):
    with pytest.raises(ResumeRequired, match="already has checkpoints .*step 20") as info:
        start_segment(root, "run-b", experiment_id=trained)
    assert info.value.code == "E_RESUME_REQUIRED"


def test_run_names_are_checked(root: Path, trained: str):
    with pytest.raises(InvalidName):
        start_segment(root, "../escape", experiment_id=trained)


def test_every_error_class_has_its_own_code():
    classes = [c for c in vars(errors_mod).values() if isinstance(c, type) and issubclass(c, errors_mod.OwnershipError)]
    codes = [c.code for c in classes]
    assert len(codes) == len(set(codes)), codes
    assert str(LatestStepMismatch("x")) == "[E_RESUME_STEP_MISMATCH] x"

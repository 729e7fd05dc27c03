"""A resume checkpoint is unpickled with the weights-only unpickler: a real ZeRO-3 checkpoint loads,
a planted file whose unpickling would run code is refused by name and its code never runs."""

from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path

import pytest
import torch
from rl_workers import CheckpointCase, checkpoint_worker

from skillgate_core.rl.engine.checkpoint_load import UnsafeCheckpoint, check_checkpoint_files
from skillgate_core.rl.engine.deepspeed_engine import EngineConfig
from skillgate_core.rl.engine.launch import run_in_process


class _RunsCode:
    """Unpickling this creates the file `marker`."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture(scope="module")
def saved(tiny_model_dir, tmp_path_factory) -> tuple[str, Path]:
    folder = tmp_path_factory.mktemp("ckpt") / "engine"
    run_in_process(checkpoint_worker, CheckpointCase(str(tiny_model_dir), str(folder), save=True), use_gpu=False)
    return str(tiny_model_dir), folder


def _copy(saved: tuple[str, Path], tmp_path: Path) -> Path:
    folder = tmp_path / "engine"
    shutil.copytree(saved[1], folder)
    return folder


def _load(model_dir: str, folder: Path) -> dict:
    [r] = run_in_process(checkpoint_worker, CheckpointCase(model_dir, str(folder), save=False), use_gpu=False).results
    return r


def test_a_real_zero3_checkpoint_passes_the_check_and_resumes(saved, tmp_path):
    folder = _copy(saved, tmp_path)
    checked = check_checkpoint_files(folder / "state")
    assert sorted(p.name for p in checked) == ["zero_pp_rank_0_mp_rank_00_model_states.pt",
                                               "zero_pp_rank_0_mp_rank_00_optim_states.pt"]
    assert _load(saved[0], folder) == {"global_steps": 7}


def test_a_bf16_zero1_checkpoint_the_default_writes_on_one_gpu_passes_the_check_and_resumes(tiny_model_dir, tmp_path):
    """zero_stage auto picks stage 1 on one GPU, bf16: DeepSpeed's bf16 optimizer saves other files and
    classes than ZeRO-3 does; a resume must load them through the same restricted unpickler."""
    model_dir, folder = str(tiny_model_dir), tmp_path / "engine"
    engine = EngineConfig(lr=1e-3, dtype="bf16", zero_stage=1)
    run_in_process(checkpoint_worker, CheckpointCase(model_dir, str(folder), save=True, engine=engine), use_gpu=False)
    checked = check_checkpoint_files(folder / "state")
    assert sorted(p.name for p in checked) == ["bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt",
                                               "mp_rank_00_model_states.pt"]
    [r] = run_in_process(checkpoint_worker, CheckpointCase(model_dir, str(folder), save=False, engine=engine),
                         use_gpu=False).results
    assert r == {"global_steps": 7}


PLANTS = {
    "torch-zip": lambda obj, path: torch.save({"optimizer_state_dict": obj}, path),
    "torch-legacy": lambda obj, path: torch.save(obj, path, _use_new_zipfile_serialization=False),
    "raw-pickle": lambda obj, path: path.write_bytes(pickle.dumps(obj)),
}


@pytest.mark.parametrize("how", sorted(PLANTS))
def test_a_planted_file_is_refused_by_name_and_its_code_never_runs(saved, tmp_path, how):
    folder = _copy(saved, tmp_path)
    marker = tmp_path / "marker"
    (optim,) = (folder / "state").glob("*optim_states.pt")
    PLANTS[how](_RunsCode(marker), optim)
    with pytest.raises(UnsafeCheckpoint, match="planted: resume checkpoint file .*optim_states.pt"):
        check_checkpoint_files(folder / "state")
    assert not marker.exists()
    result = _load(saved[0], folder)  # the engine path: refused before DeepSpeed unpickles anything
    assert str(optim) in result["refused"], result
    assert not marker.exists(), "the planted file was unpickled: its code ran"


def test_a_link_in_the_checkpoint_is_refused(saved, tmp_path):
    folder = _copy(saved, tmp_path)
    (model,) = (folder / "state").glob("*model_states.pt")
    elsewhere = tmp_path / "elsewhere.pt"
    os.replace(model, elsewhere)
    model.symlink_to(elsewhere)
    with pytest.raises(UnsafeCheckpoint, match="not a regular file"):
        check_checkpoint_files(folder / "state")

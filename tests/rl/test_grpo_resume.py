"""SIGKILL of a whole GRPO run (driver, Ray workers, sandboxes) mid-way, then --resume: a new segment
of the same experiment continues from the last checkpoint and trains on exactly the task ids an
uninterrupted run trains on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from skillgate_core.base.paths import state_layout
from skillgate_core.ownership import experiment_dir, experiments_root, list_checkpoints, list_segments
from skillgate_core.rl.data_prep import RLDataPrepConfig, prepare_rl_data
from skillgate_core.rl.grpo_config import GRPOConfig
from skillgate_core.rl.grpo_stage import train_grpo

ROOT = Path(__file__).resolve().parents[2]
CONFIG = dict(steps=4, prompts_per_step=2, group_size=4, num_workers=2, rollout_source="teacher", max_turns=4,
              teacher_misleading_rate=0.5, teacher_no_read_rate=0.0, learning_rate=1e-3, max_rejected_groups=8,
              backend="bwrap", sandbox_workers=2, checkpoint_every=1, seed=11)

pytestmark = pytest.mark.slow


def _inputs(root: Path, bench: Path, policy: Path) -> dict[str, Path]:
    rl = root / "rl"
    if not rl.exists():
        prepare_rl_data(RLDataPrepConfig(max_tasks=8), {"bench": bench, "sft_model": policy}, rl)
    return {"sft_model": policy, "rl_data": rl, "bench": bench}


def _drawn(result) -> list[list[str]]:
    rows = [json.loads(line) for line in Path(result.metrics["metrics_file"]).read_text().splitlines()]
    return [r["drawn_task_ids"] for r in rows]


def test_sigkill_then_resume_trains_on_the_same_sequence(tmp_path, bench, policy, skillgate_home):
    inputs = _inputs(tmp_path, bench, policy)
    # The run to kill, in its own process group so one SIGKILL takes the driver and everything it started.
    script = textwrap.dedent("""
        import json, sys
        from pathlib import Path
        from skillgate_core.rl.grpo_config import GRPOConfig
        from skillgate_core.rl.grpo_stage import train_grpo
        cfg = GRPOConfig(experiment_id="exp-killed", **json.loads(sys.argv[1]))
        inputs = {k: Path(v) for k, v in json.loads(sys.argv[2]).items()}
        out = Path(sys.argv[3]); out.mkdir()
        train_grpo(cfg, inputs, out)
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", script, json.dumps(CONFIG),
                             json.dumps({k: str(v) for k, v in inputs.items()}), str(tmp_path / "killed")],
                            cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    exp = experiment_dir(experiments_root(state_layout()), "exp-killed")
    deadline = time.monotonic() + 900
    try:
        while not any(c.step >= 2 for c in list_checkpoints(exp) if exp.root.exists()):
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "no second checkpoint within 15 minutes"
            time.sleep(1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    killed_at = max(c.step for c in list_checkpoints(exp))
    assert killed_at < CONFIG["steps"]

    resumed = train_grpo(GRPOConfig(resume_experiment="exp-killed", **CONFIG), inputs, _mk(tmp_path / "resumed"))
    segments = sorted(list_segments(exp), key=lambda s: s.ordinal)
    assert len(segments) == 2 and segments[1].resumed_from is not None
    assert segments[1].resumed_from.step == killed_at and segments[1].exit_reason == "completed"
    assert segments[0].exit_reason is None  # killed: it never ended

    straight = train_grpo(GRPOConfig(experiment_id="exp-straight", **CONFIG), inputs, _mk(tmp_path / "straight"))
    assert _drawn(resumed) == _drawn(straight)
    assert len(_drawn(straight)) == CONFIG["steps"]


def _mk(path: Path) -> Path:
    path.mkdir()
    return path


class _RunsCode:
    """Unpickling this creates the file `marker`: what a planted checkpoint file could do."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_planted_checkpoint_file_is_refused_and_never_run(tmp_path, bench, policy, skillgate_home):
    import shutil

    import torch

    inputs = _inputs(tmp_path, bench, policy)
    config = {**CONFIG, "num_workers": 1, "sandbox_workers": 1, "steps": 1}
    train_grpo(GRPOConfig(experiment_id="exp-planted", **config), inputs, _mk(tmp_path / "first"))
    exp = experiment_dir(experiments_root(state_layout()), "exp-planted")
    (ckpt,) = list_checkpoints(exp)
    (optim,) = Path(ckpt.path).rglob("*optim_states.pt")
    original = tmp_path / "optim.pt"
    shutil.copy2(optim, original)
    marker = tmp_path / "marker"
    torch.save({"optimizer_state_dict": _RunsCode(marker)}, optim)

    with pytest.raises(Exception, match="planted: resume checkpoint file .*optim_states.pt") as info:
        train_grpo(GRPOConfig(resume_experiment="exp-planted", **{**config, "steps": 2}), inputs,
                   _mk(tmp_path / "planted"))
    assert str(optim) in str(info.value)
    assert not marker.exists(), "the planted file was unpickled: its code ran"

    shutil.copy2(original, optim)  # the real checkpoint still resumes
    resumed = train_grpo(GRPOConfig(resume_experiment="exp-planted", **{**config, "steps": 2}), inputs,
                         _mk(tmp_path / "resumed"))
    last = max(list_segments(exp), key=lambda s: s.ordinal)
    assert last.resumed_from is not None and last.resumed_from.step == 1 and last.exit_reason == "completed"
    assert max(c.step for c in list_checkpoints(exp)) == 2 and resumed.metrics["experiment_id"] == "exp-planted"
    assert not marker.exists()

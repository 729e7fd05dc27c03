"""The GPU benchmark scripts run end to end in their CPU smoke mode and write the JSON the docs read
(benchmarks/gpu/; the real runs are on the H200: docs/gpu.md)."""

from __future__ import annotations

import filecmp
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GPU = REPO / "benchmarks" / "gpu"


def _run(script: str, out: Path, *args: str) -> dict:
    done = subprocess.run([sys.executable, str(GPU / script), "--smoke", "--out", str(out), *args],
                          capture_output=True, text=True, timeout=900, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "SUMMARY" in done.stdout
    return json.loads((out / script.replace(".py", ".json")).read_text())


def test_grpo_step_vs_trl_smoke(tmp_path):
    r = _run("grpo_step_vs_trl.py", tmp_path)
    trl, ours = r["trl"], r["ours"]
    assert "error" not in trl and trl["completion_tok_per_s"] > 0 and trl["steps"] == 2
    assert "error" not in ours and ours["steps"] == 2 and ours["completion_tokens"] == 2 * 4 * 16
    assert set(ours["split_s_per_step"]) == {"generate", "reward", "logprob", "train", "sync"}
    steps = [s for s in ours["records"] if s["kind"] == "timed"]
    assert all(s["sampler"]["decode_steps"] == 15 and s["micro_batches"] > 0 for s in steps)
    assert ours["profile_top"]["ops"] and (tmp_path / "grpo_profile.txt").read_text()
    assert r["ratio"]["completion_tok_per_s"] > 0 and r["machine"]["torch"]
    assert not (tmp_path / "grpo_ours.json").exists()  # merged into the one JSON


def test_trainer_throughput_smoke_process(tmp_path):
    r = _run("trainer_throughput.py", tmp_path, "--launchers", "process", "--variants", "z3,z3_persist,z0",
             "--attn", "torch_varlen")
    assert r["anchor_ds"]["torch"]["tok_per_s"] > 0
    assert r["model"]["params"] == r["anchor_ds"]["nparams"]  # the anchor's exact model
    for name in ("z3", "z3_persist", "z0"):
        row = r["process"][name]
        assert row["tok_per_s"] > 0 and row["packs_varlen"] and row["micro_batches_per_step"] == 1, row
    assert set(r["summary"]["rows"]) == {"process/z3", "process/z3_persist", "process/z0"}


@pytest.mark.slow
def test_trainer_throughput_smoke_with_ray(tmp_path):
    r = _run("trainer_throughput.py", tmp_path)
    assert r["ray_1"]["z3"]["tok_per_s"] > 0 and r["summary"]["scaling_ray1_vs_process1"]["z3"] > 0


def test_anchor_copies_are_byte_identical_and_run_all_parses():
    shared = REPO.parent / "shared" / "gpu" / "anchors"
    copies = sorted(p.name for p in (GPU / "anchors").glob("*.py"))
    assert {"anchor_trl.py", "anchor_ds.py"} <= set(copies)
    if shared.is_dir():  # beside a developer checkout (/work/shared); absent in CI
        assert all(filecmp.cmp(GPU / "anchors" / n, shared / n, shallow=False) for n in copies)
    for script in ("run_all.sh", "run_grpo_and_rollouts.sh"):
        assert subprocess.run(["bash", "-n", str(GPU / script)]).returncode == 0


def test_grpo_step_vs_trl_presets_share_one_trl_run(tmp_path):
    r = _run("grpo_step_vs_trl.py", tmp_path, "--presets", "z3,z2", "--no-profile")
    assert set(r["ours_presets"]) == set(r["ratio_presets"]) == {"z3", "z2"}
    assert r["ours"]["preset"] == "z3" and r["ours_presets"]["z2"]["engine"]["zero_stage"] == 2
    assert all("error" not in o and o["steps"] == 2 for o in r["ours_presets"].values())
    assert not list(tmp_path.glob("grpo_ours*.json"))


def test_agent_rollouts_smoke(tmp_path):
    from skillgate_core.envs import bwrap_sandbox

    if bwrap_sandbox.unavailable_reason():
        pytest.skip(f"bubblewrap unusable here: {bwrap_sandbox.unavailable_reason()}")
    r = _run("agent_rollouts.py", tmp_path)
    lanes, one = (next(p for p in r["passes"] if p["pass"] == name) for name in ("lanes", "one_lane"))
    for p in (lanes, one):
        assert p["episodes"] == 4 and p["backends"] == {"bwrap": 4} and p["statuses"] == {"completed": 4}
        assert p["gpu_sampled_tokens"] == p["turns"] * 8  # every turn of every episode samples gen_tokens
        assert p["calls"]["verify"] == 4 and p["calls"]["tools"] == 8
    assert one["overlap"]["share_of_sandbox_work_overlapping_generation"] == 0  # lockstep: nothing overlaps
    assert lanes["overlap"]["sandbox_work_while_generating_s"] > 0
    assert r["ratio"]["episodes_per_min_lanes_over_one_lane"] > 0

"""Benchmark: where one GRPO step's time goes on this CPU machine (Ray Train + DeepSpeed ZeRO-3).

    .venv/bin/python benchmarks/grpo_step_cpu.py            # writes benchmarks/results/grpo_step_cpu.json
    .venv/bin/python benchmarks/grpo_step_cpu.py --steps 2 --out /tmp/x.json

Two runs of the real `grpo` stage on the demo-sized policy (Qwen2, vocab 2048, hidden 64, 2 layers)
over a small bundled bench (16 training tasks), 2 Ray Train workers, G = 4, 2 groups per step:

  teacher   rollouts by the noisy teacher (the CPU smoke setting): groups vary, every step trains;
  policy    rollouts by the colocated replica (the method): the untrained policy solves nothing, so
            groups are zero-variance and rejected until the step's budget is spent — this run shows
            the generate / sandbox split of on-policy rollouts, not learning.

For each run and step: time in generate / env (sandbox starts, tool calls, verification) / train
(old + reference log-probs, forward + backward, optimizer step) / weight sync, rollout and train
tokens/s, episodes, and whether the step trained. The JSON holds the command, git commit + dirty
flag and the machine. No anchor is run here: these are absolute CPU timings for orientation; the
speed claims (ratios against TRL and plain PyTorch) are the GPU step's benchmarks.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "grpo_step_cpu.json"


def _git() -> dict[str, object]:
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip())
    return {"commit": commit, "dirty": dirty}


def _machine() -> dict[str, object]:
    mem = next((int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                if line.startswith("MemTotal")), 0)
    return {"hostname": platform.node(), "cpus": os.cpu_count(), "memory_gib": round(mem / 2**20, 1),
            "kernel": platform.release(), "python": platform.python_version(), "load_avg_at_start": os.getloadavg()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="skillgate-bench-grpo-"))
    os.environ["SKILLGATE_HOME"] = str(home)
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(Path(tempfile.gettempdir()) / f"skillgate-torch-extensions-{os.getuid()}"))
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")

    from skillgate_core.benchgen import BenchBuildConfig, build_suite
    from skillgate_core.policy.tiny_model import TinyModelConfig, build_tiny_model
    from skillgate_core.rl.data_prep import RLDataPrepConfig, prepare_rl_data
    from skillgate_core.rl.grpo_config import GRPOConfig
    from skillgate_core.rl.grpo_stage import train_grpo

    result: dict[str, object] = {"command": "python benchmarks/grpo_step_cpu.py" + (
        f" --steps {args.steps}" if args.steps != 3 else ""), "git": _git(), "machine": _machine(), "runs": {}}
    model = build_tiny_model(TinyModelConfig(vocab_size=2048, hidden_size=64, num_hidden_layers=2), {},
                             home / "model").outputs["base_model"]
    bench = home / "bench"
    build_suite(BenchBuildConfig(seed=5, train_skills_per_cell=1, train_tasks_per_skill=1, eval_tasks=4,
                                 slate_tasks=4), bench)
    prepare_rl_data(RLDataPrepConfig(), {"bench": bench, "sft_model": model}, home / "rl")
    inputs = {"sft_model": model, "rl_data": home / "rl", "bench": bench}
    common = dict(steps=args.steps, prompts_per_step=2, group_size=4, num_workers=2, max_turns=4, max_new_tokens=64,
                  backend="bwrap", sandbox_workers=2, checkpoint_every=args.steps, learning_rate=1e-5)
    for name, extra in (("teacher", dict(rollout_source="teacher", teacher_misleading_rate=0.5,
                                         teacher_no_read_rate=0.0)),
                        ("policy", dict(rollout_source="policy", max_rejected_groups=2))):
        out = home / f"out-{name}"
        out.mkdir()
        started = time.perf_counter()
        stage = train_grpo(GRPOConfig(experiment_id=f"bench-{name}", **common, **extra), inputs, out)
        wall = time.perf_counter() - started
        rows = [json.loads(line) for line in Path(stage.metrics["metrics_file"]).read_text().splitlines()]
        keys = ("step", "trained", "episodes_played", "episodes", "groups", "time_generate_s", "time_env_s", "time_train_s",
                "time_sync_s", "time_step_s", "rollout_tokens_per_s", "train_tokens_per_s", "workers_gave_up")
        result["runs"][name] = {"stage_wall_s": round(wall, 1), "steps": [{k: r.get(k) for k in keys} for r in rows]}
        print(name, json.dumps(result["runs"][name], indent=1))
    result["load_avg_at_end"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

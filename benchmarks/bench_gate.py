"""Benchmark: build the full default suite, then run the validity gate on EVERY task.

    .venv/bin/python benchmarks/bench_gate.py                      # writes benchmarks/results/bench_gate.json
    .venv/bin/python benchmarks/bench_gate.py --bench DIR          # gate an existing suite instead
    .venv/bin/python benchmarks/bench_gate.py --seed 3 --jobs 4 --out /tmp/gate.json

Gate = per task, the no-op agent must score 0 and the reference solution 1, twice each, in fresh
bubblewrap sandboxes through the task's real verifier (skillgate_core.envs.validity_gate). The JSON
holds the command, git commit + dirty flag, machine, the suite digest and counts, the build time,
the gate time, the summary per family and split, and every task that was not valid.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from skillgate_core.benchgen import BenchBuildConfig, gate_suite, suite_digest, suite_stats  # noqa: E402
from skillgate_core.benchgen.stage import build_bench  # noqa: E402
from warehouse.provenance import git_state  # noqa: E402

DEFAULT_OUT = REPO / "benchmarks" / "results" / "bench_gate.json"


def machine() -> dict:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"hostname": platform.node(), "cpus": os.cpu_count(), "memory_gib": round(mem, 1),
            "kernel": platform.release(), "python": platform.python_version(),
            "load_avg_1m": round(os.getloadavg()[0], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, help="an existing suite folder (default: build the default suite)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2, help="tasks gated at once")
    parser.add_argument("--workers", type=int, default=2, help="processes writing the suite")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    git = git_state(REPO)
    result: dict = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "git_commit": git.sha,
                    "git_dirty": git.dirty, "machine": machine()}
    with tempfile.TemporaryDirectory(prefix="skillgate-bench-gate-") as scratch:
        bench = args.bench
        if bench is None:
            config = BenchBuildConfig(seed=args.seed)
            started = time.perf_counter()
            done = [0]

            def progress(n: int, total: int) -> None:
                if n * 10 // total != done[0]:
                    done[0] = n * 10 // total
                    print(f"  wrote {n}/{total} packages ({time.perf_counter() - started:.0f} s)", flush=True)

            bench = build_bench(config, {}, Path(scratch), progress=progress, workers=args.workers).outputs["bench"]
            result["build_seconds"] = round(time.perf_counter() - started, 1)
            result["build_workers"] = args.workers
        started = time.perf_counter()
        gate = gate_suite(bench, "all", backend="bwrap", jobs=args.jobs)
        result["gate_seconds"] = round(time.perf_counter() - started, 1)
        stats = suite_stats(bench)
        result.update(
            suite_digest=suite_digest(bench), seed=stats["seed"], tasks=stats["tasks"],
            tasks_by_split=stats["tasks_by_split"], tasks_by_family=stats["tasks_by_family"],
            skills=stats["skills"], gate_mode=gate["mode"], gate_repeats=gate["repeats"], gate_jobs=args.jobs,
            summary=gate["summary"], not_valid=[t for t in gate["tasks"] if not t["valid"]],
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    overall = gate["summary"]["overall"]
    print(f"{overall['valid']}/{overall['gated']} valid, {overall['invalid']} invalid, {overall['error']} errors; "
          f"gate {result['gate_seconds']} s -> {args.out}")


if __name__ == "__main__":
    main()

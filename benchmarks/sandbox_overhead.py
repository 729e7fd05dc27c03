"""Benchmark: per-command overhead of each sandbox backend, and many sandboxes at once.

    .venv/bin/python benchmarks/sandbox_overhead.py          # writes benchmarks/results/sandbox_overhead.json
    .venv/bin/python benchmarks/sandbox_overhead.py --backends bwrap --commands 50 --concurrent 4 --out /tmp/x.json

For each backend of envs/backend_registry.py (one that cannot run here is recorded as skipped, with why):

  exec_true       median / p95 / min / max of `box.exec("true")` wall time in one warm sandbox
                  (`--commands` runs after 5 warm-up runs);
  host_bash_true  the same command as a plain host subprocess, interleaved run by run;
  overhead        exec_true - host_bash_true, pair by pair: what the sandbox adds.
                  Targets (median overhead): bwrap <= 20 ms, docker <= 150 ms.
  start / stop    median of starting (task image cached) and stopping a sandbox.
  concurrent      `--concurrent` sandboxes (default 16) at the same time, each a full episode of
                  the hello-file task: start, `--episode-commands` commands (write, read back,
                  list, compute), the oracle's solution, the verifier, stop. A failure is any
                  exception, unexpected output or exit code, or a score other than 1. Target: none.

The JSON holds the command, git commit + dirty flag, the machine (CPUs, memory, kernel, load), the
tool versions, and every number above in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from skillgate_core.envs import (  # noqa: E402
    load_task_package,
    oracle_agent,
    start_sandbox,
    verify,
)
from skillgate_core.envs.backend_registry import USABLE_BACKENDS  # noqa: E402
from skillgate_core.envs.backends import available_backends  # noqa: E402

TASK = ROOT / "tests" / "envs" / "tasks" / "good" / "hello-file"
TARGET_MS = {"bwrap": 20.0, "docker": 150.0}
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "sandbox_overhead.json"


def _stats(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in seconds)
    return {"median_ms": round(statistics.median(ms), 2), "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 2),
            "min_ms": round(ms[0], 2), "max_ms": round(ms[-1], 2), "n": len(ms)}


def exec_overhead(backend: str, n: int) -> dict[str, Any]:
    task = load_task_package(TASK)
    starts, stops, runs = [], [], []
    for _ in range(3):
        t = time.perf_counter()
        box = start_sandbox(task, backend=backend)  # type: ignore[arg-type]
        starts.append(time.perf_counter() - t)
        t = time.perf_counter()
        box.stop()
        stops.append(time.perf_counter() - t)
    host = []
    with start_sandbox(task, backend=backend) as box:  # type: ignore[arg-type]
        for _ in range(5):
            box.exec("true")
        # Interleaved with the same command run straight on the host, so machine load (shared
        # with other work) weighs on both: overhead = sandboxed - host, pair by pair.
        for _ in range(n):
            t = time.perf_counter()
            r = box.exec("true")
            runs.append(time.perf_counter() - t)
            if r.exit_code != 0:
                raise RuntimeError(f"{backend}: `true` exited {r.exit_code}: {r.stderr}")
            t = time.perf_counter()
            subprocess.run(["/bin/bash", "-c", "true"], stdin=subprocess.DEVNULL, capture_output=True)
            host.append(time.perf_counter() - t)
    overhead = [max(0.0, a - b) for a, b in zip(runs, host, strict=True)]
    result = {"exec_true": _stats(runs), "host_bash_true": _stats(host), "overhead": _stats(overhead),
              "start": _stats(starts), "stop": _stats(stops), "target_median_ms": TARGET_MS[backend]}
    result["meets_target"] = result["overhead"]["median_ms"] <= TARGET_MS[backend]
    return result


def _episode(backend: str, index: int, commands: int, durations: list[float], lock: threading.Lock) -> str:
    """One full episode; returns "" on success, else what went wrong."""
    task = load_task_package(TASK)
    try:
        with start_sandbox(task, backend=backend) as box:  # type: ignore[arg-type]
            for k in range(commands):
                kind = k % 4
                t = time.perf_counter()
                if kind == 0:
                    box.write_file(f"/app/notes/{k}.txt", f"episode {index} step {k}\n")
                    ok = True
                elif kind == 1:
                    ok = box.read_file(f"/app/notes/{k - 1}.txt") == f"episode {index} step {k - 1}\n".encode()
                elif kind == 2:
                    r = box.exec("ls /app/notes | wc -l")
                    ok = r.exit_code == 0 and int(r.stdout) == k // 4 + 1
                else:
                    r = box.exec(f"python3 -c 'print(sum(range({index * 1000 + k})))'")
                    ok = r.exit_code == 0 and int(r.stdout) == sum(range(index * 1000 + k))
                with lock:
                    durations.append(time.perf_counter() - t)
                if not ok:
                    return f"episode {index}: step {k} (kind {kind}) gave a wrong result"
            status, _ = oracle_agent(box, task, time.monotonic() + 60)
            grade = verify(box, task, status)
            if grade.score != 1.0:
                return f"episode {index}: score {grade.score} ({grade.status.value}: {grade.detail})"
    except Exception as exc:
        return f"episode {index}: {type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"
    return ""


def concurrent(backend: str, n: int, commands: int) -> dict[str, Any]:
    durations: list[float] = []
    lock = threading.Lock()
    t = time.perf_counter()
    with ThreadPoolExecutor(max_workers=n) as pool:
        errors = [e for e in pool.map(lambda i: _episode(backend, i, commands, durations, lock), range(n)) if e]
    wall = time.perf_counter() - t
    return {"sandboxes": n, "commands_per_episode": commands, "failures": len(errors), "errors": errors[:5],
            "wall_s": round(wall, 2), "command_under_load": _stats(durations) if durations else {},
            "meets_target": not errors}


def _git() -> dict[str, Any]:
    def run(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip()

    return {"commit": run("rev-parse", "HEAD"), "dirty": bool(run("status", "--porcelain"))}


def _machine() -> dict[str, Any]:
    model = ""
    try:
        model = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"hostname": platform.node(), "cpus": os.cpu_count(), "cpu_model": model, "memory_gib": round(mem_gib, 1),
            "kernel": platform.release(), "python": platform.python_version(),
            "load_avg_at_start": [round(x, 2) for x in os.getloadavg()], "euid": os.geteuid()}


def _versions() -> dict[str, str]:
    out = {}
    if shutil.which("bwrap"):
        out["bwrap"] = subprocess.run(["bwrap", "--version"], capture_output=True, text=True).stdout.strip()
    try:
        from skillgate_core.envs.docker_images import docker_client

        out["docker_server"] = docker_client().version().get("Version", "?")
    except Exception:
        pass
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backends", default=",".join(USABLE_BACKENDS))
    p.add_argument("--commands", type=int, default=200, help="timed exec('true') runs per backend")
    p.add_argument("--concurrent", type=int, default=16, help="sandboxes at the same time")
    p.add_argument("--episode-commands", type=int, default=24, help="commands per concurrent episode")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = p.parse_args()

    report: dict[str, Any] = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "git": _git(),
                              "machine": _machine(), "versions": _versions(), "task": str(TASK.relative_to(ROOT)),
                              "backends": {}}
    reasons = available_backends()
    for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
        if reasons.get(backend):
            report["backends"][backend] = {"skipped": reasons[backend]}
            print(f"{backend}: skipped ({reasons[backend]})", flush=True)
            continue
        print(f"{backend}: exec overhead ({args.commands} runs)...", flush=True)
        entry = exec_overhead(backend, args.commands)
        print(f"{backend}: exec median {entry['exec_true']['median_ms']} ms, overhead median "
              f"{entry['overhead']['median_ms']} ms (target {TARGET_MS.get(backend, 'none set')}); "
              f"{args.concurrent} concurrent episodes...", flush=True)
        entry["concurrent"] = concurrent(backend, args.concurrent, args.episode_commands)
        print(f"{backend}: concurrent: {entry['concurrent']['failures']} failures in "
              f"{entry['concurrent']['wall_s']} s", flush=True)
        report["backends"][backend] = entry
    report["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    ran = [e for e in report["backends"].values() if "skipped" not in e]
    return 0 if ran and all(e["concurrent"]["meets_target"] for e in ran) else 1


if __name__ == "__main__":
    sys.exit(main())

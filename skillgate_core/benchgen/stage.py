"""Stage `bench-build`: write the bundled suite, audit it for shortcuts, and gate it when the config asks.

    build_bench(BenchBuildConfig(seed=0), {}, Path("out"))   # -> out/bench, metrics with the digest

Every build runs the shortcut audit (benchgen.audit, ~10 s on the default suite) and writes its report
as bench/audit.json, outside the suite digest; a failing audit fails the build (AuditError naming each
failing predictor and split) before the validity gate spends its sandboxes.

Run it from the CLI (`skillgate bench build`), from a recipe (`skillgate run demo --execute`) or
through Prefect (the entry flow's `bench-build` sub-flow wraps this function in tasks/stage.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from skillgate_core.base.stage_output import StageOutput
from skillgate_core.benchgen.audit import audit_bench, check_audit, write_audit
from skillgate_core.benchgen.gate import gate_suite
from skillgate_core.benchgen.suite import build_suite
from skillgate_core.benchgen.suite_config import BenchBuildConfig

__all__ = ["BenchBuildConfig", "build_bench", "default_workers"]


def default_workers(n_tasks: int) -> int:
    """Worker processes for writing `n_tasks` packages: one for small suites (spawning costs ~2 s)."""
    return 1 if n_tasks < 200 else max(1, min(4, os.cpu_count() or 1))


def expected_tasks(config: BenchBuildConfig) -> int:
    cells = len(config.families) * len(config.domains)
    return cells * config.train_skills_per_cell * config.train_tasks_per_skill + config.eval_tasks + config.slate_tasks


def build_bench(config: BenchBuildConfig, inputs: Mapping[str, Path], out_dir: Path,
                progress: Callable[[int, int], None] | None = None, workers: int | None = None,
                gate_progress: Callable[[int, int], None] | None = None) -> StageOutput:
    """Write the suite to out_dir/bench and audit it; metrics: digest, counts, audit and gate summaries.
    `progress` hears of each task package written, `gate_progress` of each task gated (both: done, total).
    AuditError when the suite fails its shortcut audit (bench/audit.json says why)."""
    bench = out_dir / "bench"
    summary = build_suite(config, bench, workers=workers or default_workers(expected_tasks(config)),
                          progress=progress)
    metrics: dict = {"digest": summary.digest, "tasks": summary.tasks, "skills": summary.skills,
                     "counts": summary.counts}
    audit = audit_bench(bench, config.audit_margin, config.audit_alpha, digest=summary.digest)
    write_audit(bench, audit)
    check_audit(audit)
    metrics["audit"] = {"passed": audit["passed"], "max_excess": max(
        r["excess"] for p in audit["predictors"].values() for r in p["splits"].values())}
    if config.gate != "none":
        gate = gate_suite(bench, config.gate, config.gate_sample_per_family, backend=config.gate_backend,
                          progress=gate_progress)
        metrics["gate"] = gate["summary"]["overall"]
    return StageOutput(outputs={"bench": bench}, metrics=metrics)

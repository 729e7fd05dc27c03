"""The validity gate over a suite: every task, a sample, or none (envs.validity_gate does the work).

    results = gate_suite(Path("bench"), mode="sample", per_family=2)   # also writes bench/gate.json

A task is valid when the no-op agent scores 0 and the reference solution scores 1, each twice, in
fresh sandboxes. gate.json holds only verdicts (no timings), so gating the same suite twice writes
the same file; it is left out of the suite digest either way.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from skillgate_core.benchgen.stats import read_task_rows
from skillgate_core.benchgen.suite import GATE_FILE
from skillgate_core.benchgen.suite_config import SPLITS
from skillgate_core.envs.backends import Backend
from skillgate_core.envs.validity_gate import GateReport, Progress, check_tasks

__all__ = ["gate_rows", "gate_suite", "gate_summary", "select_for_gate"]

GateMode = Literal["none", "sample", "all"]


def select_for_gate(rows: list[dict[str, Any]], mode: GateMode, per_family: int, seed: int = 0) -> list[dict[str, Any]]:
    """Every row (all), `per_family` rows per family and split drawn with a fixed seed (sample), or none."""
    if mode == "none":
        return []
    if mode == "all":
        return list(rows)
    picked = []
    for split in SPLITS:
        for family in sorted({r["family"] for r in rows}):
            members = sorted((r for r in rows if r["split"] == split and r["family"] == family),
                             key=lambda r: r["task_id"])
            rng = random.Random(f"gate:{seed}:{split}:{family}")
            picked += rng.sample(members, min(per_family, len(members)))
    return picked


def gate_rows(rows: list[dict[str, Any]], reports: list[GateReport]) -> list[dict[str, Any]]:
    """One JSON row per gated task: verdict and the nop / oracle scores."""
    return [{"task_id": r["task_id"], "split": r["split"], "family": r["family"], "domain": r["domain"],
             "verdict": rep.verdict, "valid": rep.valid, "backend": rep.backend,
             "nop_scores": rep.scores("nop"), "oracle_scores": rep.scores("oracle"), "error": rep.error}
            for r, rep in zip(rows, reports, strict=True)]


def gate_summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts of valid / invalid / error, overall and per family and split."""
    def count(subset: list[dict[str, Any]]) -> dict[str, int]:
        c = Counter("error" if r["error"] else "valid" if r["valid"] else "invalid" for r in subset)
        return {"gated": len(subset), "valid": c["valid"], "invalid": c["invalid"], "error": c["error"]}

    return {
        "overall": count(results),
        "by_family": {f: count([r for r in results if r["family"] == f])
                      for f in sorted({r["family"] for r in results})},
        "by_split": {s: count([r for r in results if r["split"] == s]) for s in SPLITS
                     if any(r["split"] == s for r in results)},
    }


def gate_suite(bench: Path, mode: GateMode, per_family: int = 2, backend: Backend = "bwrap", jobs: int = 2,
               repeats: int = 2, progress: Progress | None = None) -> dict[str, Any]:
    """Gate the chosen tasks of the suite at `bench`; write and return gate.json's content.
    `progress` (tasks gated, tasks chosen) hears of each gated task."""
    rows = read_task_rows(bench)
    chosen = select_for_gate(rows, mode, per_family)
    reports = check_tasks([bench / r["path"] for r in chosen], backend=backend, repeats=repeats,
                          jobs=jobs, progress=progress) if chosen else []
    results = gate_rows(chosen, reports)
    data = {"mode": mode, "repeats": repeats, "summary": gate_summary(results),
            "tasks": sorted(results, key=lambda r: (SPLITS.index(r["split"]), r["task_id"]))}
    (bench / GATE_FILE).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return data

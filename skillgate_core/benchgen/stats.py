"""What a built suite holds: tasks per family / domain / split, skills per split, audit and gate results.

    stats = suite_stats(Path("bench"))
    stats["tasks_by_family"]["procedural"]["train"]      # -> 264
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from skillgate_core.base.safe_paths import check_task_row
from skillgate_core.benchgen.suite import AUDIT_FILE, GATE_FILE, suite_digest
from skillgate_core.benchgen.suite_config import DOMAIN_NAMES, FAMILY_NAMES, SPLITS

__all__ = ["read_task_rows", "suite_stats"]


def read_task_rows(bench: Path) -> list[dict[str, Any]]:
    """tasks.jsonl of a suite; FileNotFoundError names the file when `bench` is not a suite."""
    path = bench / "tasks.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing (expected a suite written by `skillgate bench build`)")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for n, row in enumerate(rows, 1):
        check_task_row(row, source=f"{path} line {n}")  # task_id and path name folders
    return rows


def _table(rows: list[dict[str, Any]], key: str, order: tuple[str, ...]) -> dict[str, dict[str, int]]:
    counts = Counter((r[key], r["split"]) for r in rows)
    keys = sorted({r[key] for r in rows}, key=lambda k: (order.index(k) if k in order else len(order), k))
    return {k: {s: counts[(k, s)] for s in SPLITS} for k in keys}


def suite_stats(bench: Path, with_digest: bool = False) -> dict[str, Any]:
    """Counts of the suite at `bench` (and its digest when asked: it reads every file)."""
    rows = read_task_rows(bench)
    manifest = json.loads((bench / "suite.json").read_text(encoding="utf-8"))
    oracles = manifest["skills"]["oracle"]
    stats: dict[str, Any] = {
        "seed": manifest["seed"],
        "tasks": len(rows),
        "tasks_by_split": {s: sum(r["split"] == s for r in rows) for s in SPLITS},
        "tasks_by_family": _table(rows, "family", FAMILY_NAMES),
        "tasks_by_domain": _table(rows, "domain", DOMAIN_NAMES),
        "skills": {"oracle_by_split": {s: len(oracles.get(s, [])) for s in SPLITS},
                   "misleading": manifest["skills"]["misleading"], "library": manifest["skills"]["library"],
                   "total": manifest["skills"]["total"]},
        "held_out_disjoint": not (set(oracles.get("train", [])) & (set(oracles.get("eval70_v1", []))
                                                                    | set(oracles.get("slate147", [])))),
        "generation_retries": sum(r["attempt"] for r in rows),
        "description_similarity": manifest["description_similarity"],
        "audit": None,
        "gate": None,
    }
    audit_file = bench / AUDIT_FILE
    if audit_file.is_file():
        audit = json.loads(audit_file.read_text(encoding="utf-8"))
        stats["audit"] = {"passed": audit["passed"], "failures": audit["failures"]}
    gate_file = bench / GATE_FILE
    if gate_file.is_file():
        gate = json.loads(gate_file.read_text(encoding="utf-8"))
        stats["gate"] = {"mode": gate["mode"], **gate["summary"]}
    if with_digest:
        stats["digest"] = suite_digest(bench)
    return stats

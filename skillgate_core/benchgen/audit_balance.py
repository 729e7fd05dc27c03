"""How evenly a built suite's oracles spread over their family's six suffixes, per split (the audit's draw check).

    balance = suffix_balance(tasks)          # tasks: audit_predictors.AuditTask, every split
    balance["train"]["planning"]["skills"]   # -> {"runbook": 4, "sequencer": 4, ...}; "spread": max - min

The bench deals each oracle's suffix (balanced_draws): over a (family, split)'s skills the six counts
differ by at most one, and so do a (family, domain) cell's where the cell holds six skills or more. A
predictor fitted on one part of the training split and scored on another (audit.py) cannot see a skew
that is only noise of independent draws, yet a policy trained on the whole split learns it (the old
bench: `-steps` named 33% of the training planning oracles). So the audit checks the counts too.

Task-level counts are reported beside them: every training skill has the same number of tasks, so
they keep the balance; eval70_v1 and slate147 deal their tasks round-robin over the held-out skills
(suite.plan_tasks), so a skill dealt one task more weighs its suffix by one task more, and with one
held-out skill per cell a family's four skills use four of its six suffixes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from skillgate_core.benchgen.audit_predictors import AuditTask, cluster_indices

__all__ = ["CELL_MIN_SKILLS", "balance_failures", "suffix_balance"]

CELL_MIN_SKILLS = 6
"""A (family, domain) cell is held to the one-apart rule from this many skills of a split (one per suffix)."""


def _suffix(task: AuditTask, name: str) -> str:
    parts = task.oracle.split("-", 2)
    return name[len(parts[0]) + len(parts[1]) + 2:] if len(parts) == 3 else ""


def _counts(suffixes: set[str], oracles: Iterable[str]) -> dict[str, int]:
    seen = Counter(oracles)
    return {s: seen[s] for s in sorted(suffixes)}


def _spread(counts: dict[str, int]) -> int:
    return max(counts.values()) - min(counts.values()) if counts else 0


def suffix_balance(tasks: Iterable[AuditTask]) -> dict[str, Any]:
    """{split: {family: {skills, tasks, spread, cells}}}: oracle-suffix counts over the family's suffixes
    (every suffix its clusters show, zeros included), per skill and per task; `cells` holds the
    per-domain skill counts and spread of each cell with at least CELL_MIN_SKILLS skills."""
    groups: dict[tuple[str, str], list[AuditTask]] = {}
    for task in tasks:
        groups.setdefault((task.split, task.family), []).append(task)
    out: dict[str, Any] = {}
    for (split, family), members in groups.items():
        suffixes = {_suffix(t, t.names[i]) for t in members for i in cluster_indices(t)}
        skills = {t.oracle: t for t in members}  # a skill's tasks share its oracle
        cells: dict[str, Any] = {}
        for domain in sorted({t.domain for t in skills.values()}):
            cell = [_suffix(t, name) for name, t in skills.items() if t.domain == domain]
            if len(cell) >= CELL_MIN_SKILLS:
                counts = _counts(suffixes, cell)
                cells[domain] = {"skills": counts, "spread": _spread(counts)}
        by_skill = _counts(suffixes, (_suffix(t, name) for name, t in skills.items()))
        out.setdefault(split, {})[family] = {
            "skills": by_skill, "spread": _spread(by_skill),
            "tasks": _counts(suffixes, (_suffix(t, t.oracle) for t in members)), "cells": cells}
    return out


def balance_failures(balance: dict[str, Any]) -> list[str]:
    """One line per (split, family) or cell whose skill-level counts differ by more than one."""
    lines = []
    for split, families in balance.items():
        for family, b in sorted(families.items()):
            if b["spread"] > 1:
                lines.append(f"oracle suffixes of {family} on {split}: skill counts {b['skills']} differ by "
                             f"{b['spread']} (balanced draws differ by at most 1)")
            for domain, cell in b["cells"].items():
                if cell["spread"] > 1:
                    lines.append(f"oracle suffixes of {family}/{domain} on {split}: skill counts {cell['skills']} "
                                 f"differ by {cell['spread']} (balanced draws differ by at most 1)")
    return lines

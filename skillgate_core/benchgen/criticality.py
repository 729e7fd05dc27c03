"""Skill-criticality: run the scripted agents on a sample of tasks per family, in real sandboxes.

    report = measure_criticality(Path("bench"), per_family=10)
    report.table["procedural"]["oracle"]            # success rate of the oracle follower
    criticality_problems(report)                    # [] when every threshold holds

Per task: the oracle follower, one follower per misleading strategy, and the no-skill agent, each
in a fresh sandbox with the task's 16 slate skills mounted at /skills, graded by the task's own
verifier. Thresholds (the issue's definition of skill-critical): oracle >= 0.95; every lookalike and
no skill <= 0.10. Aborted episodes (infrastructure) are counted apart as errors and as failures.
"""

from __future__ import annotations

import random
import tempfile
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillgate_core.benchgen.agents import follower_agent, no_skill_agent
from skillgate_core.benchgen.families import STRATEGIES
from skillgate_core.benchgen.stats import read_task_rows
from skillgate_core.benchgen.suite_config import FAMILY_NAMES
from skillgate_core.envs.backends import Backend, reap_orphans
from skillgate_core.envs.scripted_episode import run_scripted_episode
from skillgate_core.envs.task_package import load_task_package
from skillgate_core.formats.slate_manifest import MANIFEST_FILE
from skillgate_core.skills import read_slate, slate_skills_dir

__all__ = ["AGENTS", "ORACLE_MIN", "OTHERS_MAX", "CriticalityReport", "Episode", "criticality_markdown",
           "criticality_problems", "measure_criticality", "sample_tasks"]

AGENTS: tuple[str, ...] = ("oracle", *STRATEGIES, "no-skill")
"""Columns of the table: the oracle follower, one follower per strategy, the no-skill agent."""
ORACLE_MIN = 0.95
"""The oracle follower must succeed at least this often, per family."""
OTHERS_MAX = 0.10
"""Lookalike followers and the no-skill agent must succeed at most this often, per family."""


@dataclass(frozen=True)
class Episode:
    """One graded scripted episode."""

    task_id: str
    """Task."""
    family: str
    """Its family."""
    agent: str
    """oracle, a strategy name, or no-skill."""
    skill: str
    """The skill followed ("" for no-skill)."""
    score: float
    """Verifier score."""
    status: str
    """completed / truncated / aborted."""
    seconds: float
    """Sandbox start to stop."""


@dataclass(frozen=True)
class CriticalityReport:
    """Every episode and the success-rate table."""

    episodes: tuple[Episode, ...]
    """All episodes, in task then agent order."""
    table: dict[str, dict[str, float]] = field(default_factory=dict)
    """family -> agent -> success rate (score >= 1)."""
    tasks: dict[str, int] = field(default_factory=dict)
    """family -> tasks sampled."""
    errors: int = 0
    """Aborted episodes."""

    def to_json(self) -> dict[str, Any]:
        return {"table": self.table, "tasks": self.tasks, "errors": self.errors,
                "thresholds": {"oracle_min": ORACLE_MIN, "others_max": OTHERS_MAX},
                "episodes": [e.__dict__ for e in self.episodes]}


def sample_tasks(bench: Path, per_family: int, seed: int = 0) -> list[dict[str, Any]]:
    """`per_family` task rows per family from tasks.jsonl, a seeded draw over all splits."""
    rows = read_task_rows(bench)
    picked: list[dict[str, Any]] = []
    for family in FAMILY_NAMES:
        members = sorted((r for r in rows if r["family"] == family), key=lambda r: r["task_id"])
        picked += random.Random(f"criticality:{seed}:{family}").sample(members, min(per_family, len(members)))
    return picked


def _slate_library(bench: Path, task_dir: Path, into: Path) -> Path:
    """A folder holding only the task's 16 slate skills (what /skills shows in an episode)."""
    slate = read_slate(task_dir / MANIFEST_FILE)
    return slate_skills_dir(bench / "skills", slate.names, into)


def measure_criticality(bench: Path, per_family: int = 10, seed: int = 0, backend: Backend = "bwrap",
                        jobs: int = 2) -> CriticalityReport:
    """Run every agent on `per_family` sampled tasks per family and tabulate success rates."""
    reap_orphans()
    rows = sample_tasks(bench, per_family, seed)
    with tempfile.TemporaryDirectory(prefix="skillgate-criticality-") as scratch:
        plans = []
        for row in rows:
            task_dir = bench / row["path"]
            library = _slate_library(bench, task_dir, Path(scratch) / row["task_id"])
            task = load_task_package(task_dir, within=bench)
            followed = {"oracle": row["oracle"], **dict(zip(STRATEGIES, row["misleading"], strict=True))}
            for agent in AGENTS:
                plans.append((row, task, library, agent, followed.get(agent, "")))

        def run(plan) -> Episode:
            row, task, library, agent, skill = plan
            runner = follower_agent(skill) if skill else no_skill_agent(row["family"])
            outcome = run_scripted_episode(task, runner, backend=backend, skills_dir=library)
            return Episode(row["task_id"], row["family"], agent, skill, outcome.score, outcome.status.value,
                           round(outcome.duration_s, 3))

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            episodes = tuple(pool.map(run, plans))
    wins: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for e in episodes:
        wins[e.family][e.agent].append(1.0 if e.score >= 1 and e.status != "aborted" else 0.0)
    table = {fam: {agent: round(sum(v) / len(v), 4) for agent, v in agents.items()} for fam, agents in wins.items()}
    tasks = {fam: len({e.task_id for e in episodes if e.family == fam}) for fam in table}
    return CriticalityReport(episodes, table, tasks, sum(e.status == "aborted" for e in episodes))


def criticality_problems(report: CriticalityReport) -> list[str]:
    """Every family/agent cell that breaks a threshold (empty when the suite is skill-critical)."""
    problems = []
    for family, rates in sorted(report.table.items()):
        if rates.get("oracle", 0.0) < ORACLE_MIN:
            problems.append(f"{family}: oracle follower succeeds {rates.get('oracle', 0.0):.2f} < {ORACLE_MIN}")
        for agent in AGENTS[1:]:
            if rates.get(agent, 0.0) > OTHERS_MAX:
                problems.append(f"{family}: {agent} succeeds {rates[agent]:.2f} > {OTHERS_MAX}")
    return problems


def criticality_markdown(report: CriticalityReport) -> str:
    """The table as Markdown: one row per family, success rate per agent."""
    head = ["family", "tasks", *AGENTS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for family in FAMILY_NAMES:
        if family in report.table:
            rates = report.table[family]
            lines.append(f"| {family} | {report.tasks[family]} | "
                         + " | ".join(f"{rates.get(a, 0.0):.2f}" for a in AGENTS) + " |")
    return "\n".join(lines) + "\n"

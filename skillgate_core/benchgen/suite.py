"""Build the bundled suite: skills, task packages with slates, split lists and a digest.

    summary = build_suite(BenchBuildConfig(seed=0), Path("bench"), workers=2, progress=print)
    summary.digest == suite_digest(Path("bench"))     # the same seed gives the same digest

Layout:
    bench/suite.json            seed, config, counts per split and family, skills per split
    bench/tasks.jsonl           one row per task (id, split, family, domain, oracle, misleading, path)
    bench/skills/NAME/          every skill: oracles, lookalikes and the general library (mount at /skills)
    bench/tasks/SPLIT/TASK_ID/  Harbor-layout packages (package.py)
    bench/gate.json             validity-gate results when a gate ran (not part of the digest)
    bench/audit.json            the shortcut audit (audit.py; written by the bench-build stage, not part of the digest)

Slates come from skillgate_core.skills.build_slate: training slates retrieve over held-in skills
and the general library only (held-out skills are never seen in training); evaluation slates over
the whole library.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import shutil
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from skillgate_core.base.config import canonical_json, config_to_dict
from skillgate_core.base.digests import tree_manifest
from skillgate_core.benchgen.families import FAMILIES, STRATEGIES, STRATEGY_LABELS
from skillgate_core.benchgen.package import write_package
from skillgate_core.benchgen.similarity import MAX_MISLEADING_SIMILARITY
from skillgate_core.benchgen.skill_files import write_skill
from skillgate_core.benchgen.skill_plan import (
    GenerationError,
    SkillEntry,
    SkillSet,
    library_skills,
    plan_skills,
)
from skillgate_core.benchgen.suite_config import SPLITS, BenchBuildConfig
from skillgate_core.benchgen.task_gen import generate_task
from skillgate_core.skills import IRRELEVANT_OUTSIDE_TOP, SkillRetriever, Split, build_retriever, build_slate

__all__ = ["AUDIT_FILE", "GATE_FILE", "SUITE_FORMAT", "SuiteSummary", "build_suite", "plan_tasks", "suite_digest"]

SUITE_FORMAT = "skillgate-bench/1"
GATE_FILE = "gate.json"
AUDIT_FILE = "audit.json"
UNDIGESTED = (GATE_FILE, AUDIT_FILE)
"""Reports about the suite written into its folder, left out of its digest (verdicts on the suite, not part of it)."""
SPLIT_TAGS = {"train": "tr", "eval70_v1": "ev", "slate147": "sl"}
SLATE_BENCH = {"train": "skillgate-train", "eval70_v1": "eval70_v1", "slate147": "slate147"}
"""The BENCH part of a slate's shuffle seed, per split."""


@dataclass(frozen=True)
class SuiteSummary:
    """What build_suite wrote."""

    path: Path
    """The suite folder."""
    digest: str
    """suite_digest(path)."""
    tasks: int
    """Task packages written."""
    counts: dict[str, dict[str, int]]
    """split -> family -> tasks."""
    skills: int
    """Skill folders written (oracles, lookalikes, library)."""


def suite_digest(bench: Path) -> str:
    """sha256 of the canonical JSON of the suite's file manifest, gate and audit reports left out."""
    files = {rel: digest for rel, digest in tree_manifest(bench).items() if rel not in UNDIGESTED}
    return hashlib.sha256(canonical_json(files).encode()).hexdigest()


def plan_tasks(config: BenchBuildConfig, sets: list[SkillSet]) -> list[tuple[str, int]]:
    """(task id, index of its skill set): train tasks per held-in skill; eval tasks dealt round-robin
    over the held-out skills ordered domain-major, so families and domains stay balanced."""
    jobs: list[tuple[str, int]] = []
    wanted = {"train": None, "eval70_v1": config.eval_tasks, "slate147": config.slate_tasks}
    for split in SPLITS:
        members = [i for i, s in enumerate(sets) if s.split == split]
        if split == "train":
            deal = [i for i in members for _ in range(config.train_tasks_per_skill)]
        else:
            members.sort(key=lambda i: (config.domains.index(sets[i].domain),
                                        config.families.index(sets[i].family), sets[i].oracle.name))
            deal = [members[k % len(members)] for k in range(wanted[split] or 0)] if members else []
        seen: Counter = Counter()
        for i in deal:
            s = sets[i]
            seen[(s.family, s.domain)] += 1
            jobs.append((f"{s.family}-{s.domain}-{SPLIT_TAGS[split]}{seen[(s.family, s.domain)]:04d}", i))
    return jobs


# ---------------------------------------------------------------- per-process task writing

_STATE: dict[str, Any] = {}


def _init_worker(config: BenchBuildConfig, bench: str, sets: list[SkillSet]) -> None:
    """Hold the planned skills and build both retrievers in this process."""
    _STATE.update(config=config, bench=Path(bench), sets=sets, retrievers=_retrievers(sets))


def _retrievers(sets: list[SkillSet]) -> dict[str, SkillRetriever]:
    library = library_skills()

    def frame(entries: list[SkillEntry]) -> pl.DataFrame:
        return pl.DataFrame({"name": [e.name for e in entries], "description": [e.description for e in entries]})

    held_in = [e for s in sets if s.split == "train" for e in (s.oracle, *s.lookalikes)]
    everything = [e for s in sets for e in (s.oracle, *s.lookalikes)]
    return {"train": build_retriever(frame(held_in + library)), "eval": build_retriever(frame(everything + library))}


def _write_task(job: tuple[str, int]) -> dict[str, Any]:
    task_id, index = job
    config: BenchBuildConfig = _STATE["config"]
    skills: SkillSet = _STATE["sets"][index]
    plan = generate_task(config.seed, skills, task_id, config.max_attempts)
    kind: Split = "train" if skills.split == "train" else "eval"
    slate = build_slate(task_id=task_id, bench=SLATE_BENCH[skills.split], split=kind,
                        instruction=plan.instruction, oracle=plan.oracle, misleading=plan.misleading,
                        retriever=_STATE["retrievers"][kind])
    folder = write_package(_STATE["bench"] / "tasks" / skills.split, plan, FAMILIES[skills.family].structure, slate)
    return {
        "task_id": task_id, "split": skills.split, "family": skills.family, "domain": skills.domain,
        "oracle": plan.oracle, "misleading": list(plan.misleading), "attempt": plan.attempt,
        "path": folder.relative_to(_STATE["bench"]).as_posix(),
        "input_files": len(plan.files), "input_bytes": sum(len(t.encode()) for t in plan.files.values()),
    }


# ---------------------------------------------------------------- the suite


def _check_library_size(sets: list[SkillSet]) -> None:
    """Training slates draw 5 relevant skills plus 5 irrelevant ones from outside the BM25 top-50."""
    held_in = 6 * sum(s.split == "train" for s in sets) + len(library_skills())
    needed = 6 + IRRELEVANT_OUTSIDE_TOP + 5
    if held_in < needed:
        raise GenerationError(
            f"the training library would hold {held_in} skills, slates need at least {needed} (oracle + 5 "
            f"lookalikes + the top {IRRELEVANT_OUTSIDE_TOP} + 5 irrelevant): raise train_skills_per_cell or "
            "add families / domains")


def build_suite(config: BenchBuildConfig, bench: Path, workers: int = 1,
                progress: Callable[[int, int], None] | None = None) -> SuiteSummary:
    """Write the suite into `bench` (replaced if it exists) and return its summary."""
    sets = plan_skills(config)
    _check_library_size(sets)
    if bench.exists():
        shutil.rmtree(bench)
    (bench / "skills").mkdir(parents=True)
    entries = [e for s in sets for e in (s.oracle, *s.lookalikes)] + library_skills()
    for entry in entries:
        write_skill(bench / "skills", entry.name, entry.description, entry.body, dict(entry.scripts))
    jobs = plan_tasks(config, sets)
    rows: list[dict[str, Any]] = []
    if workers <= 1:
        _init_worker(config, str(bench), sets)
        for n, job in enumerate(jobs):
            rows.append(_write_task(job))
            if progress:
                progress(n + 1, len(jobs))
    else:
        # spawn, not fork: the caller may be a threaded Prefect worker, and forking threads deadlocks.
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker,
                                 initargs=(config, str(bench), sets)) as pool:
            for n, row in enumerate(pool.map(_write_task, jobs, chunksize=8)):
                rows.append(row)
                if progress:
                    progress(n + 1, len(jobs))
    rows.sort(key=lambda r: (SPLITS.index(r["split"]), r["task_id"]))
    (bench / "tasks.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows), encoding="utf-8")
    counts = {split: dict(sorted(Counter(r["family"] for r in rows if r["split"] == split).items()))
              for split in SPLITS}
    sims = [sim for s in sets for sim in s.similarities]
    manifest = {
        "format": SUITE_FORMAT,
        "seed": config.seed,
        "config": config_to_dict(config),
        "tasks": len(rows),
        "counts": counts,
        "skills": {
            "oracle": {split: [s.oracle.name for s in sets if s.split == split] for split in SPLITS},
            "misleading": sum(len(s.lookalikes) for s in sets),
            "library": len(library_skills()),
            "total": len(entries),
        },
        "held_out": "eval70_v1 and slate147 use skills no training task uses; training slates never list them",
        "strategies": {s: STRATEGY_LABELS[s] for s in STRATEGIES},
        "description_similarity": {
            "measure": "skillgate_core.benchgen.similarity.description_similarity (difflib ratio, max of both "
                       "directions, lower-cased, whitespace collapsed)",
            "max_allowed": MAX_MISLEADING_SIMILARITY,
            "observed_max": round(max(sims), 4) if sims else None,
            "observed_mean": round(sum(sims) / len(sims), 4) if sims else None,
        },
    }
    (bench / "suite.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return SuiteSummary(path=bench, digest=suite_digest(bench), tasks=len(rows), counts=counts, skills=len(entries))

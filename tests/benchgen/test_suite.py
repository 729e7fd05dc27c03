"""The suite: deterministic for a seed, the promised sizes and splits, loadable packages, valid
slates, held-out skills never seen in training, instructions that never name a skill."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from benchgen_small import SMALL

from skillgate_core.base.digests import tree_manifest
from skillgate_core.benchgen import BenchBuildConfig, build_suite, suite_digest, suite_stats
from skillgate_core.benchgen.skill_plan import GenerationError, plan_skills
from skillgate_core.benchgen.suite import plan_tasks
from skillgate_core.envs.task_package import load_task_package
from skillgate_core.skills import read_slate, slate_seed

TINY = BenchBuildConfig(seed=11, families=("procedural", "planning"), domains=("scheduling", "data-formats"),
                        train_skills_per_cell=1, train_tasks_per_skill=2, eval_tasks=2, slate_tasks=2)


# Pinned suite digests: a change to the generators (families, engines, texts, packaging) that is
# meant to keep the suite must keep these; one meant to change it updates them, and the committed
# benchmark results (benchmarks/results/*.json "suite_digest") are then measured again. The balanced
# oracle suffix and template draws (balanced_draws) moved all three from the digests 4ab33e85, 8de7f9d5 and
# fd9c4f93: every task file but skills.json stayed byte-identical, only skill names, descriptions and slates moved.
SMALL_DIGEST = "7b5ddcf312c66e1b3e6c9b866d4d177d2733ada40c42c0b57b52652bc4483d1d"
"""suite_digest of the SMALL suite (seed 7, every family, domain, split and strategy)."""
TINY_DIGEST = "a7eef819973bfbe2967e20cc3c505d6a9d76ac47d237a717528debe53fb8f8e6"
"""suite_digest of the TINY suite (seed 11)."""
DEFAULT_DIGEST = "7df1acd54518b02c265ad082286bcd028e07d7ba560199e6c6aec7a5bff28ef1"
"""suite_digest of the default suite (BenchBuildConfig(seed=0), 1,273 tasks)."""


def rows(bench: Path) -> list[dict]:
    return [json.loads(line) for line in (bench / "tasks.jsonl").read_text().splitlines()]


def test_same_seed_gives_a_byte_identical_suite_and_digest(tmp_path: Path):
    a = build_suite(TINY, tmp_path / "a")
    b = build_suite(TINY, tmp_path / "b")
    assert a.digest == b.digest == suite_digest(tmp_path / "a")
    assert tree_manifest(tmp_path / "a") == tree_manifest(tmp_path / "b")
    other = build_suite(BenchBuildConfig(**{**TINY.__dict__, "seed": 12}), tmp_path / "c")
    assert other.digest != a.digest


def test_built_suites_keep_their_pinned_digests(small_suite: Path, tmp_path: Path):
    assert suite_digest(small_suite) == SMALL_DIGEST
    assert build_suite(TINY, tmp_path / "tiny").digest == TINY_DIGEST


@pytest.mark.slow
def test_the_default_suite_keeps_its_pinned_digest(tmp_path: Path):
    assert build_suite(BenchBuildConfig(seed=0), tmp_path / "bench", workers=2).digest == DEFAULT_DIGEST


def test_a_library_too_small_for_slates_is_refused_before_writing(tmp_path: Path):
    config = BenchBuildConfig(families=("planning",), domains=("scheduling",), train_skills_per_cell=1)
    with pytest.raises(GenerationError, match="train_skills_per_cell"):
        build_suite(config, tmp_path / "x")
    assert not (tmp_path / "x" / "tasks").exists()


def test_default_plan_has_the_promised_sizes():
    config = BenchBuildConfig()
    sets = plan_skills(config)
    jobs = plan_tasks(config, sets)
    by_split = Counter(sets[i].split for _, i in jobs)
    assert by_split == {"train": 1056, "eval70_v1": 70, "slate147": 147}
    assert len({task_id for task_id, _ in jobs}) == len(jobs)
    for split, total in (("eval70_v1", 70), ("slate147", 147)):
        per_family = Counter(sets[i].family for _, i in jobs if sets[i].split == split)
        assert sum(per_family.values()) == total and max(per_family.values()) - min(per_family.values()) <= 1
    train_skills = {sets[i].oracle.name for _, i in jobs if sets[i].split == "train"}
    eval_skills = {sets[i].oracle.name for _, i in jobs if sets[i].split == "eval70_v1"}
    slate_skills = {sets[i].oracle.name for _, i in jobs if sets[i].split == "slate147"}
    assert not train_skills & (eval_skills | slate_skills) and not eval_skills & slate_skills


def test_small_suite_counts_and_stats(small_suite: Path):
    stats = suite_stats(small_suite)
    assert stats["tasks_by_split"] == {"train": 16, "eval70_v1": SMALL.eval_tasks, "slate147": SMALL.slate_tasks}
    assert set(stats["tasks_by_family"]) == {"procedural", "diagnosis", "constraints", "planning"}
    assert set(stats["tasks_by_domain"]) == {"data-formats", "service-config", "scheduling", "deploy-runbooks"}
    assert stats["held_out_disjoint"] is True
    assert stats["skills"]["oracle_by_split"] == {"train": 16, "eval70_v1": 16, "slate147": 16}


def test_every_package_loads_and_its_slates_are_well_formed(small_suite: Path):
    suite = json.loads((small_suite / "suite.json").read_text())
    held_out = set(suite["skills"]["oracle"]["eval70_v1"]) | set(suite["skills"]["oracle"]["slate147"])
    for row in rows(small_suite):
        folder = small_suite / row["path"]
        task = load_task_package(folder)
        assert task.task_id == row["task_id"] and task.bwrap_compatible and task.workdir == "/app"
        # One slate file: skills.json is the ordered slate; the roles are its entries' categories.
        assert not (folder / "slate.json").exists()
        slate = read_slate(folder / "skills.json")
        assert task.slate == slate and len(slate.names) == 16 and slate.task_id == row["task_id"]
        assert slate.oracle == row["oracle"] and set(slate.members("misleading")) == set(row["misleading"])
        kind = "train" if row["split"] == "train" else "eval"
        assert slate.split == kind and slate.seed == slate_seed(slate.bench, row["task_id"], kind)
        for name in slate.names:
            assert (small_suite / "skills" / name / "SKILL.md").is_file()
        if row["split"] == "train":
            # Held-out skills (and their lookalikes) are never advertised to a training task.
            assert not set(slate.names) & held_out
        text = task.instruction.lower()
        for name in slate.names:
            assert name not in text and name.replace("-", " ") not in text
        assert "/skills" not in (folder / "solution" / "solve.sh").read_text()
        assert "/skills" not in (folder / "tests" / "check.py").read_text()


def test_tests_are_not_in_the_workspace(small_suite: Path):
    """The agent's initial files are environment/ only: no answer key, no verifier, no solution."""
    for row in rows(small_suite):
        env = small_suite / row["path"] / "environment"
        assert (env / "Dockerfile").read_text().splitlines() == [
            "FROM skillgate/base:bookworm", "WORKDIR /app", "COPY workspace/ /app/"]
        names = [p.name for p in env.rglob("*") if p.is_file()]
        assert not {"check.py", "solve.sh", "test.sh"} & set(names)

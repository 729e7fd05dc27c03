"""Collect under fresh skill names (CollectConfig.alias_rate): the slate and its skill folders renamed
consistently, the teacher still resolves the same tasks, and the rows say what was renamed."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from skillgate_core.agent.collect import CollectConfig, collect_trajectories
from skillgate_core.envs.bench_index import load_bench_rows
from skillgate_core.formats.slate_manifest import MANIFEST_FILE
from skillgate_core.skills import load_skill, read_slate, slate_skills_dir
from skillgate_core.skills.aliases import alias_names, alias_slate, lookalike_groups


@pytest.mark.parametrize("shuffle", [True, False])
def test_aliasing_renames_every_skill_and_every_mention(bench, tmp_path, shuffle):
    row = load_bench_rows(bench, "train")[0]
    slate = read_slate(bench / row["path"] / MANIFEST_FILE)
    skills = slate_skills_dir(bench / "skills", slate.names, tmp_path / "plain")
    library = sorted(p.name for p in (bench / "skills").iterdir())
    aliased, folder = alias_slate(slate, skills, tmp_path / "aliased", random.Random(3), taken=library,
                                  shuffle_suffixes=shuffle)
    assert [e.category for e in aliased.entries] == [e.category for e in slate.entries]
    assert not set(aliased.names) & set(library) and len(set(aliased.names)) == len(slate.names)
    mapping = dict(zip(slate.names, aliased.names, strict=True))
    for old, new in mapping.items():  # the first part changes; one alias per first part
        assert new.split("-")[0] != old.split("-")[0]
        others = [n for o, n in mapping.items() if o.split("-")[0] == old.split("-")[0]]
        assert {n.split("-")[0] for n in others} == {new.split("-")[0]}
        if not shuffle:  # the rest stays
            assert new.split("-", 1)[1:] == old.split("-", 1)[1:]
    moved = []
    for group, members in lookalike_groups(slate.names).items():  # suffixes move within their group only
        new_group = mapping[members[0]].split("-", 2)
        assert {mapping[m] for m in members} == {f"{new_group[0]}-{new_group[1]}-{m[len(group):]}" for m in members}
        moved += [m for m in members if mapping[m].split("-", 2)[2] != m[len(group):]]
    assert bool(moved) == shuffle
    assert sorted(p.name for p in folder.iterdir()) == sorted(aliased.names)
    for entry in aliased.entries:
        assert entry.location == f"/skills/{entry.name}/SKILL.md"
        assert load_skill(folder / entry.name).name == entry.name  # SKILL.md's name: matches its folder
    for path in folder.rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert not [old for old in slate.names if old in text], path
            original = skills / mapping_back(mapping, path.relative_to(folder))
            assert os.stat(path).st_mode == os.stat(original).st_mode
    assert not [old for old in slate.names for e in aliased.entries if old in e.description]
    again = alias_names(slate.names, random.Random(3), taken=library, shuffle_suffixes=shuffle)
    assert again == mapping  # a function of the rng's seed


def mapping_back(mapping: dict[str, str], relative: Path) -> Path:
    back = {new: old for old, new in mapping.items()}
    return Path(back[relative.parts[0]], *relative.parts[1:])


def test_the_teacher_resolves_the_same_tasks_under_aliases(bench, tiny_model_dir, tmp_path):
    inputs = {"bench": bench, "base_model": tiny_model_dir}
    base = CollectConfig(max_tasks=4, repeats=2, misleading_rate=0.0, batch_episodes=8, seed=1)
    runs = {}
    for rate in (0.0, 1.0):
        out = tmp_path / f"rate{rate}"
        out.mkdir()
        result = collect_trajectories(CollectConfig(**{**base.__dict__, "alias_rate": rate}), inputs, out)
        runs[rate] = (result, pq.read_table(out / "trajectories" / "trajectories.parquet").to_pylist())
    (plain_result, plain), (alias_result, aliased) = runs[0.0], runs[1.0]
    assert alias_result.metrics["aliased_episodes"] == 8 and plain_result.metrics["aliased_episodes"] == 0
    assert [(r["task_id"], r["repeat"], r["score"]) for r in aliased] == [
        (r["task_id"], r["repeat"], r["score"]) for r in plain]
    assert sum(r["score"] for r in aliased) >= 1
    for a, p in zip(aliased, plain, strict=True):
        renamed = json.loads(a["extra"])["skill_aliases"]
        assert renamed == dict(zip(p["slate_names"], a["slate_names"], strict=True))
        assert a["gold"] == renamed[p["gold"]] and a["reads"] == p["reads"] == ["oracle"]
        assert "skill_aliases" not in json.loads(p["extra"])
    # the default shuffles suffixes: some episode's oracle was played under another suffix than the bench's
    assert any(json.loads(a["extra"])["skill_aliases"][p["gold"]].split("-", 2)[2] != p["gold"].split("-", 2)[2]
               for a, p in zip(aliased, plain, strict=True))


def test_the_trajectories_do_not_depend_on_how_many_sandboxes_run_at_once(bench, tiny_model_dir, tmp_path,
                                                                          monkeypatch):
    # nor on whether sandbox starts and grading overlap the turns (EpisodeConfig.overlap_sandbox): what SFT
    # trains on must not change with either, or SFT no longer repeats its policy across sessions
    import functools

    from skillgate_core.agent import collect as collect_module
    from skillgate_core.agent.episode import EpisodeConfig

    inputs = {"bench": bench, "base_model": tiny_model_dir}
    rows = {}
    for workers, overlap in ((1, True), (4, True), (4, False)):
        out = tmp_path / f"workers{workers}-{overlap}"
        out.mkdir()
        config = CollectConfig(max_tasks=4, repeats=2, misleading_rate=0.5, alias_rate=0.5, batch_episodes=8, seed=2,
                               sandbox_workers=workers)
        monkeypatch.setattr(collect_module, "EpisodeConfig", functools.partial(EpisodeConfig, overlap_sandbox=overlap))
        collect_trajectories(config, inputs, out)
        rows[workers, overlap] = [{k: v for k, v in r.items() if k != "duration_s"}
                                  for r in pq.read_table(out / "trajectories" / "trajectories.parquet").to_pylist()]
    assert len(rows[1, True]) == 8 and rows[1, True] == rows[4, True] == rows[4, False]
    assert {tuple(r["reads"]) for r in rows[1, True]} >= {("misleading",), ("oracle",)}  # the noise was drawn: not all alike

"""Renamed slates (skills.aliases) on the small bench's real slates: the suffix shuffle makes the oracle's
suffix uniform over its lookalike group, names stay unique and clear of the library, and every file is
rewritten once, to new names only."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from skillgate_core.benchgen.families import FAMILIES
from skillgate_core.envs.bench_index import load_bench_rows
from skillgate_core.formats.slate_manifest import MANIFEST_FILE, Slate, SlateEntry
from skillgate_core.skills import load_skill, read_slate, slate_skills_dir
from skillgate_core.skills.aliases import (
    alias_names,
    alias_slate,
    lookalike_groups,
    renamed_slate,
    write_renamed_skills,
)

DRAWS = 600


def _train_slates(bench: Path) -> list[tuple[dict, Slate]]:
    return [(row, read_slate(bench / row["path"] / MANIFEST_FILE)) for row in load_bench_rows(bench, "train")]


def _library(bench: Path) -> list[str]:
    return sorted(p.name for p in (bench / "skills").iterdir())


def _oracle_group(slate: Slate) -> tuple[str, str, list[str]]:
    """(the oracle, its `<codename>-<noun>-`, the names sharing it)."""
    oracle = slate.oracle
    assert oracle is not None
    return next((oracle, g, m) for g, m in lookalike_groups(slate.names).items() if oracle in m)


def test_the_oracle_suffix_of_a_renamed_slate_is_uniform_over_its_group(bench):
    _, slate = _train_slates(bench)[0]
    library = _library(bench)
    oracle, group, members = _oracle_group(slate)
    assert len(members) == 6 and slate.members("misleading") == tuple(sorted(
        set(members) - {oracle}, key=slate.names.index))  # the group: the oracle and its five lookalikes
    suffixes = {m[len(group):] for m in members}
    seen: Counter[str] = Counter()
    for seed in range(DRAWS):
        mapping = alias_names(slate.names, random.Random(seed), taken=library)
        codename, noun, suffix = mapping[oracle].split("-", 2)
        seen[suffix] += 1
        # the group keeps its noun and its set of suffixes under one new codename
        new_group = f"{codename}-{noun}-"
        assert noun == group.split("-")[1] and codename != group.split("-")[0]
        assert {mapping[m] for m in members} == {new_group + s for s in suffixes}
    assert set(seen) == suffixes
    assert min(seen.values()) >= DRAWS // 12, seen  # uniform: 100 expected per suffix
    # without the shuffle the oracle keeps its suffix: the shortcut the shuffle removes
    kept = {alias_names(slate.names, random.Random(seed), taken=library, shuffle_suffixes=False)[oracle]
            .split("-", 2)[2] for seed in range(50)}
    assert kept == {oracle[len(group):]}


def test_renamed_names_are_unique_fresh_and_never_hold_an_old_name(bench):
    library = _library(bench)
    library_firsts = {n.split("-")[0] for n in library}
    for row, slate in _train_slates(bench):
        for seed in range(20):
            mapping = alias_names(slate.names, random.Random(f"{row['task_id']}:{seed}"), taken=library)
            new = list(mapping.values())
            assert sorted(mapping) == sorted(slate.names) and len(set(new)) == len(new)
            assert not set(new) & set(library) and not {n.split("-")[0] for n in new} & library_firsts
            assert not [(old, n) for old in slate.names for n in new if old in n]
            # names that shared a first part still do; names that did not still do not
            for a in slate.names:
                for b in slate.names:
                    assert (a.split("-")[0] == b.split("-")[0]) == (mapping[a].split("-")[0] == mapping[b].split("-")[0])


def test_a_pseudo_word_never_ends_with_an_old_first_part():
    """`ba` ends one pseudo-word in 70: renamed `koba-ledger-export` would hold the old `ba-ledger-export`."""
    names = [f"ba-ledger-{s}" for s in ("export", "exporter", "writer")] + ["ka-ledger-feed"]
    for seed in range(1000):
        mapping = alias_names(names, random.Random(seed))
        assert not [(old, new) for old in names for new in mapping.values() if old in new], (seed, mapping)


def test_names_whose_later_parts_spell_another_are_refused():
    with pytest.raises(ValueError, match="would hold old ones"):
        alias_names(["kite-ledger-export", "wren-kite-ledger-export"], random.Random(0))


def test_renamed_skill_files_hold_only_new_names_each_rewritten_once(bench, tmp_path):
    library = _library(bench)
    for row, slate in _train_slates(bench)[:4]:
        skills = slate_skills_dir(bench / "skills", slate.names, tmp_path / row["task_id"] / "plain")
        aliased, folder = alias_slate(slate, skills, tmp_path / row["task_id"] / "renamed", random.Random(1),
                                      taken=library)
        mapping = dict(zip(slate.names, aliased.names, strict=True))
        oracle, group, members = _oracle_group(slate)
        assert any(mapping[m].split("-", 2)[2] != m[len(group):] for m in members)  # suffixes did move
        assert [e.category for e in aliased.entries] == [e.category for e in slate.entries]
        assert aliased.oracle == mapping[oracle] and aliased.task_id == slate.task_id
        back = {new: old for old, new in mapping.items()}
        names = re.compile("|".join(sorted(map(re.escape, [*mapping, *back]), key=len, reverse=True)))
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            text = path.read_text()
            original = (skills / back[path.relative_to(folder).parts[0]]).joinpath(
                *path.relative_to(folder).parts[1:]).read_text()
            assert not [old for old in slate.names if old in text], path
            # the same text with each old name replaced by its new one, once: nothing else moved
            assert names.findall(text) == [mapping[n] for n in names.findall(original)], path
            assert names.sub("@", text) == names.sub("@", original), path
        for entry in aliased.entries:
            assert load_skill(folder / entry.name).name == entry.name
            assert not [old for old in slate.names if old in entry.description]


def test_a_rewrite_never_renames_what_it_wrote(make_skill, tmp_path):
    """Old names that new names contain (a mapping from a table, not from alias_names): one pass, longest
    first, so `kite-ledger-exporter` -> `bokite-ledger-export` is not renamed again as `kite-ledger-export`."""
    mapping = {"kite-ledger-exporter": "bokite-ledger-export", "kite-ledger-export": "bokite-ledger-exporter"}
    body = "Run /skills/kite-ledger-export/scripts/run.sh, not kite-ledger-exporter.\n"
    for name in mapping:
        make_skill(name, f"Unlike {[n for n in mapping if n != name][0]}, this is {name}.", body, scripts=True)
    written = write_renamed_skills(mapping, tmp_path / "lib", tmp_path / "renamed")
    skill = load_skill(written / "bokite-ledger-export")
    assert skill.name == "bokite-ledger-export"
    assert skill.description == "Unlike bokite-ledger-exporter, this is bokite-ledger-export."
    assert (written / "bokite-ledger-export" / "SKILL.md").read_text().endswith(
        "Run /skills/bokite-ledger-exporter/scripts/run.sh, not bokite-ledger-export.\n")
    slate = Slate("t", "b", "train", 0, tuple(SlateEntry(n, "oracle" if i == 0 else "misleading", f"not {n}")
                                            for i, n in enumerate(mapping)))
    assert [e.description for e in renamed_slate(slate, mapping).entries] == [f"not {mapping[n]}" for n in mapping]


def test_the_suffix_measurement_script_reports_the_bench_and_both_renamings(bench, tmp_path):
    """benchmarks/oracle_suffixes.py on the small bench: `bench` is the oracle suffixes of tasks.jsonl,
    codename-only renaming keeps them, the shuffle spreads each family's oracle over all six suffixes."""
    repo = Path(__file__).resolve().parents[2]
    out = tmp_path / "suffixes.json"
    done = subprocess.run([sys.executable, str(repo / "benchmarks" / "oracle_suffixes.py"), "--bench", str(bench),
                           "--copies", "30", "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "oracle suffix per family, split train" in done.stdout
    report = json.loads(out.read_text())
    rows = load_bench_rows(bench, "train")
    assert report["tasks"] == dict(Counter(r["family"] for r in rows))
    for family, by_suffix in report["families"].items():
        expected = Counter(r["oracle"].split("-", 2)[2] for r in rows if r["family"] == family)
        tasks = sum(expected.values())
        assert {s: v["bench"] for s, v in by_suffix.items() if v["bench"]} == {
            s: round(n / tasks, 4) for s, n in expected.items()}
        assert all(v["codename"] == v["bench"] for v in by_suffix.values())
        assert {s for s, v in by_suffix.items() if v["shuffled"]} == set(FAMILIES[family].suffixes)

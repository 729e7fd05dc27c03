"""Library discovery, the parquet index, and the duplicate-name error."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from skillgate_core.base.digests import path_sha256
from skillgate_core.skills import (
    DuplicateSkillError,
    SkillError,
    find_skill_dirs,
    index_schema,
    load_library,
    read_index,
    write_index,
)


def test_find_skill_dirs_recurses_and_skips_hidden(make_skill, tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    make_skill("alpha")
    make_skill("beta", root=lib / "group" / "nested")
    make_skill("hidden", root=lib / ".git")
    (lib / "not-a-skill").mkdir()
    assert find_skill_dirs(lib) == [lib / "alpha", lib / "group" / "nested" / "beta"]


def test_find_skill_dirs_missing_root(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such skill library"):
        find_skill_dirs(tmp_path / "nope")


def test_load_library_sorted_by_name(make_skill, tmp_path: Path) -> None:
    make_skill("zeta", root=tmp_path / "lib" / "a")
    make_skill("alpha", root=tmp_path / "lib" / "z")
    assert [s.name for s in load_library(tmp_path / "lib")] == ["alpha", "zeta"]


def test_duplicate_names_error_names_both_paths(make_skill, tmp_path: Path) -> None:
    first = make_skill("same", root=tmp_path / "lib" / "one")
    second = make_skill("same", root=tmp_path / "lib" / "two")
    with pytest.raises(DuplicateSkillError) as info:
        load_library(tmp_path / "lib")
    message = str(info.value)
    assert "duplicate skill name 'same'" in message
    assert str(first.resolve() / "SKILL.md") in message and str(second.resolve() / "SKILL.md") in message


def test_invalid_skill_fails_the_whole_library(make_skill, tmp_path: Path) -> None:
    make_skill("good")
    make_skill("bad-name", folder="other")
    make_skill("x", "")
    with pytest.raises(SkillError) as info:
        load_library(tmp_path / "lib")
    assert sorted(p.field for p in info.value.problems) == ["description", "name"]


def test_index_round_trip(make_skill, tmp_path: Path) -> None:
    make_skill("beta", "Second skill.", "one\ntwo\n", root=tmp_path / "lib" / "group", scripts=True)
    make_skill("alpha", "First skill.", "only\n", references=True)
    out = write_index(tmp_path / "lib", tmp_path / "out" / "index.parquet")
    assert out == tmp_path / "out" / "index.parquet" and out.is_file()
    assert not list(out.parent.glob(".*.tmp"))
    frame = read_index(out)
    assert dict(frame.schema) == index_schema()
    assert frame.to_dicts() == [
        {
            "name": "alpha",
            "description": "First skill.",
            "path": "alpha",
            "body_sha256": load_library(tmp_path / "lib")[0].body_sha256,
            "folder_sha256": path_sha256(tmp_path / "lib" / "alpha"),
            "n_lines": 1,
            "has_scripts": False,
            "has_references": True,
        },
        {
            "name": "beta",
            "description": "Second skill.",
            "path": "group/beta",
            "body_sha256": load_library(tmp_path / "lib")[1].body_sha256,
            "folder_sha256": path_sha256(tmp_path / "lib" / "group" / "beta"),
            "n_lines": 2,
            "has_scripts": True,
            "has_references": False,
        },
    ]


def test_folder_digest_changes_with_any_file(make_skill, tmp_path: Path) -> None:
    folder = make_skill("alpha", references=True)
    before = read_index(write_index(tmp_path / "lib", tmp_path / "i.parquet"))["folder_sha256"][0]
    (folder / "references" / "notes.md").write_text("edited\n")
    after = read_index(write_index(tmp_path / "lib", tmp_path / "i.parquet"))
    assert after["folder_sha256"][0] != before
    assert after["body_sha256"][0] == load_library(tmp_path / "lib")[0].body_sha256


def test_read_index_rejects_wrong_columns_and_duplicates(tmp_path: Path) -> None:
    bad = tmp_path / "bad.parquet"
    pl.DataFrame({"name": ["a"]}).write_parquet(bad)
    with pytest.raises(SkillError, match="columns: expected name: String"):
        read_index(bad)
    row = {"name": "a", "description": "d", "path": "x/a", "body_sha256": "0", "folder_sha256": "0",
           "n_lines": 1, "has_scripts": False, "has_references": False}
    dup = tmp_path / "dup.parquet"
    pl.DataFrame([row, {**row, "path": "y/a"}], schema=index_schema()).write_parquet(dup)
    with pytest.raises(DuplicateSkillError, match="x/a"):
        read_index(dup)
    with pytest.raises(FileNotFoundError):
        read_index(tmp_path / "missing.parquet")

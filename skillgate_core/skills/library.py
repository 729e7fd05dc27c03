"""A skill library: every folder holding a SKILL.md under a root, and its parquet index.

    skills = load_library("skills/")               # tuple of Skill, sorted by name; fail closed
    write_index("skills/", "index.parquet")         # one row per skill (index_schema())
    frame = read_index("index.parquet")             # checked columns, types and unique names

The index row holds what retrieval and slates need without reading the bodies: name, description,
the folder path relative to the root, the body sha256, the folder digest (`path_sha256`: every
file of the skill), the body's line count and whether scripts/ and references/ exist.
"""

from __future__ import annotations

import os
import tempfile
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from skillgate_core.base.digests import path_sha256
from skillgate_core.skills.skill_md import (
    SKILL_FILE,
    DuplicateSkillError,
    Skill,
    SkillError,
    SkillProblem,
    load_skill,
)

__all__ = [
    "index_schema",
    "find_skill_dirs",
    "index_frame",
    "load_library",
    "read_index",
    "write_index",
]

def index_schema() -> dict[str, Any]:
    """Columns of the parquet index, in order (polars dtypes). A function, so that importing the skills
    package does not import polars: the GPU training path loads skills without it."""
    import polars as pl

    return {
        "name": pl.String(),
        "description": pl.String(),
        "path": pl.String(),
        "body_sha256": pl.String(),
        "folder_sha256": pl.String(),
        "n_lines": pl.Int64(),
        "has_scripts": pl.Boolean(),
        "has_references": pl.Boolean(),
    }
"""Columns of a library index, in order. `path` is the skill folder relative to the library root."""


def find_skill_dirs(root: str | Path) -> list[Path]:
    """Every folder under `root` (itself included) that holds a SKILL.md, sorted by path, and every link to
    a folder holding one (never entered: `validate_skill` calls it invalid, so a library holding one is
    refused instead of the link being skipped unseen).

    Hidden folders (`.git`, `.venv`, ...) are skipped: they hold tooling, not skills.
    """
    base = Path(root)
    if not base.is_dir():
        raise FileNotFoundError(f"{base}: no such skill library directory")
    found: list[Path] = []
    for current, dirs, files in os.walk(base):  # does not descend into linked folders
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if SKILL_FILE in files:
            found.append(Path(current))
        found += [Path(current) / d for d in dirs
                  if (Path(current) / d).is_symlink() and (Path(current) / d / SKILL_FILE).exists()]
    return sorted(found)


def load_library(root: str | Path) -> tuple[Skill, ...]:
    """Every skill under `root`, sorted by name.

    Raises SkillError listing the errors of every invalid skill, or DuplicateSkillError naming both
    folders of each repeated name: a library with one bad skill is not used at all.
    """
    skills: list[Skill] = []
    errors: list[SkillProblem] = []
    for folder in find_skill_dirs(root):
        try:
            skills.append(load_skill(folder))
        except SkillError as exc:
            errors.extend(exc.problems)
    if errors:
        raise SkillError(errors)
    _raise_on_duplicates((s.name, s.skill_md) for s in skills)
    return tuple(sorted(skills, key=lambda s: s.name))


def _raise_on_duplicates(named_paths: Iterable[tuple[str, Path | str]]) -> None:
    seen: dict[str, list[str]] = defaultdict(list)
    for name, path in named_paths:
        seen[name].append(str(path))
    problems = [
        SkillProblem(Path(paths[1]), "name", f"duplicate skill name {name!r}: also declared by {paths[0]}")
        for name, paths in sorted(seen.items())
        if len(paths) > 1
    ]
    if problems:
        raise DuplicateSkillError(problems)


def index_frame(skills: Iterable[Skill], root: str | Path) -> Any:
    """The index rows of `skills` (paths relative to `root`), sorted by name."""
    base = Path(os.path.abspath(Path(root).expanduser()))
    rows = [
        {
            "name": s.name,
            "description": s.description,
            "path": s.folder.relative_to(base).as_posix(),
            "body_sha256": s.body_sha256,
            "folder_sha256": path_sha256(s.folder),
            "n_lines": s.n_lines,
            "has_scripts": s.has_scripts,
            "has_references": s.has_references,
        }
        for s in sorted(skills, key=lambda s: s.name)
    ]
    import polars as pl

    return pl.DataFrame(rows, schema=index_schema())


def write_index(root: str | Path, out: str | Path) -> Path:
    """Index the library under `root` into the parquet file `out` (written atomically)."""
    frame = index_frame(load_library(root), root)
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        frame.write_parquet(tmp)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def read_index(path: str | Path) -> Any:
    """A library index written by `write_index`, checked: exact columns and types, unique names."""
    source = Path(path)
    if not source.is_file():
        raise FileNotFoundError(f"{source}: no such skill index")
    import polars as pl

    frame = pl.read_parquet(source)
    if list(frame.schema.items()) != list(index_schema().items()):
        raise SkillError(
            SkillProblem(source, "columns", f"expected {_schema_text(index_schema())}, got {_schema_text(frame.schema)}")
        )
    _raise_on_duplicates(
        (name, f"{source}:{rel}") for name, rel in zip(frame["name"], frame["path"], strict=True)
    )
    return frame


def _schema_text(schema) -> str:
    return ", ".join(f"{k}: {v}" for k, v in dict(schema).items())

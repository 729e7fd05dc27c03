"""One episode's slate under fresh skill names: a data augmentation for collected trajectories.

A small policy trained from scratch on teacher trajectories learns to *recall* the training skills'
names rather than to *copy* a name out of the slate: on eval70_v1, whose skills share no name with
the training tasks', 137 of the 337 paths a 24.7M SFT policy read were training skills' names and 200
existed nowhere (H200, 2026-11-30, benchmarks/results/gpu/LOG.md section 4). Renaming an episode's
skills makes recall useless, so imitation has to learn the transferable move: match the task to a
description, then copy that skill's name.

Each distinct first part of the slate's names (`acacia` in `acacia-archive-planner`) becomes a fresh
pseudo-word, the same one for every skill sharing it, so lookalike skills stay lookalikes. Every
occurrence of an old full name is rewritten, in the descriptions and in every file of the skill
folders (SKILL.md's `name:`, the script paths of its procedure, script docstrings), longest name
first so no name is rewritten inside another. Categories, order and the task are unchanged, so the
same verifier grades the episode.

    slate2, skills2 = alias_slate(slate, skills_dir, scratch / "alias-0", random.Random(7), taken=library_names)
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from skillgate_core.formats.slate_manifest import Slate, SlateError

__all__ = ["alias_names", "alias_slate", "renamed_slate", "write_renamed_skills"]

_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"


def _pseudo_word(rng: random.Random) -> str:
    return "".join(rng.choice(_CONSONANTS) + rng.choice(_VOWELS) for _ in range(rng.choice((2, 3))))


def alias_names(names: Iterable[str], rng: random.Random, taken: Iterable[str] = ()) -> dict[str, str]:
    """{old name: new name}: each distinct first part replaced by a fresh pseudo-word that is no first
    part of `names` or `taken` (e.g. the whole library), the rest of the name kept."""
    names = list(names)
    used = {n.split("-", 1)[0] for n in (*names, *taken)}
    prefixes: dict[str, str] = {}
    for name in names:
        first = name.split("-", 1)[0]
        if first not in prefixes:
            word = _pseudo_word(rng)
            while word in used:
                word = _pseudo_word(rng)
            used.add(word)
            prefixes[first] = word
    return {n: prefixes[n.split("-", 1)[0]] + n[len(n.split("-", 1)[0]):] for n in names}


def _rewrite(data: bytes, mapping: list[tuple[bytes, bytes]]) -> bytes:
    for old, new in mapping:
        data = data.replace(old, new)
    return data


def alias_slate(slate: Slate, skills_dir: Path, into: Path, rng: random.Random,
                taken: Iterable[str] = ()) -> tuple[Slate, Path]:
    """(the slate under fresh names, a folder `into` holding its skills renamed and rewritten).

    `skills_dir` holds exactly the slate's skills (skills.slate_skills_dir, which refused links);
    anything there that is not a regular file or folder is refused here too (SlateError)."""
    mapping = alias_names(slate.names, rng, taken)
    return renamed_slate(slate, mapping), write_renamed_skills(mapping, skills_dir, into)


def _longest_first(mapping: dict[str, str]) -> list[tuple[str, str]]:
    return sorted(mapping.items(), key=lambda kv: -len(kv[0]))


def renamed_slate(slate: Slate, mapping: dict[str, str]) -> Slate:
    """The slate with every name renamed by `mapping` {old: new} (one per slate name), in the names and
    in every description; categories and order unchanged."""
    if sorted(mapping) != sorted(slate.names):
        raise SlateError(f"task {slate.task_id}: the renaming covers {sorted(mapping)}, the slate holds "
                         f"{sorted(slate.names)}")
    text_map = _longest_first(mapping)

    def text(value: str) -> str:
        for old, new in text_map:
            value = value.replace(old, new)
        return value

    entries = tuple(replace(e, name=mapping[e.name], description=text(e.description), location="")
                    for e in slate.entries)
    return replace(slate, entries=entries)


def write_renamed_skills(mapping: dict[str, str], skills_dir: Path, into: Path) -> Path:
    """A new folder `into` holding each skill `old` of `skills_dir` as `new`, every occurrence of an old
    name in its files rewritten (longest first), file modes kept. Refuses (SlateError) anything that is
    not a regular file or folder."""
    byte_map = [(old.encode(), new.encode()) for old, new in _longest_first(mapping)]
    into.mkdir(parents=True, exist_ok=False)
    for old, new in mapping.items():
        source, target = Path(skills_dir) / old, into / new
        for path in sorted(source.rglob("*")):
            dest = target / path.relative_to(source)
            if path.is_symlink() or not (path.is_dir() or path.is_file()):
                shutil.rmtree(into, ignore_errors=True)
                raise SlateError(f"{path}: not a regular file or folder; a skill holds regular files and folders only")
            if path.is_dir():
                dest.mkdir(parents=True, exist_ok=True)
            else:
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(_rewrite(path.read_bytes(), byte_map))
                shutil.copymode(path, dest)  # the scripts stay executable
        target.mkdir(parents=True, exist_ok=True)
    return into

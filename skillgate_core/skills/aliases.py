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
folders (SKILL.md's `name:`, the script paths of its procedure, script docstrings), in one pass
with the longest name tried first, so no name is rewritten inside another and no rewritten name is
rewritten again; a pseudo-word never ends with an old first part, so no new name holds an old one.
Categories, order and the task are unchanged, so the same verifier grades the episode.

With `shuffle_suffixes` (the stages' default) each lookalike group (the names sharing
`<codename>-<noun>-`: an oracle and its five misleading skills) also gets its suffixes permuted, drawn
from the same rng. Benches built before the balanced draws drew the oracle's suffix per skill, and over
a split's few skills the draws were skewed: in the old default suite's planning family the oracle was
`-steps` in 33% of the 264 training tasks and `-planner` in 8%, in eval70_v1's 17 planning tasks
`-planner` in 53% and `-steps` in none. The bench now deals it evenly (benchgen.balanced_draws), and a
renamed slate still permutes it: after the shuffle the oracle's suffix is uniform over its group's six,
whatever the bench gave it, so no suffix a policy saw in training marks the oracle (docs/training.md,
Renamed slates).

    slate2, skills2 = alias_slate(slate, skills_dir, scratch / "alias-0", random.Random(7), taken=library_names)
"""

from __future__ import annotations

import json
import random
import re
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from skillgate_core.base.plain_trees import NotPlainTree, copy_plain_tree
from skillgate_core.formats.slate_manifest import Slate, SlateError

__all__ = ["alias_names", "alias_slate", "lookalike_groups", "renamed_slate", "shown_task_row", "write_renamed_skills"]

_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"


def _pseudo_word(rng: random.Random) -> str:
    return "".join(rng.choice(_CONSONANTS) + rng.choice(_VOWELS) for _ in range(rng.choice((2, 3))))


def _first(name: str) -> str:
    return name.split("-", 1)[0]


def lookalike_groups(names: Iterable[str]) -> dict[str, list[str]]:
    """{`<codename>-<noun>-`: the names sharing it, in order}: the bench's lookalike groups (an oracle and
    its misleading skills). A name of fewer than three parts belongs to no group; a group may hold one."""
    groups: dict[str, list[str]] = {}
    for name in names:
        parts = name.split("-", 2)
        if len(parts) == 3:
            groups.setdefault(f"{parts[0]}-{parts[1]}-", []).append(name)
    return groups


def alias_names(names: Iterable[str], rng: random.Random, taken: Iterable[str] = (), *,
                shuffle_suffixes: bool = True) -> dict[str, str]:
    """{old name: new name}: each distinct first part replaced by a fresh pseudo-word that is no first
    part of `names` or `taken` (e.g. the whole library) and ends with none of `names`' first parts, the
    rest of the name kept; with `shuffle_suffixes`, then each lookalike group's suffixes permuted
    (module docstring). ValueError if a new name would still hold an old one (only names whose later
    parts spell another name do)."""
    names = list(names)
    own = {_first(n) for n in names}
    used = own | {_first(n) for n in taken}
    prefixes: dict[str, str] = {}
    for name in names:
        first = _first(name)
        if first not in prefixes:
            word = _pseudo_word(rng)
            # a word ending with an old first part would put the old name inside the new one
            while word in used or any(word.endswith(old) for old in own):
                word = _pseudo_word(rng)
            used.add(word)
            prefixes[first] = word
    mapping = {n: prefixes[_first(n)] + n[len(_first(n)):] for n in names}
    if shuffle_suffixes:
        for group, members in lookalike_groups(names).items():
            suffixes = [m[len(group):] for m in members]
            rng.shuffle(suffixes)
            renamed_group = prefixes[_first(group)] + group[len(_first(group)):]
            for member, suffix in zip(members, suffixes, strict=True):
                mapping[member] = renamed_group + suffix
    held = sorted((old, new) for new in mapping.values() for old in names if old in new)
    if held:
        raise ValueError(f"renaming {names}: new names would hold old ones {held} (old, new); an old name must "
                         "never be rewritten inside a new one")
    return mapping


def _rewriter(mapping: dict[str, str]) -> str:
    """One alternation of the old names, longest first: a single left-to-right pass renames each
    occurrence once, the longest name at a position winning, and never rescans what it wrote."""
    olds = sorted(mapping, key=len, reverse=True)
    return "|".join(re.escape(old) for old in olds) if olds else "(?!)"


def alias_slate(slate: Slate, skills_dir: Path, into: Path, rng: random.Random,
                taken: Iterable[str] = (), *, shuffle_suffixes: bool = True) -> tuple[Slate, Path]:
    """(the slate under fresh names, a folder `into` holding its skills renamed and rewritten); the names
    are alias_names(slate.names, rng, taken, shuffle_suffixes=...).

    `skills_dir` holds exactly the slate's skills (skills.slate_skills_dir, which refused links); a link
    or anything else there that is not a regular file or folder is refused here too (SlateError)."""
    mapping = alias_names(slate.names, rng, taken, shuffle_suffixes=shuffle_suffixes)
    return renamed_slate(slate, mapping), write_renamed_skills(mapping, skills_dir, into)


def renamed_slate(slate: Slate, mapping: dict[str, str]) -> Slate:
    """The slate with every name renamed by `mapping` {old: new} (one per slate name), in the names and
    in every description; categories and order unchanged."""
    if sorted(mapping) != sorted(slate.names):
        raise SlateError(f"task {slate.task_id}: the renaming covers {sorted(mapping)}, the slate holds "
                         f"{sorted(slate.names)}")
    pattern = re.compile(_rewriter(mapping))

    def text(value: str) -> str:
        return pattern.sub(lambda m: mapping[m.group(0)], value)

    entries = tuple(replace(e, name=mapping[e.name], description=text(e.description), location="")
                    for e in slate.entries)
    return replace(slate, entries=entries)


def write_renamed_skills(mapping: dict[str, str], skills_dir: Path, into: Path) -> Path:
    """A new folder `into` holding each skill `old` of `skills_dir` as `new`, every occurrence of an old
    name in its files rewritten (one pass, longest first), file modes kept. Refuses (SlateError naming
    it, `into` removed) a symbolic link at any level, `skills_dir` and the skill folders included, and
    anything else that is not a regular file or folder: never a host file under a new name."""
    pattern = re.compile(_rewriter(mapping).encode())  # the same alternation, in UTF-8
    byte_map = {old.encode(): new.encode() for old, new in mapping.items()}

    def rewrite(data: bytes) -> bytes:
        return pattern.sub(lambda m: byte_map[m.group(0)], data)

    into.mkdir(parents=True, exist_ok=False)
    skills_dir = Path(skills_dir)
    try:
        for old, new in mapping.items():
            copy_plain_tree(skills_dir / old, into / new, below=skills_dir.parent, rewrite=rewrite)
    except NotPlainTree as exc:
        shutil.rmtree(into, ignore_errors=True)
        raise SlateError(str(exc)) from None
    except BaseException:
        shutil.rmtree(into, ignore_errors=True)
        raise
    return into


def shown_task_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """An rl-data-prep row with its slate and gold under the names its prompt shows: a renamed task's prompt
    ids were rendered with the slate under fresh names (`skill_aliases`, {bench name: shown name}), so what
    scores or trains its first read must name the shown skill. ValueError if the aliases do not map
    exactly the slate's names."""
    if not row.get("skill_aliases"):
        return dict(row)
    aliases = json.loads(row["skill_aliases"])
    names = [s["name"] for s in row["slate"]]
    if not isinstance(aliases, dict) or sorted(aliases) != sorted(names):
        raise ValueError(f"task {row['task_id']}: skill_aliases must map exactly the slate's names")
    return {**row, "gold_name": aliases[row["gold_name"]],
            "slate": [{**s, "name": aliases[s["name"]]} for s in row["slate"]]}

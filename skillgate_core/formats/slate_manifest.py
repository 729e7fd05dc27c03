"""A task's skills.json: the ordered slate its prompt advertises (one format for the whole project).

    {"task_id": "procedural-scheduling-tr0001", "bench": "skillgate-train", "split": "train",
     "seed": 40331637655429,
     "entries": [{"name": "pdf-merge", "category": "misleading", "description": "...",
                  "location": "/skills/pdf-merge/SKILL.md"}, ...]}

The entries are in prompt order (the seeded shuffle of docs/method.md 2, frozen when the slate was built:
read it back, never recompute it). A skill's role (oracle / misleading / relevant / irrelevant) is
its entry's category, so the role lists are derived (`Slate.members("misleading")`), never stored.

This module sits below both skillgate_core.skills (which builds, writes and shape-checks slates)
and skillgate_core.envs (whose task packages carry a skills.json), so both parse the one format with
the one parser. It checks the format: keys and types, skill names (the agentskills rule: <= 64 chars
of [a-z0-9], single inner hyphens), unique names, exactly one oracle, locations at /skills/NAME/SKILL.md.
The 16-skill shape (1 oracle and 5/5/5) is a separate rule (skills.slate_problem), because a
hand-made or generated task may advertise fewer skills than a training slate.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

__all__ = [
    "MANIFEST_FILE",
    "SLATE_CATEGORIES",
    "SLATE_SPLITS",
    "Slate",
    "SlateCategory",
    "SlateEntry",
    "SlateError",
    "Split",
    "is_skill_name",
    "load_slate_manifest",
    "skill_location",
]

MANIFEST_FILE = "skills.json"
"""Where a task package keeps its slate."""

SlateCategory = Literal["oracle", "misleading", "relevant", "irrelevant"]
"""Why a skill is on the slate (its role)."""
SLATE_CATEGORIES: tuple[str, ...] = get_args(SlateCategory)
"""The four roles, oracle first."""
Split = Literal["train", "eval"]
"""Which shuffle tag a slate's seed uses (skills.SHUFFLE_TAGS)."""
SLATE_SPLITS: tuple[str, ...] = get_args(Split)
"""The valid `split` values."""

_MANIFEST_KEYS = ("task_id", "bench", "split", "seed", "entries")
_ENTRY_KEYS = ("name", "category", "description", "location")
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def is_skill_name(name: object) -> bool:
    """A skill name: at most 64 characters of a-z, 0-9 and single inner hyphens (a folder name, never a path)."""
    return isinstance(name, str) and len(name) <= 64 and bool(_NAME.match(name))


class SlateError(ValueError):
    """A slate cannot be built, or a skills.json manifest is malformed; the message says why."""


def skill_location(name: str) -> str:
    """Where the agent reads a skill: `/skills/NAME/SKILL.md`."""
    return f"/skills/{name}/SKILL.md"


# Declarations below, not logic: each field documented where it is declared (docs/design.md, Style).
@dataclass(frozen=True)
class SlateEntry:
    """One advertised skill."""

    name: str
    """The skill name."""
    category: SlateCategory
    """oracle / misleading / relevant / irrelevant."""
    description: str
    """The full description (the prompt renderer cuts it to 300 characters)."""
    location: str = ""
    """Where the agent reads it; always `/skills/NAME/SKILL.md` (filled in when left empty)."""

    def __post_init__(self) -> None:
        if self.category not in SLATE_CATEGORIES:
            raise SlateError(f"{self.name}: category: expected one of {SLATE_CATEGORIES}, got {self.category!r}")
        expected = skill_location(self.name)
        if not self.location:
            object.__setattr__(self, "location", expected)
        elif self.location != expected:
            # Span detection finds reads by this exact path: any other location would go unseen.
            raise SlateError(f"{self.name}: location: expected {expected!r}, got {self.location!r}")


@dataclass(frozen=True)
class Slate:
    """The ordered skills one task's prompt advertises, and where the order came from."""

    task_id: str
    """The benchmark task id."""
    bench: str
    """The benchmark name (the BENCH part of the shuffle seed)."""
    split: Split
    """`train` or `eval`: which shuffle tag the seed uses."""
    seed: int
    """The shuffle seed (`skills.slate_seed(bench, task_id, split)` for slates built by skills.build_slate)."""
    entries: tuple[SlateEntry, ...]
    """The skills in prompt order."""

    def __post_init__(self) -> None:
        if self.split not in SLATE_SPLITS:
            raise SlateError(f"split: expected one of {sorted(SLATE_SPLITS)}, got {self.split!r}")
        object.__setattr__(self, "entries", tuple(self.entries))

    @property
    def names(self) -> tuple[str, ...]:
        """Every skill name, in prompt order."""
        return tuple(e.name for e in self.entries)

    @property
    def oracle(self) -> str | None:
        """The name of the (first) oracle entry; None on a slate without one."""
        return next((e.name for e in self.entries if e.category == "oracle"), None)

    def members(self, category: str) -> tuple[str, ...]:
        """The names of one role, in prompt order."""
        if category not in SLATE_CATEGORIES:
            raise SlateError(f"category: expected one of {SLATE_CATEGORIES}, got {category!r}")
        return tuple(e.name for e in self.entries if e.category == category)

    def category_of(self, name: str) -> str:
        """The slate category of `name`, or `unadvertised` for a skill not on the slate."""
        return next((e.category for e in self.entries if e.name == name), "unadvertised")

    def entry(self, name: str) -> SlateEntry:
        """The entry of skill `name`; KeyError when it is not on the slate."""
        for e in self.entries:
            if e.name == name:
                return e
        raise KeyError(name)

    def to_manifest(self) -> dict[str, Any]:
        """The skills.json form: task_id, bench, split, seed and the ordered entries."""
        return {
            "task_id": self.task_id,
            "bench": self.bench,
            "split": self.split,
            "seed": self.seed,
            "entries": [{k: getattr(e, k) for k in _ENTRY_KEYS} for e in self.entries],
        }

    @classmethod
    def from_manifest(cls, data: Mapping[str, Any], source: str = MANIFEST_FILE) -> Slate:
        """Parse a skills.json manifest: keys, types, names, locations, unique names, exactly one oracle.

        The 16-skill shape is not checked here (skills.slate_problem does that)."""
        if not isinstance(data, Mapping):
            raise SlateError(f"{source}: expected a JSON object with keys {', '.join(_MANIFEST_KEYS)}, "
                             f"got {type(data).__name__}")
        _check_keys(data, _MANIFEST_KEYS, source)
        for key in ("task_id", "bench", "split"):
            if not isinstance(data[key], str):
                raise SlateError(f"{source}: {key}: expected a string, got {data[key]!r}")
        if not isinstance(data["seed"], int) or isinstance(data["seed"], bool):
            raise SlateError(f"{source}: seed: expected an integer, got {data['seed']!r}")
        if not isinstance(data["entries"], list):
            raise SlateError(f"{source}: entries: expected a list, got {type(data['entries']).__name__}")
        entries: list[SlateEntry] = []
        seen: dict[str, int] = {}
        for i, item in enumerate(data["entries"]):
            where = f"{source}: entries[{i}]"
            if not isinstance(item, Mapping):
                raise SlateError(f"{where}: expected an object, got {type(item).__name__}")
            _check_keys(item, _ENTRY_KEYS, where)
            bad = [k for k in _ENTRY_KEYS if not isinstance(item[k], str)]
            if bad:
                raise SlateError(f"{where}: {bad[0]}: expected a string, got {item[bad[0]]!r}")
            name = item["name"]
            if not is_skill_name(name):
                raise SlateError(f"{where}: name: {name!r} is not a skill name "
                                 "(<= 64 chars of a-z, 0-9 and single inner hyphens)")
            if name in seen:
                raise SlateError(f"{where}: skill {name!r} is already listed at entries[{seen[name]}]")
            seen[name] = i
            try:
                entries.append(SlateEntry(**{k: item[k] for k in _ENTRY_KEYS}))
            except SlateError as exc:
                raise SlateError(f"{where}: {exc}") from exc
        oracles = [e.name for e in entries if e.category == "oracle"]
        if len(oracles) != 1:
            raise SlateError(f"{source}: expected exactly one entry with category 'oracle' (the skill that "
                             f"solves the task), found {len(oracles)}{': ' + ', '.join(oracles) if oracles else ''}")
        try:
            return cls(data["task_id"], data["bench"], data["split"], data["seed"], tuple(entries))
        except SlateError as exc:
            raise SlateError(f"{source}: {exc}") from exc


def _check_keys(data: Mapping[str, Any], keys: Sequence[str], where: str) -> None:
    missing = [k for k in keys if k not in data]
    unknown = sorted(set(data) - set(keys))
    if missing:
        raise SlateError(f"{where}: missing key {missing[0]!r} (expected keys {', '.join(keys)})")
    if unknown:
        raise SlateError(f"{where}: unknown key {unknown[0]!r} (expected keys {', '.join(keys)})")


def load_slate_manifest(path: str | Path) -> Slate:
    """Read and parse one skills.json; SlateError names the file and what is wrong."""
    source = Path(path)
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SlateError(f"{source}: missing (expected the task's slate, {MANIFEST_FILE})") from None
    except UnicodeDecodeError as exc:
        raise SlateError(f"{source}: not UTF-8 text ({exc.reason})") from exc
    except json.JSONDecodeError as exc:
        raise SlateError(f"{source}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from exc
    return Slate.from_manifest(data, str(source))

"""A task package's skills.json: which skills form its slate, by role.

    {"oracle": "csv-column-sum",
     "misleading": ["csv-row-count", ...], "relevant": [...], "irrelevant": [...]}

Plain data only: the names are looked up in a skill library by skillgate_core/skills, which also
builds and orders the slate the agent sees (METHOD.md 1-2). Here we check the shape: the oracle is
one skill name, the other roles are lists of names, names follow the agentskills rule (<= 64 chars
of [a-z0-9-], no leading, trailing or double hyphen) and no name appears twice.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ROLES", "SlateManifest", "SlateManifestError", "load_slate_manifest", "parse_slate_manifest"]

ROLES = ("oracle", "misleading", "relevant", "irrelevant")
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_OPTIONAL_KEYS = ("version",)


class SlateManifestError(ValueError):
    """skills.json is malformed; the message names the file, the key and what was expected."""


@dataclass(frozen=True)
class SlateManifest:
    """The skills of one task's slate, by role (the slate's order is decided elsewhere)."""

    oracle: str
    """The skill that solves the task."""
    misleading: tuple[str, ...] = ()
    """Skills that look right but lead the agent astray."""
    relevant: tuple[str, ...] = ()
    """Skills about the same domain that do not solve this task."""
    irrelevant: tuple[str, ...] = ()
    """Skills from other domains."""

    @property
    def names(self) -> tuple[str, ...]:
        """Every skill name of the slate: oracle first, then misleading, relevant, irrelevant."""
        return (self.oracle, *self.misleading, *self.relevant, *self.irrelevant)

    def role_of(self, name: str) -> str | None:
        """The role of skill `name` in this slate, or None when it is not part of it."""
        if name == self.oracle:
            return "oracle"
        for role in ROLES[1:]:
            if name in getattr(self, role):
                return role
        return None


def parse_slate_manifest(data: object, source: str) -> SlateManifest:
    """Check parsed JSON `data` and build the manifest; `source` names the file in errors."""
    if not isinstance(data, dict):
        raise SlateManifestError(f"{source}: expected a JSON object with keys {', '.join(ROLES)}, "
                                 f"got {type(data).__name__}")
    unknown = sorted(set(data) - set(ROLES) - set(_OPTIONAL_KEYS))
    if unknown:
        raise SlateManifestError(f"{source}: unknown key '{unknown[0]}'; valid keys: "
                                 f"{', '.join(ROLES + _OPTIONAL_KEYS)}")
    if "oracle" not in data:
        raise SlateManifestError(f"{source}: missing key 'oracle' (the name of the skill that solves the task)")
    oracle = _check_name(data["oracle"], source, "oracle")
    lists: dict[str, tuple[str, ...]] = {}
    for role in ROLES[1:]:
        value = data.get(role, [])
        if not isinstance(value, list):
            raise SlateManifestError(f"{source}: {role}: expected a list of skill names, got {type(value).__name__}")
        lists[role] = tuple(_check_name(v, source, f"{role}[{i}]") for i, v in enumerate(value))
    seen: dict[str, str] = {oracle: "oracle"}
    for role, names in lists.items():
        for i, name in enumerate(names):
            if name in seen:
                raise SlateManifestError(f"{source}: {role}[{i}]: skill '{name}' already listed under {seen[name]}")
            seen[name] = role
    return SlateManifest(oracle=oracle, **lists)


def load_slate_manifest(path: str | Path) -> SlateManifest:
    """Read and check a skills.json file."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise SlateManifestError(f"{p}: not UTF-8 text ({exc.reason})") from exc
    except json.JSONDecodeError as exc:
        raise SlateManifestError(f"{p}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from exc
    return parse_slate_manifest(data, str(p))


def _check_name(value: object, source: str, key: str) -> str:
    if not isinstance(value, str):
        raise SlateManifestError(f"{source}: {key}: expected a skill name (string), got {type(value).__name__}")
    if len(value) > 64 or not _NAME.match(value):
        raise SlateManifestError(
            f"{source}: {key}: '{value}' is not a skill name (<= 64 chars of a-z, 0-9 and single inner hyphens)"
        )
    return value

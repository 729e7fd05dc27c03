"""SKILL.md parsing and validation (the agentskills convention).

A skill is a folder holding a SKILL.md: YAML front matter between two `---` lines, then a Markdown
body. Optional `scripts/` and `references/` folders sit beside it.

    problems = validate_skill("lib/pdf-merge")    # every problem at once (errors and warnings)
    skill = load_skill("lib/pdf-merge")           # a Skill, or SkillError naming file + field

Rules (agentskills/agentskills docs/specification.mdx):
- `name`: required, at most 64 characters of [a-z0-9-], no leading, trailing or double hyphen,
  equal to the folder name.
- `description`: required, a non-empty string of at most 1024 characters.
- `license` (string), `compatibility` (1-500 characters), `metadata` (a map of string -> string),
  `allowed-tools` (a space-separated string; a YAML list of strings is accepted too): optional, kept.
- Any other front-matter key is kept in `Skill.extra` with a warning: community skills carry
  client-specific keys (e.g. Claude Code's `model`), and refusing them would refuse real skills.
- The body should stay under ~500 lines (warning), and should not be empty (warning).
- Front matter nested deeper than FRONT_MATTER_MAX_DEPTH is refused before it is built: a hostile
  file (20,000 nested brackets) would otherwise exhaust Python's recursion limit inside the YAML
  loader and stop whoever checks the library, not just this skill.
- The folder holds regular files and folders only: a symbolic link (which could name any host
  file) or a FIFO/device anywhere in it is an error on the field `files`.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

import yaml

__all__ = [
    "BODY_LINES_WARN",
    "DESCRIPTION_MAX",
    "FRONT_MATTER_MAX_DEPTH",
    "NAME_MAX",
    "SKILL_FILE",
    "DuplicateSkillError",
    "Skill",
    "SkillError",
    "SkillProblem",
    "load_skill",
    "validate_skill",
]

SKILL_FILE = "SKILL.md"
NAME_MAX = 64
DESCRIPTION_MAX = 1024
COMPATIBILITY_MAX = 500
BODY_LINES_WARN = 500
FRONT_MATTER_MAX_DEPTH = 32
"""Deepest nesting of mappings/sequences accepted in front matter (fields are strings and small maps)."""
KNOWN_FIELDS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")

_NAME_CHARS = re.compile(r"[a-z0-9-]+")
# One tool per match: a bare name, or a name with a parenthesised pattern that may hold spaces
# (Claude Code's `Bash(git add:*)`); commas and spaces separate tools.
_TOOL = re.compile(r"[^\s,(]+(?:\([^)]*\))?")

Severity = Literal["error", "warning"]
_Report = Callable[..., None]
"""Records a problem: (field, message[, path])."""


@dataclass(frozen=True)
class SkillProblem:
    """One thing wrong with a skill: which file, which field, what was expected."""

    path: Path
    """The file (usually the SKILL.md) or folder the problem is in."""
    field: str
    """The front-matter field (`name`, `description`, ...) or part (`front matter`, `body`, `SKILL.md`)."""
    message: str
    """What was expected and what was found."""
    severity: Severity = "error"
    """`error` makes the skill invalid; `warning` is advice (long body, unknown key)."""

    def __str__(self) -> str:
        tag = "" if self.severity == "error" else " (warning)"
        return f"{self.path}: {self.field}: {self.message}{tag}"


class SkillError(ValueError):
    """A skill (or a library of skills) is invalid; `problems` holds every error found."""

    def __init__(self, problems: SkillProblem | Iterable[SkillProblem]) -> None:
        items = (problems,) if isinstance(problems, SkillProblem) else tuple(problems)
        if not items:
            raise ValueError("SkillError needs at least one problem")
        self.problems: tuple[SkillProblem, ...] = items
        super().__init__("\n".join(str(p) for p in items))

    @property
    def path(self) -> Path:
        """The file of the first problem."""
        return self.problems[0].path

    @property
    def field(self) -> str:
        """The field of the first problem."""
        return self.problems[0].field


class DuplicateSkillError(SkillError):
    """Two skill folders of one library declare the same name; the message names both paths."""


@dataclass(frozen=True)
class Skill:
    """A parsed, valid skill; build it with `load_skill`."""

    name: str
    """The front-matter name (equal to the folder name)."""
    description: str
    """What the skill does and when to use it; agents see this (plus the name) before reading."""
    folder: Path
    """The skill folder (absolute; symbolic links are not resolved)."""
    body: str
    """The Markdown after the closing `---` line, exactly as in the file."""
    license: str | None = None
    """The `license` field, if any."""
    compatibility: str | None = None
    """The `compatibility` field (environment requirements), if any."""
    metadata: Mapping[str, str] = field(default_factory=dict, hash=False)
    """The `metadata` map (string -> string)."""
    allowed_tools: tuple[str, ...] = ()
    """The `allowed-tools` field split into tool names (experimental in the spec)."""
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False)
    """Front-matter keys outside the spec, kept as parsed."""
    has_scripts: bool = False
    """True when the folder holds a `scripts/` directory."""
    has_references: bool = False
    """True when the folder holds a `references/` directory."""

    @property
    def skill_md(self) -> Path:
        return self.folder / SKILL_FILE

    @property
    def n_lines(self) -> int:
        """Lines of the body."""
        return len(self.body.splitlines())

    @property
    def body_sha256(self) -> str:
        """sha256 (hex) of the body's UTF-8 bytes."""
        return hashlib.sha256(self.body.encode("utf-8")).hexdigest()


def validate_skill(folder: str | Path) -> list[SkillProblem]:
    """Every problem of the skill in `folder` (errors and warnings); empty when it is clean."""
    return _parse(Path(folder))[1]


def load_skill(folder: str | Path) -> Skill:
    """The skill in `folder`; raises SkillError listing every error (warnings do not raise)."""
    skill, problems = _parse(Path(folder))
    errors = [p for p in problems if p.severity == "error"]
    if errors or skill is None:
        raise SkillError(errors)
    return skill


def _split_front_matter(text: str) -> tuple[str, str] | str:
    """(front matter, body), or a message saying what is wrong with the delimiters."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return "expected the file to start with a '---' line opening the YAML front matter"
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1 :])
    return "expected a closing '---' line after the YAML front matter"


def _parse(folder: Path) -> tuple[Skill | None, list[SkillProblem]]:
    # abspath, not resolve: a symlinked skill folder is named as such (an error), never as its target.
    folder = Path(os.path.abspath(folder.expanduser()))
    md = folder / SKILL_FILE
    problems: list[SkillProblem] = []

    def error(field_name: str, message: str, path: Path = md) -> None:
        problems.append(SkillProblem(path, field_name, message))

    def warn(field_name: str, message: str, path: Path = md) -> None:
        problems.append(SkillProblem(path, field_name, message, "warning"))

    _check_files(folder, error)
    if folder.is_symlink() or md.is_symlink():
        return None, problems  # (named by _check_files; never read through)
    if not md.is_file():
        error(SKILL_FILE, f"expected a {SKILL_FILE} file in the skill folder", folder)
        return None, problems
    try:
        # utf-8-sig: a byte-order mark from a Windows editor is not part of the '---' line.
        text = md.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        error(SKILL_FILE, f"expected UTF-8 text ({exc.reason} at byte {exc.start})")
        return None, problems
    except OSError as exc:
        error(SKILL_FILE, f"expected a readable file ({exc.strerror or exc})")
        return None, problems
    split = _split_front_matter(text)
    if isinstance(split, str):
        error("front matter", split)
        return None, problems
    raw_front, body = split
    try:
        if _nests_deeper_than(raw_front, FRONT_MATTER_MAX_DEPTH):
            error("front matter", f"expected YAML nested at most {FRONT_MATTER_MAX_DEPTH} levels deep (fields are "
                                  "strings and small maps); this front matter nests deeper")
            return None, problems
        front = yaml.safe_load(raw_front)
    except RecursionError:  # a backstop: the depth check above should make it unreachable
        error("front matter", f"expected YAML nested at most {FRONT_MATTER_MAX_DEPTH} levels deep; "
                              "it is too deeply nested to load")
        return None, problems
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (front matter line {mark.line + 1})" if mark is not None else ""
        reason = getattr(exc, "problem", None) or str(exc)
        error("front matter", f"expected valid YAML{where}: {reason}")
        return None, problems
    if not isinstance(front, dict):
        error("front matter", f"expected a YAML mapping of fields, got {type(front).__name__}")
        return None, problems

    name = _check_name(front, folder.name, error)
    description = _check_description(front, error)
    license_ = _optional_string(front, "license", error)
    compatibility = _optional_string(front, "compatibility", error, max_chars=COMPATIBILITY_MAX)
    metadata = _check_metadata(front, error, warn)
    tools = _check_allowed_tools(front, error)
    extra = {str(k): v for k, v in front.items() if k not in KNOWN_FIELDS}
    for key in extra:
        warn(key, f"not an agentskills field (expected one of {', '.join(KNOWN_FIELDS)}); kept in extra")

    n_lines = len(body.splitlines())
    if not body.strip():
        warn("body", "expected Markdown instructions after the front matter; the body is empty")
    elif n_lines > BODY_LINES_WARN:
        warn("body", f"expected at most ~{BODY_LINES_WARN} lines (move detail to references/), got {n_lines}")
    has = {}
    for sub in ("scripts", "references"):
        path = folder / sub
        has[sub] = path.is_dir()
        if path.exists() and not path.is_dir():
            warn(sub, f"expected {sub}/ to be a directory, found a file", path)

    if any(p.severity == "error" for p in problems) or name is None or description is None:
        return None, problems
    skill = Skill(
        name=name,
        description=description,
        folder=folder,
        body=body,
        license=license_,
        compatibility=compatibility,
        metadata=MappingProxyType(metadata),
        allowed_tools=tools,
        extra=MappingProxyType(extra),
        has_scripts=has["scripts"],
        has_references=has["references"],
    )
    return skill, problems


def _nests_deeper_than(text: str, limit: int) -> bool:
    """Whether YAML `text` nests mappings/sequences more than `limit` deep, read from the parser's
    event stream (a loop, no recursion) before the recursive composer ever sees it."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > limit:
                return True
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
    return False


def _check_files(folder: Path, error: _Report) -> None:
    """A skill holds regular files and folders only. A symbolic link can name any host file, and
    whoever copies or mounts the skill (as root) would hand that file to the agent; a FIFO or device
    blocks or misleads whoever reads it. The skill folder itself may not be a link either: a bench's
    `skills/NAME` linked to a host folder would put that folder at /skills/NAME (the copies refuse it)."""
    if folder.is_symlink():
        error("files", f"the skill folder is a symbolic link to {os.readlink(folder)}: expected a real folder "
                       "(a link can reach any host folder; snapshots and sandboxes refuse it)", folder)
        return
    if not folder.is_dir():
        return
    for current, dirs, files in os.walk(folder):  # does not descend into linked folders
        for name in sorted(dirs + files):
            path = Path(current) / name
            if path.is_symlink():
                error("files", f"symbolic link to {os.readlink(path)}: expected regular files and folders only "
                               "(a link can reach any host file; snapshots and sandboxes refuse it)", path)
            elif not (path.is_dir() or path.is_file()):
                error("files", "expected regular files and folders only, found a FIFO, socket or device", path)


def _check_name(front: dict, folder_name: str, error: _Report) -> str | None:
    if "name" not in front:
        error("name", "required: expected the skill name (the folder name)")
        return None
    name = front["name"]
    if not isinstance(name, str):
        error("name", f"expected a string, got {type(name).__name__} {name!r}")
        return None
    if not name:
        error("name", "expected 1-64 characters, got an empty string")
        return None
    ok = True
    if len(name) > NAME_MAX:
        error("name", f"expected at most {NAME_MAX} characters, got {len(name)}")
        ok = False
    if not _NAME_CHARS.fullmatch(name):
        bad = sorted(set(re.sub(r"[a-z0-9-]", "", name)))
        error("name", f"expected only lowercase letters, digits and hyphens [a-z0-9-], got {name!r} "
                      f"(bad characters: {''.join(bad)!r})")
        ok = False
    if name.startswith("-") or name.endswith("-"):
        error("name", f"expected no leading or trailing hyphen, got {name!r}")
        ok = False
    if "--" in name:
        error("name", f"expected no double hyphen '--', got {name!r}")
        ok = False
    if name != folder_name:
        error("name", f"expected the folder name {folder_name!r}, got {name!r}")
        ok = False
    return name if ok else None


# Its first checks alike in shape to _check_name's; the fields and messages differ.
def _check_description(front: dict, error: _Report) -> str | None:
    if "description" not in front:
        error("description", "required: expected what the skill does and when to use it")
        return None
    text = front["description"]
    if not isinstance(text, str):
        error("description", f"expected a string, got {type(text).__name__}")
        return None
    if not text.strip():
        error("description", "expected a non-empty string")
        return None
    if len(text) > DESCRIPTION_MAX:
        error("description", f"expected at most {DESCRIPTION_MAX} characters, got {len(text)}")
        return None
    return text


def _optional_string(front: dict, key: str, error: _Report, max_chars: int | None = None) -> str | None:
    value = front.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        error(key, f"expected a non-empty string, got {type(value).__name__} {value!r}")
        return None
    if max_chars is not None and len(value) > max_chars:
        error(key, f"expected at most {max_chars} characters, got {len(value)}")
        return None
    return value


def _check_metadata(front: dict, error: _Report, warn: _Report) -> dict[str, str]:
    value = front.get("metadata")
    if value is None:
        return {}
    if not isinstance(value, dict):
        error("metadata", f"expected a map of string keys to string values, got {type(value).__name__}")
        return {}
    out: dict[str, str] = {}
    for key, item in value.items():
        if isinstance(item, (dict, list)):
            error(f"metadata.{key}", f"expected a string value, got {type(item).__name__}")
            continue
        if not isinstance(item, str) or not isinstance(key, str):
            # YAML reads `version: 1.0` as a float; keep it as the string the author meant.
            warn(f"metadata.{key}", f"expected a string value, got {type(item).__name__} {item!r}; kept as text")
        out[str(key)] = item if isinstance(item, str) else str(item)
    return out


def _check_allowed_tools(front: dict, error: _Report) -> tuple[str, ...]:
    value = front.get("allowed-tools")
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(_TOOL.findall(value))
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    error("allowed-tools", f"expected a space-separated string of tool names, got {type(value).__name__}")
    return ()

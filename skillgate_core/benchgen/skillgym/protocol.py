"""Parse the JSON replies of the three roles; a malformed reply raises ReplyError saying what was expected."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from skillgate_core.base.safe_paths import UnsafeNameError, check_relative_path

__all__ = ["FitVerdict", "ReplyError", "ReviewVerdict", "parse_build", "parse_fit", "parse_review"]

_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL)
ISSUE_KINDS = ("leak", "too_strict", "too_weak", "other")


class ReplyError(ValueError):
    """The model's reply is not the JSON object its role must answer with."""


def _json_object(text: str, role: str) -> dict[str, Any]:
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start:end + 1])
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict):
            return data
    raise ReplyError(f"{role}: expected one JSON object in the reply, got {text[:200]!r}")


# Declarations below, not logic: each field documented where it is declared (docs/design.md, Style).
@dataclass(frozen=True)
class FitVerdict:
    fit: bool
    """Whether the skill can support the structure."""
    reason: str
    """Why (kept for skipped tasks)."""


@dataclass(frozen=True)
class ReviewVerdict:
    passed: bool
    """blockingPass."""
    issues: tuple[tuple[str, str], ...]
    """(kind, detail) of every blocking issue."""


def parse_fit(text: str) -> FitVerdict:
    data = _json_object(text, "fit-check")
    if not isinstance(data.get("fit"), bool):
        raise ReplyError(f"fit-check: expected \"fit\": true|false, got {data.get('fit')!r}")
    return FitVerdict(data["fit"], str(data.get("reason", "")))


def parse_build(text: str) -> dict[str, str]:
    data = _json_object(text, "builder")
    files = data.get("files")
    if not isinstance(files, dict) or not files:
        raise ReplyError("builder: expected {\"files\": {path: text, ...}} with at least one file")
    bad = [k for k, v in files.items() if not isinstance(k, str) or not isinstance(v, str)]
    if bad:
        raise ReplyError(f"builder: files[{bad[0]!r}]: expected a string of file text")
    for path in files:  # before anything is written, whatever the round's outcome
        try:
            check_relative_path(path, source="builder reply")
        except UnsafeNameError as exc:
            raise ReplyError(str(exc)) from None
    return dict(files)


def parse_review(text: str) -> ReviewVerdict:
    data = _json_object(text, "reviewer")
    if not isinstance(data.get("blockingPass"), bool):
        raise ReplyError(f"reviewer: expected \"blockingPass\": true|false, got {data.get('blockingPass')!r}")
    issues = []
    for item in data.get("blockingIssues") or []:
        if isinstance(item, dict):
            kind = str(item.get("kind", "other"))
            issues.append((kind if kind in ISSUE_KINDS else "other", str(item.get("detail", ""))))
        else:
            issues.append(("other", str(item)))
    return ReviewVerdict(data["blockingPass"] and not issues, tuple(issues))

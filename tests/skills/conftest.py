"""Builders for the skills tests: small skill trees written into tmp_path; the small real bench
(tests/support/tiny_fixtures.py, registered in tests/conftest.py: built once per session) for the
renamed-slate tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

SkillWriter = Callable[..., Path]


def write_skill(
    root: Path,
    name: str,
    description: str = "A test skill.",
    body: str = "# Steps\n\nDo the thing.\n",
    *,
    folder: str | None = None,
    extra_front: str = "",
    scripts: bool = False,
    references: bool = False,
) -> Path:
    """Write root/<folder or name>/SKILL.md (plus optional scripts/ and references/); return the folder."""
    path = root / (folder or name)
    path.mkdir(parents=True, exist_ok=True)
    front = f"name: {name}\ndescription: {json.dumps(description)}\n{extra_front}"
    (path / "SKILL.md").write_text(f"---\n{front}---\n{body}", encoding="utf-8")
    if scripts:
        (path / "scripts").mkdir(exist_ok=True)
        (path / "scripts" / "run.sh").write_text("#!/bin/sh\necho hi\n")
    if references:
        (path / "references").mkdir(exist_ok=True)
        (path / "references" / "notes.md").write_text("notes\n")
    return path


@pytest.fixture
def make_skill(tmp_path: Path) -> SkillWriter:
    """write_skill rooted at tmp_path / "lib" unless a root is given as `root=`."""

    def make(name: str, *args, root: Path | None = None, **kwargs) -> Path:
        return write_skill(root or tmp_path / "lib", name, *args, **kwargs)

    return make

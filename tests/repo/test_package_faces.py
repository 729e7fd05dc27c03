"""Every module is named in its package's face, so a reader who opens a package's __init__.py sees all of it.

A package's face is its __init__.py: the docstring lists the modules (`name`, name.py or a bare name)
and what each holds, or the face imports them. A module added without a line there is a room nobody
is shown. The library (skillgate_core) and the warehouse keep such faces; the Prefect layers (flows,
tasks) and the CLI describe their layer instead and are not checked.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FACED = ("skillgate_core", "warehouse")
"""The top-level packages whose faces list their modules (every package below them included)."""


def _members(package: Path) -> list[str]:
    """A package's modules and subpackages, by name."""
    modules = [p.stem for p in package.glob("*.py") if p.name != "__init__.py"]
    subpackages = [p.name for p in package.iterdir() if (p / "__init__.py").is_file()]
    return sorted(modules + subpackages)


def unnamed_modules(root: Path, top: tuple[str, ...] = FACED) -> list[str]:
    """`package/__init__.py: module` for every module or subpackage its package's face does not name."""
    found = []
    for name in top:
        for face in sorted((root / name).rglob("__init__.py")):
            if "__pycache__" in face.parts:
                continue
            text = face.read_text(encoding="utf-8")
            found += [f"{face.relative_to(root).as_posix()}: {member}" for member in _members(face.parent)
                      if not re.search(rf"(?<![\w]){re.escape(member)}(?![\w])", text)]
    return found


def test_every_module_is_named_in_its_package_face() -> None:
    found = unnamed_modules(ROOT)
    assert not found, "name each in its package's __init__.py (a docstring line: what it holds):\n" + "\n".join(found)


def test_a_module_missing_from_its_face_is_caught(tmp_path: Path) -> None:
    package = tmp_path / "lib" / "room"
    package.mkdir(parents=True)
    (tmp_path / "lib" / "__init__.py").write_text('"""The library: `room`."""\n')
    (package / "__init__.py").write_text('"""A room.\n\n- `listed`: named here.\n"""\nfrom lib.room.imported import x\n')
    for module in ("listed", "imported", "forgotten", "listed_too_long"):
        (package / f"{module}.py").write_text("x = 1\n")
    (package / "inner").mkdir()
    (package / "inner" / "__init__.py").write_text('"""Inner."""\n')
    assert unnamed_modules(tmp_path, ("lib",)) == [
        "lib/room/__init__.py: forgotten", "lib/room/__init__.py: inner", "lib/room/__init__.py: listed_too_long"]

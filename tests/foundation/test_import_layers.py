"""The library's import layers (pyproject.toml [tool.importlinter]) hold, and a violation is caught."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("lint-imports")
    return subprocess.run([str(exe), "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(cwd)})


def test_skillgate_core_layers_are_kept() -> None:
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_an_upward_import_breaks_the_contract(tmp_path: Path) -> None:
    # A copy of the library where skills (low) imports credit (above it) must be refused.
    shutil.copytree(ROOT / "skillgate_core", tmp_path / "skillgate_core",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    prompt = tmp_path / "skillgate_core" / "skills" / "prompt.py"
    prompt.write_text(prompt.read_text() + "\nfrom skillgate_core.credit import actions as _upward  # noqa\n")
    result = _lint_imports(tmp_path)
    assert result.returncode != 0
    assert "skillgate_core.skills is not allowed to import skillgate_core.credit" in result.stdout

"""`skillgate skills check` and `skillgate skills index`, through the real typer app."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from deployments.cli import app
from skillgate_core.skills import read_index

runner = CliRunner()


def test_check_ok(make_skill, tmp_path: Path) -> None:
    make_skill("alpha")
    make_skill("beta", body="")
    result = runner.invoke(app, ["skills", "check", str(tmp_path / "lib")])
    assert result.exit_code == 0, result.output
    assert "2 skills, 0 invalid" in result.output and "warn" in result.output


def test_check_invalid_and_duplicate(make_skill, tmp_path: Path) -> None:
    make_skill("alpha")
    make_skill("wrong", folder="beta")
    make_skill("alpha", root=tmp_path / "lib" / "copy")
    result = runner.invoke(app, ["skills", "check", str(tmp_path / "lib")])
    assert result.exit_code == 1, result.output
    assert "3 skills, 3 invalid" in result.output
    assert "duplicate" in result.output


def test_check_empty_dir(tmp_path: Path) -> None:
    result = runner.invoke(app, ["skills", "check", str(tmp_path)])
    assert result.exit_code == 1 and "no SKILL.md" in result.output


def test_index_writes_parquet(make_skill, tmp_path: Path, skillgate_home: Path) -> None:
    make_skill("alpha")
    make_skill("beta")
    out = tmp_path / "index.parquet"
    result = runner.invoke(app, ["skills", "index", str(tmp_path / "lib"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert read_index(out)["name"].to_list() == ["alpha", "beta"]
    assert "indexed 2 skills" in result.output
    result = runner.invoke(app, ["skills", "index", str(tmp_path / "lib")])
    assert result.exit_code == 0, result.output
    assert (skillgate_home / "datasets" / "skill_index" / "lib.parquet").is_file()


def test_index_refuses_an_invalid_library(make_skill, tmp_path: Path) -> None:
    make_skill("wrong", folder="beta")
    out = tmp_path / "index.parquet"
    result = runner.invoke(app, ["skills", "index", str(tmp_path / "lib"), "--out", str(out)])
    assert result.exit_code == 1 and "error:" in result.output and not out.exists()

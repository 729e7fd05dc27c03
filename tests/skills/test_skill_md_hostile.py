"""Hostile SKILL.md files are that skill's problem: no crash, and the rest of the library is still checked."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.skillgate_cli import run_skillgate

from skillgate_core.skills import SkillError, load_skill, validate_skill
from skillgate_core.skills.skill_md import FRONT_MATTER_MAX_DEPTH

DEPTH = 20_000


def _deep_skill(root: Path, flow: bool) -> Path:
    folder = root / "deep"
    folder.mkdir(parents=True)
    # [[[[...]]]] (flow) or "- - - - x" (block sequences on one line): one level per two characters
    nested = "[" * DEPTH + "]" * DEPTH if flow else "\n  " + "- " * DEPTH + "x"
    (folder / "SKILL.md").write_text(f"---\nname: deep\ndescription: d\nextra: {nested}\n---\nbody\n")
    return folder


@pytest.mark.parametrize("flow", [True, False], ids=["flow", "block"])
def test_a_20k_deep_front_matter_is_a_problem_of_that_skill(tmp_path: Path, flow: bool) -> None:
    folder = _deep_skill(tmp_path, flow)
    problems = validate_skill(folder)
    assert [(p.field, p.severity) for p in problems] == [("front matter", "error")]
    assert f"at most {FRONT_MATTER_MAX_DEPTH} levels" in problems[0].message
    with pytest.raises(SkillError) as err:
        load_skill(folder)
    assert str(folder / "SKILL.md") in str(err.value)


def test_a_moderately_deep_front_matter_is_refused_too(tmp_path: Path) -> None:
    folder = tmp_path / "nest"
    folder.mkdir()
    nested = "[" * (FRONT_MATTER_MAX_DEPTH + 1) + "]" * (FRONT_MATTER_MAX_DEPTH + 1)
    (folder / "SKILL.md").write_text(f"---\nname: nest\ndescription: d\nextra: {nested}\n---\nbody\n")
    (problem,) = validate_skill(folder)
    assert problem.field == "front matter" and f"at most {FRONT_MATTER_MAX_DEPTH} levels" in problem.message


def test_skills_check_reports_the_deep_skill_and_checks_the_others(make_skill, tmp_path: Path) -> None:
    make_skill("alpha")
    make_skill("beta")
    _deep_skill(tmp_path / "lib", flow=True)
    proc = run_skillgate("skills", "check", str(tmp_path / "lib"), home=tmp_path / "home")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "RecursionError" not in proc.stdout + proc.stderr
    out = " ".join(proc.stdout.split())
    assert "3 skills, 1 invalid" in out and "alpha" in out and "beta" in out
    assert "front matter: expected YAML nested at most" in out

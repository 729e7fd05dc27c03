"""Skills of the suite: valid SKILL.md folders, mechanical procedures, lookalike descriptions that are
similar but at most 0.92 similar to the oracle's, names that never mark the oracle."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from skillgate_core.benchgen import BenchBuildConfig, description_similarity
from skillgate_core.benchgen.similarity import MAX_MISLEADING_SIMILARITY
from skillgate_core.benchgen.skill_plan import plan_skills
from skillgate_core.skills import extract_procedure, load_library, validate_skill


@pytest.fixture(scope="module")
def default_plan():
    return plan_skills(BenchBuildConfig())


def test_similarity_measure_is_the_documented_difflib_ratio():
    assert description_similarity("Exports invoices", "exports   INVOICES") == 1.0
    assert description_similarity("abcd", "wxyz") == 0.0
    # difflib ratio = 2 * matches / total length: "abcd" vs "abxy" share "ab" -> 2*2/8.
    assert description_similarity("abcd", "abxy") == pytest.approx(0.5)


def test_every_lookalike_description_is_similar_but_at_most_0_92(default_plan):
    sims = [description_similarity(s.oracle.description, look.description)
            for s in default_plan for look in s.lookalikes]
    assert len(sims) == 5 * len(default_plan) == 640
    assert max(sims) <= MAX_MISLEADING_SIMILARITY
    assert sum(sims) / len(sims) > 0.5, "lookalikes must look like their oracle"


def test_names_are_unique_and_no_suffix_or_template_marks_the_oracle(default_plan):
    names = [e.name for s in default_plan for e in (s.oracle, *s.lookalikes)]
    assert len(names) == len(set(names)) == 768
    suffix = Counter(s.oracle.name.rsplit("-", 1)[1] for s in default_plan if s.family == "procedural")
    assert len(suffix) >= 4, f"oracle suffixes must vary, got {suffix}"
    held_out = {s.oracle.name for s in default_plan if s.split != "train"}
    assert len(held_out) == 32 and not held_out & {s.oracle.name for s in default_plan if s.split == "train"}


def test_skill_folders_are_valid_and_hold_one_runnable_procedure(small_suite: Path):
    library = load_library(small_suite / "skills")
    assert len(library) == json.loads((small_suite / "suite.json").read_text())["skills"]["total"]
    for skill in library:
        assert [p for p in validate_skill(skill.folder) if p.severity == "error"] == []
        procedure = extract_procedure(skill.skill_md.read_text())
        assert procedure, f"{skill.name}: no ```bash block"
        if skill.has_scripts:
            script = next((skill.folder / "scripts").iterdir()).name
            assert f"/skills/{skill.name}/scripts/{script}" in procedure


def test_front_matter_never_says_which_skill_is_the_oracle(small_suite: Path):
    for skill_md in (small_suite / "skills").glob("*/SKILL.md"):
        front = skill_md.read_text().split("---")[1]
        assert "oracle" not in front and "misleading" not in front
        assert sorted(line.split(":")[0] for line in front.strip().splitlines()) == ["description", "name"]


def test_skill_procedures_are_not_span_mismatches(small_suite):
    """Running a skill's procedure must not look like an unattributable skill read (docs/method.md 4.3):
    an exec whose arguments name a reader command (cat, head, python3, ...) and a /skills/ path that
    is not a SKILL.md would be a span mismatch and reject the whole RL group."""
    from skillgate_core.credit.spans import READER_COMMANDS

    skills = sorted((small_suite / "skills").iterdir())
    procedures = [extract_procedure((s / "SKILL.md").read_text()) for s in skills]
    with_procedure = [(s.name, p) for s, p in zip(skills, procedures, strict=True) if p]
    assert with_procedure
    for name, procedure in with_procedure:
        args = json.dumps({"command": procedure})
        assert not ("/skills/" in args and READER_COMMANDS.search(args)), f"{name}: {procedure!r}"

"""SKILL.md parsing and validation: every rule, alone, with the file and field it names."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from skillgate_core.skills import Skill, SkillError, SkillProblem, load_skill, validate_skill


def errors(folder: Path) -> list[SkillProblem]:
    return [p for p in validate_skill(folder) if p.severity == "error"]


def warnings(folder: Path) -> list[SkillProblem]:
    return [p for p in validate_skill(folder) if p.severity == "warning"]


def only_error(folder: Path, field: str, fragment: str) -> SkillProblem:
    found = errors(folder)
    assert len(found) == 1, found
    assert found[0].field == field
    assert fragment in found[0].message, found[0].message
    return found[0]


def write_raw(folder: Path, text: str | bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    md = folder / "SKILL.md"
    md.write_bytes(text if isinstance(text, bytes) else text.encode())
    return folder


def test_valid_skill_keeps_every_field(make_skill) -> None:
    folder = make_skill(
        "pdf-merge",
        "Merge PDF files. Use when asked to combine PDFs.",
        "# Merge\n\n1. run it\n",
        extra_front=(
            "license: Apache-2.0\ncompatibility: needs qpdf\n"
            "metadata:\n  author: me\n  version: '1.0'\n"
            "allowed-tools: Read Bash(git add:*), Grep\n"
        ),
        scripts=True,
        references=True,
    )
    assert validate_skill(folder) == []
    skill = load_skill(folder)
    assert isinstance(skill, Skill)
    assert (skill.name, skill.description) == ("pdf-merge", "Merge PDF files. Use when asked to combine PDFs.")
    assert skill.license == "Apache-2.0" and skill.compatibility == "needs qpdf"
    assert dict(skill.metadata) == {"author": "me", "version": "1.0"}
    assert skill.allowed_tools == ("Read", "Bash(git add:*)", "Grep")
    assert skill.body == "# Merge\n\n1. run it\n" and skill.n_lines == 3
    assert skill.has_scripts and skill.has_references
    assert skill.folder == folder.resolve() and skill.skill_md == folder.resolve() / "SKILL.md"
    assert skill.body_sha256 == hashlib.sha256(b"# Merge\n\n1. run it\n").hexdigest()


def test_minimal_skill_has_no_optional_parts(make_skill) -> None:
    skill = load_skill(make_skill("tiny"))
    assert skill.license is None and skill.compatibility is None
    assert dict(skill.metadata) == {} and skill.allowed_tools == () and dict(skill.extra) == {}
    assert not skill.has_scripts and not skill.has_references


def test_allowed_tools_as_yaml_list(make_skill) -> None:
    folder = make_skill("tools", extra_front="allowed-tools:\n  - Read\n  - Write\n")
    assert load_skill(folder).allowed_tools == ("Read", "Write")


def test_byte_order_mark_and_crlf_are_accepted(tmp_path: Path) -> None:
    folder = write_raw(tmp_path / "crlf", b"\xef\xbb\xbf---\r\nname: crlf\r\ndescription: d\r\n---\r\nbody\r\n")
    assert validate_skill(folder) == []
    assert load_skill(folder).name == "crlf"


# --- the file and its front matter -------------------------------------------------------------


def test_missing_skill_md(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    problem = only_error(tmp_path / "empty", "SKILL.md", "expected a SKILL.md")
    assert problem.path == (tmp_path / "empty").resolve()


def test_not_utf8(tmp_path: Path) -> None:
    only_error(write_raw(tmp_path / "bin", b"---\nname: bin\n\xff\xfe\n---\n"), "SKILL.md", "expected UTF-8")


def test_no_opening_delimiter(tmp_path: Path) -> None:
    only_error(write_raw(tmp_path / "x", "name: x\ndescription: d\n"), "front matter", "start with a '---'")


def test_no_closing_delimiter(tmp_path: Path) -> None:
    only_error(write_raw(tmp_path / "x", "---\nname: x\ndescription: d\n"), "front matter", "closing '---'")


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    folder = write_raw(tmp_path / "x", "---\nname: x\ndescription: [unclosed\n---\nbody\n")
    problem = only_error(folder, "front matter", "expected valid YAML")
    assert "line" in problem.message


def test_front_matter_must_be_a_mapping(tmp_path: Path) -> None:
    only_error(write_raw(tmp_path / "x", "---\n- a\n- b\n---\nbody\n"), "front matter", "expected a YAML mapping")
    only_error(write_raw(tmp_path / "y", "---\n---\nbody\n"), "front matter", "got NoneType")


# --- name --------------------------------------------------------------------------------------


def test_name_required(tmp_path: Path) -> None:
    only_error(write_raw(tmp_path / "x", "---\ndescription: d\n---\nbody\n"), "name", "required")


def test_name_must_be_a_string(tmp_path: Path) -> None:
    only_error(write_raw(tmp_path / "123", "---\nname: 123\ndescription: d\n---\nb\n"), "name", "expected a string")


def test_name_empty(tmp_path: Path) -> None:
    only_error(write_raw(tmp_path / "x", "---\nname: ''\ndescription: d\n---\nb\n"), "name", "got an empty string")


def test_name_length_limit(make_skill) -> None:
    assert errors(make_skill("a" * 64)) == []
    only_error(make_skill("a" * 65), "name", "at most 64 characters, got 65")


@pytest.mark.parametrize("name", ["Upper", "under_score", "dot.ted", "spa ce", "ünï"])
def test_name_characters(make_skill, name: str) -> None:
    only_error(make_skill(name), "name", "[a-z0-9-]")


@pytest.mark.parametrize("name", ["-lead", "trail-"])
def test_name_leading_or_trailing_hyphen(make_skill, name: str) -> None:
    only_error(make_skill(name), "name", "no leading or trailing hyphen")


def test_name_double_hyphen(make_skill) -> None:
    only_error(make_skill("double--hyphen"), "name", "no double hyphen")


def test_name_must_equal_folder(make_skill) -> None:
    problem = only_error(make_skill("pdf-merge", folder="pdf-tools"), "name", "expected the folder name 'pdf-tools'")
    assert "got 'pdf-merge'" in problem.message


# --- description -------------------------------------------------------------------------------


def test_description_required(tmp_path: Path) -> None:
    only_error(write_raw(tmp_path / "x", "---\nname: x\n---\nbody\n"), "description", "required")


def test_description_must_be_a_string(tmp_path: Path) -> None:
    only_error(write_raw(tmp_path / "x", "---\nname: x\ndescription: [a, b]\n---\nb\n"), "description", "expected a string")


@pytest.mark.parametrize("text", ["", "   "])
def test_description_non_empty(make_skill, text: str) -> None:
    only_error(make_skill("x", text), "description", "non-empty")


def test_description_length_limit(make_skill) -> None:
    assert errors(make_skill("ok", "d" * 1024)) == []
    only_error(make_skill("long", "d" * 1025), "description", "at most 1024 characters, got 1025")


# --- optional fields ---------------------------------------------------------------------------


def test_license_must_be_a_string(make_skill) -> None:
    only_error(make_skill("x", extra_front="license: [MIT]\n"), "license", "non-empty string")


def test_compatibility_length_limit(make_skill) -> None:
    assert errors(make_skill("ok", extra_front=f"compatibility: {'c' * 500}\n")) == []
    only_error(make_skill("x", extra_front=f"compatibility: {'c' * 501}\n"), "compatibility", "at most 500")


def test_metadata_must_be_a_mapping(make_skill) -> None:
    only_error(make_skill("x", extra_front="metadata: [a]\n"), "metadata", "map of string keys")


def test_metadata_nested_value_is_an_error(make_skill) -> None:
    only_error(make_skill("x", extra_front="metadata:\n  deep:\n    a: b\n"), "metadata.deep", "string value")


def test_metadata_number_is_kept_as_text_with_a_warning(make_skill) -> None:
    folder = make_skill("x", extra_front="metadata:\n  version: 1.5\n")
    assert errors(folder) == []
    assert [p.field for p in warnings(folder)] == ["metadata.version"]
    assert dict(load_skill(folder).metadata) == {"version": "1.5"}


def test_allowed_tools_must_be_text(make_skill) -> None:
    only_error(make_skill("x", extra_front="allowed-tools: 3\n"), "allowed-tools", "space-separated string")


def test_unknown_key_is_kept_with_a_warning(make_skill) -> None:
    folder = make_skill("x", extra_front="model: opus\n")
    assert errors(folder) == []
    assert [(p.field, p.severity) for p in warnings(folder)] == [("model", "warning")]
    assert dict(load_skill(folder).extra) == {"model": "opus"}


# --- body and folders --------------------------------------------------------------------------


def test_long_body_warns(make_skill) -> None:
    assert warnings(make_skill("ok", body="line\n" * 500)) == []
    folder = make_skill("long", body="line\n" * 501)
    assert errors(folder) == []
    [problem] = warnings(folder)
    assert problem.field == "body" and "got 501" in problem.message
    assert load_skill(folder).n_lines == 501


def test_empty_body_warns(make_skill) -> None:
    [problem] = warnings(make_skill("x", body="\n  \n"))
    assert problem.field == "body" and "empty" in problem.message


def test_scripts_file_instead_of_folder_warns(make_skill) -> None:
    folder = make_skill("x")
    (folder / "scripts").write_text("not a folder")
    [problem] = warnings(folder)
    assert problem.field == "scripts" and problem.path == folder.resolve() / "scripts"
    assert load_skill(folder).has_scripts is False


# --- all problems at once, and the error type ----------------------------------------------------


def test_validate_returns_every_problem_at_once(tmp_path: Path) -> None:
    folder = write_raw(tmp_path / "Folder", "---\nname: Bad--\ndescription: ''\nlicense: 3\nextra: 1\n---\n")
    fields = sorted(p.field for p in validate_skill(folder))
    assert fields == sorted(["name", "name", "name", "name", "description", "license", "extra", "body"])


def test_skill_error_names_file_field_and_expectation(make_skill) -> None:
    folder = make_skill("wrong-name", folder="right-name")
    with pytest.raises(SkillError) as info:
        load_skill(folder)
    err = info.value
    assert err.path == folder.resolve() / "SKILL.md" and err.field == "name"
    assert str(folder.resolve() / "SKILL.md") in str(err)
    assert "name: expected the folder name 'right-name', got 'wrong-name'" in str(err)
    assert isinstance(err, ValueError)


def test_load_skill_ignores_warnings(make_skill) -> None:
    assert load_skill(make_skill("x", body="", extra_front="other: 1\n")).name == "x"

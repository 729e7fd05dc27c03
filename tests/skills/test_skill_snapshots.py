"""Frozen snapshots: layout, digest, idempotence, and tamper detection naming the file."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from skillgate_core.skills import (
    DuplicateSkillError,
    SkillError,
    SnapshotError,
    load_skill,
    snapshot_digest,
    snapshot_skills,
    verify_snapshot,
)


@pytest.fixture
def sources(make_skill) -> list[Path]:
    a = make_skill("alpha", "First.", scripts=True, references=True)
    os.chmod(a / "scripts" / "run.sh", 0o755)
    b = make_skill("beta", "Second.")
    return [a, b]


def test_layout_manifest_and_digest(sources, tmp_path: Path) -> None:
    snap = snapshot_skills(sources, root=tmp_path / "snaps")
    assert snap.path == tmp_path / "snaps" / snap.digest and snap.names == ("alpha", "beta")
    manifest = json.loads((snap.path / "manifest.json").read_text())
    assert manifest["digest"] == snap.digest and manifest["skills"] == ["alpha", "beta"]
    assert manifest["format"] == "skillgate-skill-snapshot/1"
    files = manifest["files"]
    assert sorted(files) == ["alpha/SKILL.md", "alpha/references/notes.md", "alpha/scripts/run.sh", "beta/SKILL.md"]
    for rel, digest in files.items():
        assert hashlib.sha256((snap.path / rel).read_bytes()).hexdigest() == digest
    canonical = json.dumps(files, sort_keys=True, separators=(",", ":"))
    assert snap.digest == hashlib.sha256(canonical.encode()).hexdigest()
    assert load_skill(snap.path / "alpha").description == "First."
    assert os.access(snap.path / "alpha" / "scripts" / "run.sh", os.X_OK)
    assert verify_snapshot(snap.path, expected_digest=snap.digest) == snap


def test_same_content_same_snapshot_and_no_temp_left(sources, tmp_path: Path) -> None:
    first = snapshot_skills(sources, root=tmp_path / "snaps")
    second = snapshot_skills(list(reversed(sources)), root=tmp_path / "snaps")
    assert first == second
    assert [p.name for p in (tmp_path / "snaps").iterdir()] == [first.digest]
    (sources[1] / "SKILL.md").write_text("---\nname: beta\ndescription: Changed.\n---\nbody\n")
    assert snapshot_skills(sources, root=tmp_path / "snaps").digest != first.digest


def test_default_root_is_the_state_dir(sources, skillgate_home: Path) -> None:
    snap = snapshot_skills(sources)
    assert snap.path == (skillgate_home / "skills" / snap.digest).resolve()


@pytest.fixture
def snap(sources, tmp_path: Path):
    return snapshot_skills(sources, root=tmp_path / "snaps")


def problems_of(path: Path, **kwargs) -> str:
    with pytest.raises(SnapshotError) as info:
        verify_snapshot(path, **kwargs)
    return "\n".join(info.value.problems)


def test_changed_file_is_named(snap) -> None:
    (snap.path / "alpha" / "references" / "notes.md").write_text("tampered\n")
    assert "alpha/references/notes.md: changed" in problems_of(snap.path)


def test_missing_file_is_named(snap) -> None:
    (snap.path / "beta" / "SKILL.md").unlink()
    assert "beta/SKILL.md: missing" in problems_of(snap.path)


def test_extra_file_is_named(snap) -> None:
    (snap.path / "beta" / "conftest.py").write_text("planted\n")
    assert "beta/conftest.py: extra file" in problems_of(snap.path)


def test_planted_symlink_is_named(snap, tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("x")
    (snap.path / "alpha" / "link.txt").symlink_to(tmp_path / "outside.txt")
    assert "alpha/link.txt: symbolic link" in problems_of(snap.path)


def test_edited_manifest_is_caught(snap) -> None:
    manifest_path = snap.path / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    (snap.path / "beta" / "SKILL.md").write_text("---\nname: beta\ndescription: Evil.\n---\nbody\n")
    manifest["files"]["beta/SKILL.md"] = hashlib.sha256((snap.path / "beta" / "SKILL.md").read_bytes()).hexdigest()
    manifest_path.write_text(json.dumps(manifest))
    assert "does not match its file list" in problems_of(snap.path)
    # A consistent rewrite (files, list and digest) passes alone, and is caught by pinning the digest.
    manifest["digest"] = snapshot_digest(manifest["files"])
    manifest_path.write_text(json.dumps(manifest))
    assert verify_snapshot(snap.path).digest == manifest["digest"]
    assert "expected" in problems_of(snap.path, expected_digest=snap.digest)


def test_missing_or_unreadable_manifest(snap) -> None:
    (snap.path / "manifest.json").write_text("{not json")
    assert "manifest.json: unreadable" in problems_of(snap.path)
    (snap.path / "manifest.json").unlink()
    assert "manifest.json: missing" in problems_of(snap.path)


def test_corrupted_existing_snapshot_is_not_reused(sources, snap) -> None:
    (snap.path / "beta" / "SKILL.md").write_text("tampered")
    with pytest.raises(SnapshotError, match="beta/SKILL.md: changed"):
        snapshot_skills(sources, root=snap.path.parent)


def test_bad_inputs_leave_nothing_behind(make_skill, tmp_path: Path) -> None:
    root = tmp_path / "snaps"
    bad = make_skill("bad", folder="other")
    with pytest.raises(SkillError):
        snapshot_skills([bad], root=root)
    one = make_skill("same", root=tmp_path / "a")
    two = make_skill("same", root=tmp_path / "b")
    with pytest.raises(DuplicateSkillError):
        snapshot_skills([one, two], root=root)
    linked = make_skill("linked")
    (linked / "data.txt").symlink_to(one / "SKILL.md")
    with pytest.raises(SnapshotError, match="data.txt: symbolic link"):
        snapshot_skills([linked], root=root)
    with pytest.raises(SnapshotError, match="no skill folders"):
        snapshot_skills([], root=root)
    assert list(root.iterdir()) == []

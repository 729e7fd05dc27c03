"""Frozen skill snapshots: content-addressed copies of skill folders that evaluation can trust.

    snap = snapshot_skills(["lib/pdf-merge", "lib/csv-clean"])   # -> SKILLGATE_HOME/skills/<digest>/
    verify_snapshot(snap.path, expected_digest=snap.digest)       # SnapshotError names any bad file

Layout: `<root>/<digest>/NAME/...` (one folder per skill, so mounting the snapshot at /skills gives
`/skills/NAME/SKILL.md`) plus `manifest.json` = {format, digest, skills, files: {relative path:
sha256}}. The digest is the sha256 of the canonical JSON of `files`, which equals
`digests.path_sha256` of a folder holding only the skill folders. A snapshot is built in a temp
folder beside its target and renamed into place, so a reader never sees half of one; building the
same content twice returns the existing snapshot.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from skillgate_core.base.atomic import atomic_write_json, publish_dir
from skillgate_core.base.config import canonical_json
from skillgate_core.base.digests import file_sha256
from skillgate_core.base.paths import state_layout
from skillgate_core.base.plain_trees import NotPlainTree, copy_plain_tree, plain_tree_problems
from skillgate_core.skills.library import _raise_on_duplicates
from skillgate_core.skills.skill_md import load_skill

__all__ = [
    "MANIFEST_FILE",
    "SNAPSHOT_FORMAT",
    "Snapshot",
    "SnapshotError",
    "snapshot_digest",
    "snapshot_skills",
    "verify_snapshot",
]

MANIFEST_FILE = "manifest.json"
SNAPSHOT_FORMAT = "skillgate-skill-snapshot/1"


class SnapshotError(ValueError):
    """A snapshot cannot be built or does not match its manifest; `problems` names every bad file."""

    def __init__(self, path: Path, problems: Iterable[str]) -> None:
        self.path = Path(path)
        self.problems: tuple[str, ...] = tuple(problems)
        super().__init__(f"{self.path}: " + "; ".join(self.problems))


@dataclass(frozen=True)
class Snapshot:
    """A verified snapshot on disk."""

    path: Path
    """The snapshot folder (`<root>/<digest>`)."""
    digest: str
    """sha256 of the canonical JSON of its file manifest."""
    names: tuple[str, ...]
    """The skills it holds, sorted."""


def snapshot_digest(files: Mapping[str, str]) -> str:
    """sha256 (hex) of the canonical JSON of {relative path: file sha256}."""
    return hashlib.sha256(canonical_json(dict(files)).encode()).hexdigest()


def _scan(folder: Path) -> tuple[dict[str, str], list[str]]:
    """({relative path: sha256} of regular files, problems for anything that is not a plain file)."""
    files: dict[str, str] = {}
    problems: list[str] = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_symlink():
            # A link could point anywhere, so its target is not frozen by the digest.
            problems.append(f"{rel}: symbolic link (a snapshot holds regular files only)")
        elif path.is_file():
            files[rel] = file_sha256(path)
        elif not path.is_dir():
            problems.append(f"{rel}: not a regular file")
    return files, problems


def snapshot_skills(skill_dirs: Iterable[str | Path], root: str | Path | None = None, *,
                    below: str | Path | None = None) -> Snapshot:
    """Copy the skill folders into `<root>/<digest>/` (root: SKILLGATE_HOME/skills by default).

    Each folder must hold a valid skill (SkillError otherwise) and names must be unique
    (DuplicateSkillError). A symbolic link at any level is refused (SnapshotError naming it): inside a
    skill, the skill folder itself, and with `below` (the bench the folders lie in) every folder between
    it and them (the bench's `skills/`).
    """
    base = Path(root) if root is not None else state_layout().skill_snapshots
    base.mkdir(parents=True, exist_ok=True)
    dirs = [Path(d) for d in skill_dirs]
    for d in dirs:  # links first: they are a SnapshotError here (load_skill would call them a SkillError)
        links = plain_tree_problems(d, below=below)
        for link in links:
            if d not in link.path.parents:  # the skill folder itself, or a folder above it: that path is the error
                raise SnapshotError(link.path, [link.why])
        if links:
            raise SnapshotError(d, [f"{link.path.relative_to(d).as_posix()}: {link.why}" for link in links])
    skills = [load_skill(d) for d in dirs]
    if not skills:
        raise SnapshotError(base, ["no skill folders given"])
    _raise_on_duplicates((s.name, s.skill_md) for s in skills)
    tmp = Path(tempfile.mkdtemp(prefix=".snapshot-", dir=base))
    try:
        for skill in skills:
            try:  # a link that raced in since the check is refused too, never followed
                copy_plain_tree(skill.folder, tmp / skill.name)
            except NotPlainTree as exc:
                raise SnapshotError(exc.path, [exc.why]) from None
        # Digest what was copied, not the sources: a source edited mid-copy cannot slip through.
        files, problems = _scan(tmp)
        if problems:
            raise SnapshotError(tmp, problems)
        for skill in skills:
            load_skill(tmp / skill.name)
        digest = snapshot_digest(files)
        names = tuple(sorted(s.name for s in skills))
        manifest = {"format": SNAPSHOT_FORMAT, "digest": digest, "skills": list(names), "files": files}
        atomic_write_json(tmp / MANIFEST_FILE, manifest)
        target = base / digest
        if not target.exists():
            try:
                publish_dir(tmp, target)
            except OSError:
                if not target.is_dir():  # not a concurrent build of the same content: a real failure
                    raise
        # Existing (or just raced in): it must be exactly this content, never silently overwritten.
        return verify_snapshot(target, expected_digest=digest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def verify_snapshot(path: str | Path, expected_digest: str | None = None) -> Snapshot:
    """Check every file against manifest.json; SnapshotError names each changed, missing or extra file.

    With `expected_digest` the manifest itself is pinned too (a consistent rewrite of files and
    manifest would otherwise pass).
    """
    folder = Path(path)
    manifest_path = folder / MANIFEST_FILE
    if not manifest_path.is_file():
        raise SnapshotError(folder, [f"{MANIFEST_FILE}: missing"])
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        recorded: dict[str, str] = dict(manifest["files"])
        digest = str(manifest["digest"])
        names = tuple(manifest["skills"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise SnapshotError(folder, [f"{MANIFEST_FILE}: unreadable ({exc!r})"]) from exc
    found, problems = _scan(folder)
    found.pop(MANIFEST_FILE, None)
    for rel in sorted(recorded.keys() - found.keys()):
        problems.append(f"{rel}: missing")
    for rel in sorted(found.keys() - recorded.keys()):
        problems.append(f"{rel}: extra file not in {MANIFEST_FILE}")
    for rel in sorted(recorded.keys() & found.keys()):
        if recorded[rel] != found[rel]:
            problems.append(f"{rel}: changed (sha256 {found[rel][:12]}..., manifest {recorded[rel][:12]}...)")
    if snapshot_digest(recorded) != digest:
        problems.append(f"{MANIFEST_FILE}: digest {digest[:12]}... does not match its file list")
    if expected_digest is not None and digest != expected_digest:
        problems.append(f"{MANIFEST_FILE}: digest {digest[:12]}..., expected {expected_digest[:12]}...")
    if sorted(names) != sorted({rel.split("/", 1)[0] for rel in recorded}):
        problems.append(f"{MANIFEST_FILE}: skills list {list(names)} does not match its files")
    if problems:
        raise SnapshotError(folder, problems)
    return Snapshot(path=folder, digest=digest, names=tuple(sorted(names)))

"""Folders of regular files read without following a link (base/plain_trees.py): what every copy of a bench's
skill folder goes through. The attacks themselves, through the copies that use it: tests/envs/test_adversarial_skills.py."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from skillgate_core.base.plain_trees import (
    NotPlainTree,
    check_plain_tree,
    check_real_folder,
    copy_plain_tree,
    plain_tree_problems,
)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "bench" / "skills" / "alpha"
    (root / "scripts").mkdir(parents=True)
    (root / "SKILL.md").write_text("# alpha\n")
    (root / "scripts" / "run.py").write_text("print('alpha')\n")
    (root / "scripts" / "run.py").chmod(0o4755)  # set-uid: never carried into a copy
    return root


def test_a_copy_keeps_files_and_modes_but_no_set_id_bit(tree: Path, tmp_path: Path):
    out = copy_plain_tree(tree, tmp_path / "copy", below=tree.parent.parent,
                          rewrite=lambda data: data.replace(b"alpha", b"beta"))
    assert (out / "SKILL.md").read_text() == "# beta\n" and (out / "scripts" / "run.py").read_text() == "print('beta')\n"
    assert stat.S_IMODE((out / "scripts" / "run.py").stat().st_mode) == 0o755


def test_links_and_fifos_are_named_at_every_level_and_never_followed(tree: Path, tmp_path: Path):
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret").write_text("secret\n")
    os.symlink(host / "secret", tree / "scripts" / "notes.md")
    os.mkfifo(tree / "pipe")  # opening it would block a copy that opened it blocking
    problems = plain_tree_problems(tree)
    assert [(p.path, p.why.split(";")[0]) for p in problems] == [
        (tree / "pipe", "not a regular file or folder (a FIFO, socket or device)"),
        (tree / "scripts" / "notes.md", f"symbolic link to {host / 'secret'}")]
    with pytest.raises(NotPlainTree) as err:
        copy_plain_tree(tree, tmp_path / "copy")
    assert err.value.path == tree / "pipe" and not (tmp_path / "copy").exists()
    (tree / "pipe").unlink()
    with pytest.raises(NotPlainTree, match=f"{tree / 'scripts' / 'notes.md'}: symbolic link to {host / 'secret'}"):
        check_plain_tree(tree)


def test_the_folders_above_are_checked_from_below_down(tree: Path, tmp_path: Path):
    bench = tree.parent.parent
    linked = tmp_path / "linked-bench"
    os.symlink(bench, linked)  # `below` itself is the caller's choice: it may be a link
    check_real_folder(linked / "skills" / "alpha", below=linked)
    os.rename(bench / "skills", bench / "real-skills")
    os.symlink(bench / "real-skills", bench / "skills")
    with pytest.raises(NotPlainTree, match=f"{linked / 'skills'}: symbolic link to "):
        check_real_folder(linked / "skills" / "alpha", below=linked)
    check_real_folder(bench / "skills" / "alpha")  # without `below`: the last part only
    with pytest.raises(NotPlainTree, match=f"{bench / 'skills'}: symbolic link"):
        check_plain_tree(bench / "skills")

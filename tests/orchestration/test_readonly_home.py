"""A read-only SKILLGATE_HOME: commands that write say which folder and what to do, without a
traceback; commands that only read an existing state dir keep working."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.skillgate_cli import REPO, run_skillgate


@pytest.fixture
def readonly_home(tmp_path: Path) -> Iterator[Path]:
    """A state dir with a warehouse in it, mounted read-only (root can write through permissions)."""
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root")
    source, home = tmp_path / "source", tmp_path / "home"
    proc = run_skillgate("sql", "select 1", home=source)  # creates the warehouse
    assert proc.returncode == 0, proc.stderr
    home.mkdir()
    mount = subprocess.run(["mount", "--bind", str(source), str(home)], capture_output=True, text=True)
    if mount.returncode != 0:
        pytest.skip(f"bind mounts unavailable here: {mount.stderr.strip()}")
    try:
        remount = subprocess.run(["mount", "-o", "remount,bind,ro", str(home)], capture_output=True, text=True)
        if remount.returncode != 0:
            pytest.skip(f"read-only remount unavailable here: {remount.stderr.strip()}")
        yield home
    finally:
        subprocess.run(["umount", str(home)], check=True)


@pytest.mark.parametrize(
    "args",
    [
        ("warehouse", "reap"),
        ("warehouse", "rebuild"),
        ("skills", "index", str(REPO / "tests" / "skills")),
        ("run", "init-model", "--execute", "init-model.vocab_size=600"),
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_writing_commands_name_the_folder_and_the_fix(readonly_home: Path, args: tuple[str, ...]):
    proc = run_skillgate(*args, home=readonly_home)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    err = " ".join(proc.stderr.split())
    assert f"{readonly_home}" in err and "Read-only file system" in err, err
    assert "set SKILLGATE_HOME to a writable folder" in err, err


def test_a_home_that_cannot_be_created_is_explained(readonly_home: Path):
    proc = run_skillgate("sql", "select 1", home=readonly_home / "sub")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "set SKILLGATE_HOME to a writable folder" in " ".join(proc.stderr.split())


def test_reading_commands_still_work(readonly_home: Path):
    for args in (("warehouse", "status"), ("sql", "select count(*) as n from run"), ("warehouse", "verify")):
        proc = run_skillgate(*args, home=readonly_home)
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr

"""The one folder publisher: build beside, fsync every file, folder and the parent, rename in."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from skillgate_core.base import atomic as atomic_dirs
from skillgate_core.base.atomic import TMP_PREFIX, building_dir, publish_dir


@pytest.fixture
def fsynced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths os.fsync is called on, in order."""
    seen: list[str] = []
    real = os.fsync

    def record(fd: int) -> None:
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(atomic_dirs.os, "fsync", record)
    return seen


def test_a_build_is_fsynced_file_by_file_then_renamed_and_its_parent_fsynced(tmp_path: Path, fsynced: list[str]):
    final = tmp_path / "out" / "model"
    with building_dir(final) as tmp:
        assert tmp.parent == final.parent and tmp.name.startswith(TMP_PREFIX + "model-")
        (tmp / "sub").mkdir()
        (tmp / "sub" / "a.bin").write_bytes(b"a")
        (tmp / "b.txt").write_text("b")
        (tmp / "link").symlink_to("b.txt")
        assert not final.exists()
    assert sorted(p.name for p in final.iterdir()) == ["b.txt", "link", "sub"]
    built = tmp.as_posix()
    assert {f"{built}/b.txt", f"{built}/sub/a.bin", built, f"{built}/sub"} <= set(fsynced)
    assert fsynced[-1] == final.parent.as_posix()  # the rename itself made durable, last
    assert not [p for p in final.parent.iterdir() if p.name.startswith(TMP_PREFIX)]


def test_an_existing_folder_is_refused_unless_replaced_and_a_failed_build_publishes_nothing(tmp_path: Path):
    final = tmp_path / "x"
    with building_dir(final) as tmp:
        (tmp / "v").write_text("1")
    with pytest.raises(FileExistsError):
        with building_dir(final):
            pass
    with pytest.raises(RuntimeError):
        with building_dir(final, replace=True) as tmp:
            (tmp / "v").write_text("2")
            raise RuntimeError("build failed")
    assert (final / "v").read_text() == "1" and sorted(p.name for p in tmp_path.iterdir()) == ["x"]
    with building_dir(final, replace=True) as tmp:
        (tmp / "v").write_text("3")
    assert (final / "v").read_text() == "3" and sorted(p.name for p in tmp_path.iterdir()) == ["x"]


def test_a_failed_rename_puts_the_replaced_folder_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    final, tmp = tmp_path / "x", tmp_path / "new"
    final.mkdir()
    (final / "v").write_text("old")
    tmp.mkdir()
    real = os.rename

    def rename(src, dst):
        if Path(src) == tmp:
            raise OSError("disk full")
        real(src, dst)

    monkeypatch.setattr(atomic_dirs.os, "rename", rename)
    with pytest.raises(OSError, match="disk full"):
        publish_dir(tmp, final, replace=True)
    assert (final / "v").read_text() == "old"


def test_not_durable_skips_the_fsyncs_only(tmp_path: Path, fsynced: list[str]):
    with building_dir(tmp_path / "w", durable=False) as tmp:
        (tmp / "f").write_text("x")
    assert fsynced == [] and (tmp_path / "w" / "f").read_text() == "x"

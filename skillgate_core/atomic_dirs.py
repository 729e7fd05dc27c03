"""Publish a folder atomically: build it under a temp name beside its place, fsync, rename it in.

    with building_dir(final) as tmp:       # tmp: final.parent/.tmp-NAME-PID-RANDOM
        write_everything_into(tmp)
    # here `final` exists, complete and on disk; after an exception nothing was published

    publish_dir(tmp, final, replace=True)  # the last step alone, for a folder built elsewhere

A reader (another process, a listing, `verify`) sees either no folder or the complete one, also
after a crash or a power loss: every file and folder of the build, and then the parent's entry for
the rename, are fsynced. A killed build leaves only its temp folder (`.tmp-` names, which listings
skip; skillgate_core.ownership.atomic.remove_stale_builds deletes those of dead processes).
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["TMP_PREFIX", "building_dir", "fsync_dir", "fsync_tree", "publish_dir", "temp_name"]

TMP_PREFIX = ".tmp-"
"""Names starting with this are builds in progress (or the remains of killed ones)."""


def temp_name(final: Path) -> str:
    """`.tmp-NAME-PID-RANDOM`: a build of `final` by this process (stale once PID is gone)."""
    return f"{TMP_PREFIX}{final.name}-{os.getpid()}-{secrets.token_hex(4)}"


def fsync_dir(path: Path) -> None:
    """fsync a folder itself: makes the entries created, renamed or removed in it durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root: Path) -> None:
    """fsync every file and folder under `root`, so a rename never publishes data still in flight."""
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                continue  # a link has no data of its own; its entry is made durable with its folder
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(Path(dirpath))


def publish_dir(tmp: Path, final: Path, *, replace: bool = False, durable: bool = True) -> Path:
    """Rename the finished folder `tmp` to `final` (same filesystem), after fsyncing it; fsync the parent.

    `final` existing is a FileExistsError unless `replace`: then the old folder is moved aside first,
    put back if the rename fails, and deleted once the new one is in place (readers never see neither).
    `durable=False` skips the fsyncs (still atomic, not crash-safe): only for scratch a process reads
    back at once and deletes soon (see its caller's comment)."""
    if durable:
        fsync_tree(tmp)
    aside = None
    if final.exists() or final.is_symlink():
        if not replace:  # rename() would silently replace an *empty* folder: refuse that too
            raise FileExistsError(str(final))
        aside = final.parent / temp_name(final)
        os.rename(final, aside)
    try:
        os.rename(tmp, final)
    except OSError:
        if aside is not None:
            os.rename(aside, final)
        raise
    if durable:
        fsync_dir(final.parent)
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)
    return final


@contextmanager
def building_dir(final: Path, *, replace: bool = False, durable: bool = True) -> Iterator[Path]:
    """Yield a fresh temp folder beside `final`; on normal exit publish it there (`publish_dir`).

    Without `replace`, an existing `final` is a FileExistsError, checked before the build and again
    at publication. On any exception the temp folder is removed and nothing is published."""
    final.parent.mkdir(parents=True, exist_ok=True)
    if not replace and final.exists():
        raise FileExistsError(str(final))
    tmp = final.parent / temp_name(final)
    tmp.mkdir()
    try:
        yield tmp
        publish_dir(tmp, final, replace=replace, durable=durable)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise

"""Atomic publishing, the one home for it: a file, a JSON record or a folder appears complete or not at all.

    atomic_write_json(path, data)          # temp file beside it, fsync, rename (readers never see half)
    atomic_create_json(path, data)         # the same, exclusive: FileExistsError if `path` exists

    with building_dir(final) as tmp:       # tmp: final.parent/.tmp-NAME-PID-RANDOM
        write_everything_into(tmp)
    # here `final` exists, complete and on disk; after an exception nothing was published

    publish_dir(tmp, final, replace=True)  # the last step alone, for a folder built elsewhere

A reader (another process, a listing, `verify`) sees either no folder or the complete one, also
after a crash or a power loss: every file and folder of the build, and then the parent's entry for
the rename, are fsynced. A killed build leaves only its temp folder (`.tmp-` names, which listings
skip; `remove_stale_builds` deletes those of dead processes).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from skillgate_core.base.processes import pid_exists

__all__ = [
    "TMP_PREFIX", "atomic_create_json", "atomic_write_json", "atomic_write_text", "building_dir", "fsync_dir",
    "fsync_tree", "link_tree", "publish_dir", "read_json", "remove_stale_builds", "stale_builds", "temp_name",
]

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


# Files and JSON records: the same build-beside-then-rename, for one file.
def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write to a temp file in the same directory, fsync, then rename: readers never see half a file."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def atomic_write_json(path: str | os.PathLike[str], data: object) -> Path:
    return atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def atomic_create_json(path: Path, data: Any) -> None:
    """Write `path` complete and only if it does not exist yet (FileExistsError otherwise).

    The JSON goes to a temp file first (fsynced), then `os.link` publishes it: link refuses an
    existing target, so creation is exclusive between processes and never half-written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / temp_name(path)
    try:
        with open(tmp, "x", encoding="utf-8") as fh:
            fh.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _pid_of(tmp: Path) -> int | None:
    try:
        return int(tmp.name.rsplit("-", 2)[-2])
    except (IndexError, ValueError):
        return None


# Alike in shape to stage_workdirs.dead_workdirs, whose owner files name more than a pid.
def stale_builds(parent: Path) -> list[Path]:
    """Temp build folders under `parent` whose creating process is gone (killed or crashed)."""
    if not parent.is_dir():
        return []
    out = []
    for p in sorted(parent.iterdir()):
        if p.name.startswith(TMP_PREFIX) and p.is_dir():
            pid = _pid_of(p)
            if pid is None or not pid_exists(pid):
                out.append(p)
    return out


def remove_stale_builds(parent: Path) -> list[Path]:
    """Delete the stale temp builds under `parent`; returns what was removed."""
    removed = stale_builds(parent)
    for p in removed:
        shutil.rmtree(p, ignore_errors=True)
    return removed


def link_tree(source: Path, target: Path) -> None:
    """Hard-link every file of `source` under `target` (a copy across filesystems): publishing a model
    dir a second time (a stage output, an export of an outside model) costs no disk."""
    for path in sorted(Path(source).rglob("*")):
        dest = Path(target) / path.relative_to(source)
        if path.is_dir():
            dest.mkdir(parents=True, exist_ok=True)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, dest)
        except OSError:
            shutil.copy2(path, dest)

"""Folders of regular files only, read without ever following a symbolic link.

A bench, a task or a skill folder is written by someone else, and it is read (copied, mounted) by
a process that may run as root. A symbolic link anywhere in it, the folder itself included, could
name any host file, and the copy would hand that file's bytes on (into an episode's /skills, and from
there into trajectories and stored rows). So a link is never followed here: at any level it is an
error naming it, and so is a FIFO, socket or device.

    check_plain_tree(bench / "skills" / name, below=bench)    # NotPlainTree naming the first link
    check_real_folder(bench / row["path"], below=bench)       # the path only: a task package's own in-package
                                                              # links are its loader's business
    copy_plain_tree(src, dst, below=src.parent)               # the same rule, kept while copying
    plain_tree_problems(folder)                               # every problem, for checks that list all

`below` is a folder above the tree that the caller chose (the bench it was given): every part of the
path after it, down to the tree's own folder, must be a real folder. Without it only the tree's own
folder (its last part) is checked: its parents are the caller's. The copy opens each folder and file
relative to its parent's descriptor with O_NOFOLLOW, so a link swapped in after the check is refused
too, never followed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["NotPlainTree", "check_plain_tree", "check_real_folder", "copy_plain_tree", "plain_tree_problems"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO someone planted must not hang the copy (fstat then refuses it).
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class NotPlainTree(ValueError):
    """A folder holds (or is) a symbolic link, a FIFO, a socket or a device; `path` names it."""

    def __init__(self, path: Path, why: str) -> None:
        self.path = Path(path)
        self.why = why
        super().__init__(f"{self.path}: {why}")


def _why(path: Path, st: os.stat_result) -> str | None:
    """Why the lstat'ed `path` may not be part of a plain tree (None: a regular file or a folder)."""
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        return (f"symbolic link to {target}; expected regular files and folders only (a link can name any "
                "host file, and it is never followed)")
    if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
        return "not a regular file or folder (a FIFO, socket or device); expected regular files and folders only"
    return None


def _open_root(root: Path, below: Path | None) -> int:
    """A descriptor of `root`, each part after `below` (or only its last part) opened without following."""
    root = Path(os.path.abspath(root))
    if below is None:
        start, parts = root.parent, [root.name]
    else:
        start = Path(os.path.abspath(below))
        try:
            parts = list(root.relative_to(start).parts)
        except ValueError:
            raise ValueError(f"{root} does not lie below {start}") from None
    fd = os.open(start, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # `below` is the caller's choice
    at = start
    try:
        for part in parts:
            at = at / part
            try:
                st = os.stat(part, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                raise FileNotFoundError(f"{at}: no such folder") from None
            why = _why(at, st) or (None if stat.S_ISDIR(st.st_mode) else "not a folder")
            if why:
                raise NotPlainTree(at, why)
            try:
                nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:  # swapped for a link or a file since the stat
                raise NotPlainTree(at, f"could not be opened as a folder without following a link ({exc.strerror})"
                                   ) from None
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


def _walk(root: Path, below: Path | None) -> Iterator[tuple[str, int, str, os.stat_result]]:
    """(relative folder, its descriptor, entry name, lstat of the entry) for every entry under `root`,
    folders before what they hold, names sorted; raises NotPlainTree at the first link or special file."""
    top = _open_root(root, below)
    try:
        for folder, dirs, files, dir_fd in os.fwalk(".", dir_fd=top, follow_symlinks=False):
            dirs.sort()
            rel = os.path.normpath(folder)
            for name in sorted(dirs + files):
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                path = Path(root) / rel / name if rel != "." else Path(root) / name
                why = _why(path, st)
                if why:
                    raise NotPlainTree(path, why)
                yield rel, dir_fd, name, st
    finally:
        os.close(top)


def check_real_folder(path: str | os.PathLike[str], *, below: str | os.PathLike[str] | None = None) -> None:
    """Raise NotPlainTree unless every part of `path` after `below` (without it: its last part) is a real
    folder, not a link (what lies inside is not looked at); FileNotFoundError when a part is missing."""
    os.close(_open_root(Path(path), Path(below) if below is not None else None))


def check_plain_tree(root: str | os.PathLike[str], *, below: str | os.PathLike[str] | None = None) -> None:
    """Raise NotPlainTree naming the first link or special file at or under `root` (module docstring);
    FileNotFoundError when `root` is missing."""
    for _ in _walk(Path(root), Path(below) if below is not None else None):
        pass


def plain_tree_problems(root: str | os.PathLike[str], *,
                        below: str | os.PathLike[str] | None = None) -> list[NotPlainTree]:
    """Every link and special file at or under `root`, in walk order (empty: a plain tree). A link found
    is reported and not entered, and the walk goes on."""
    root, problems = Path(root), []
    try:
        top = _open_root(root, Path(below) if below is not None else None)
    except NotPlainTree as exc:
        return [exc]
    try:
        for folder, dirs, files, dir_fd in os.fwalk(".", dir_fd=top, follow_symlinks=False):
            dirs.sort()
            rel = os.path.normpath(folder)
            for name in sorted(dirs + files):
                path = root / rel / name if rel != "." else root / name
                why = _why(path, os.stat(name, dir_fd=dir_fd, follow_symlinks=False))
                if why:
                    problems.append(NotPlainTree(path, why))
    finally:
        os.close(top)
    return problems


def copy_plain_tree(src: str | os.PathLike[str], dst: str | os.PathLike[str], *,
                    below: str | os.PathLike[str] | None = None,
                    rewrite: Callable[[bytes], bytes] | None = None) -> Path:
    """Copy the plain tree `src` to the new folder `dst` (its parent must exist): NotPlainTree at the first
    link or special file, with `dst` removed again. Each file's permission bits are kept (scripts stay
    executable) but never set-id or sticky bits; `rewrite` maps each file's bytes (a renaming)."""
    src_path, target = Path(src), Path(dst)
    target.mkdir()
    try:
        for rel, dir_fd, name, st in _walk(src_path, Path(below) if below is not None else None):
            out = target / rel / name
            if stat.S_ISDIR(st.st_mode):
                out.mkdir()
                continue
            fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
            with os.fdopen(fd, "rb") as fh:
                if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):  # swapped since the lstat
                    raise NotPlainTree(src_path / rel / name, "not a regular file (changed while copying)")
                data = fh.read()
            out.write_bytes(rewrite(data) if rewrite is not None else data)
            out.chmod(stat.S_IMODE(st.st_mode) & 0o777)
    except BaseException:
        with contextlib.suppress(OSError):
            shutil.rmtree(target)
        raise
    return target

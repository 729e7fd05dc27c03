"""A host folder that stands for an image's filesystem, changed without ever following a symbolic link.

The bubblewrap backend builds a task's initial files (dockerfile_subset.materialize) in a host folder
ROOT standing for the image's `/` (ROOT/app is /app), as root. Links in it come from the task package
(COPY keeps a link a link) and mean something only inside the sandbox: resolved on the host,
`/app/up -> ../../../..` or `/tmp -> /etc` name host files. So every change here walks the image path
one component at a time from a descriptor of ROOT (openat with O_NOFOLLOW), and a link on the way,
or in the place of the file being changed, is an UnsafePath error that names it; nothing is ever
resolved through one. Nobody else writes ROOT while it is built (the sandbox starts afterwards), so
checking a component and then using it cannot race.

    make_dirs(root, "/app/data"); copy_file(root, "/app/data/in.csv", src); touch(root, "/app/x")
    chmod(root, "/app", lambda mode, is_dir: 0o755, recursive=True)
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["UnsafePath", "chmod", "copy_file", "is_dir", "make_dirs", "make_symlink", "touch"]

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20


class UnsafePath(ValueError):
    """An image path that passes through, or would replace, a symbolic link (or a top-level link)."""


def _parts(image_path: str) -> list[str]:
    # normpath of an absolute path leaves no '..' behind: '/../x' is '/x', as in the image.
    return [p for p in posixpath.normpath("/" + image_path.lstrip("/")).split("/") if p]


def _refuse_link(dir_fd: int, name: str, where: str, image_path: str) -> None:
    """UnsafePath when `name` (in dir_fd) is a symbolic link; otherwise return."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(name, dir_fd=dir_fd)
        raise UnsafePath(f"{image_path}: {where} is a symbolic link (to {target}); building the image on "
                         "bubblewrap never goes through a link (the link itself is copied as is)")


@contextlib.contextmanager
def _parent(root: Path, image_path: str, create: bool) -> Iterator[tuple[int, str]]:
    """(descriptor of the folder holding image_path's last component, that component's name)."""
    parts = _parts(image_path)
    if not parts:
        raise UnsafePath(f"{image_path}: expected a path below /")
    fd = os.open(root, _DIR)
    try:
        for i, name in enumerate(parts[:-1]):
            where = "/" + "/".join(parts[: i + 1])
            try:
                nxt = os.open(name, _DIR, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(name, 0o755, dir_fd=fd)
                nxt = os.open(name, _DIR, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    _refuse_link(fd, name, where, image_path)
                    raise NotADirectoryError(errno.ENOTDIR, f"{where} is not a directory", image_path) from exc
                raise
            os.close(fd)
            fd = nxt
        yield fd, parts[-1]
    finally:
        os.close(fd)


def make_dirs(root: Path, image_path: str) -> None:
    """mkdir -p image_path."""
    with _parent(root, image_path, create=True) as (fd, name):
        _refuse_link(fd, name, _norm(image_path), image_path)
        try:
            os.mkdir(name, 0o755, dir_fd=fd)
        except FileExistsError:
            if not stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                raise NotADirectoryError(errno.ENOTDIR, "exists and is not a directory", image_path) from None


def is_dir(root: Path, image_path: str) -> bool:
    """Whether image_path is a directory (a link to one is refused, not followed)."""
    if not _parts(image_path):
        return True
    try:
        with _parent(root, image_path, create=False) as (fd, name):
            _refuse_link(fd, name, _norm(image_path), image_path)
            return stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False


def touch(root: Path, image_path: str) -> None:
    """touch image_path (parents created, as the materialiser always did)."""
    with _parent(root, image_path, create=True) as (fd, name):
        _refuse_link(fd, name, _norm(image_path), image_path)
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644,
                      dir_fd=fd)
        try:
            os.utime(out)
        finally:
            os.close(out)


def copy_file(root: Path, image_path: str, source: Path) -> None:
    """Write a regular file of the build context to image_path (mode and mtime kept, like COPY)."""
    src = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(src)
        if not stat.S_ISREG(st.st_mode):  # a FIFO would block the build forever
            raise UnsafePath(f"{source}: not a regular file (COPY takes files, folders and links)")
        with _parent(root, image_path, create=True) as (fd, name):
            _refuse_link(fd, name, _norm(image_path), image_path)
            out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                          dir_fd=fd)
            try:
                while chunk := os.read(src, _CHUNK):
                    os.write(out, chunk)
                os.fchmod(out, stat.S_IMODE(st.st_mode))
                os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
            finally:
                os.close(out)
    finally:
        os.close(src)


def make_symlink(root: Path, image_path: str, target: str) -> None:
    """Create (or replace a file with) the link image_path -> target, never following anything."""
    parts = _parts(image_path)
    if len(parts) == 1:
        # bubblewrap binds each top-level entry of ROOT into the sandbox, and a bind follows links.
        raise UnsafePath(f"{image_path}: a symbolic link (to {target}) cannot be a top-level folder of the "
                         "image on bubblewrap (its bind would follow the link on the host)")
    with _parent(root, image_path, create=True) as (fd, name):
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            pass
        else:
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(errno.EISDIR, "a directory is in the way of a symbolic link", image_path)
            os.unlink(name, dir_fd=fd)
        os.symlink(target, name, dir_fd=fd)


def chmod(root: Path, image_path: str, new_mode: Callable[[int, bool], int], recursive: bool = False) -> None:
    """Set image_path's mode to new_mode(current mode, is a directory); with `recursive`, everything
    below it too, skipping links (as `chmod -R` does). FileNotFoundError when it does not exist."""
    with _parent(root, image_path, create=False) as (fd, name):
        _refuse_link(fd, name, _norm(image_path), image_path)
        _chmod_at(fd, name, new_mode, recursive)


def _chmod_at(dir_fd: int, name: str, new_mode: Callable[[int, bool], int], recursive: bool) -> None:
    # O_PATH | O_NOFOLLOW opens the entry itself; chmod through /proc/self/fd reaches that inode only.
    fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if stat.S_ISLNK(st.st_mode):
            return  # a link met while recursing: skipped, as chmod -R does
        is_directory = stat.S_ISDIR(st.st_mode)
        os.chmod(f"/proc/self/fd/{fd}", new_mode(stat.S_IMODE(st.st_mode), is_directory))
        if recursive and is_directory:
            sub = os.open(name, _DIR, dir_fd=dir_fd)
            try:
                for entry in sorted(os.listdir(sub)):
                    _chmod_at(sub, entry, new_mode, recursive)
            finally:
                os.close(sub)
    finally:
        os.close(fd)


def _norm(image_path: str) -> str:
    return "/" + "/".join(_parts(image_path))

"""Names and paths that come from outside (a file's rows, an endpoint's reply) before they name a path.

Anything read from a file or a reply is data, never a path of its own choosing: an id becomes one
folder or file name, a relative path stays inside the folder it is written to. Both are checked
before anything is created, and a refusal names where the value came from.

    check_id(row["task_id"], source="rl_train.parquet row 3", field="task_id")   # -> the id, or UnsafeNameError
    check_relative_path("tests/test.sh", source="builder reply")                # -> PurePosixPath
    write_files_inside(folder, {"tests/test.sh": "..."}, executable=lambda rel: rel.endswith(".sh"))

`write_files_inside` checks every path first, then writes through directory file descriptors with
O_NOFOLLOW: a link planted in the folder (or a path that names one) is an error, never followed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath

__all__ = ["NAME_RULE", "UnsafeNameError", "check_id", "check_relative_path", "check_task_row", "is_safe_name",
           "write_files_inside"]

# Ids become folder names: portable, no path separators, no leading dot (so never '.' or '..').
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
NAME_RULE = "1-128 characters from [A-Za-z0-9._-], starting with a letter or digit"
_MAX_PATH_PARTS = 32


class UnsafeNameError(ValueError):
    """An id or a relative path read from a file or a reply would name a path outside its folder."""


def is_safe_name(value: object) -> bool:
    return isinstance(value, str) and _NAME.fullmatch(value) is not None


def check_id(value: object, *, source: str, field: str) -> str:
    """`value` if it is a safe single folder/file name, else UnsafeNameError naming `source` and `field`."""
    if not is_safe_name(value):
        raise UnsafeNameError(f"{source}: {field} {value!r} cannot name a folder: expected {NAME_RULE}")
    assert isinstance(value, str)  # is_safe_name checked it
    return value


def check_relative_path(rel: object, *, source: str) -> PurePosixPath:
    """`rel` as a relative POSIX path that stays inside its folder: no absolute path, no '..', no
    empty, '.'-only or backslash part, no NUL; each part a plain file name (<= 255 bytes)."""
    def refuse(why: str) -> UnsafeNameError:
        return UnsafeNameError(f"{source}: path {rel!r}: {why}; expected a relative path inside the folder")

    if not isinstance(rel, str) or not rel.strip():
        raise refuse("empty or not text")
    if "\0" in rel or "\\" in rel:
        raise refuse("holds a NUL or a backslash")
    if rel.startswith("/"):
        raise refuse("absolute")
    raw_parts = rel.split("/")
    if any(p in ("", ".", "..") for p in raw_parts):
        raise refuse("has an empty, '.' or '..' part")
    if len(raw_parts) > _MAX_PATH_PARTS or any(len(p.encode()) > 255 for p in raw_parts):
        raise refuse(f"too deep (> {_MAX_PATH_PARTS} parts) or a part is too long")
    return PurePosixPath(*raw_parts)


def check_task_row(row: Mapping[str, object], *, source: str, path_field: str = "path") -> Mapping[str, object]:
    """A bench index row (tasks.jsonl, an RL table): its task_id a safe name, its package path
    (`path_field`, when present) relative and inside the bench. Returns the row."""
    check_id(row.get("task_id"), source=source, field="task_id")
    if path_field in row:
        check_relative_path(row[path_field], source=f"{source} field {path_field}")
    return row


def _open_dir(name: str, parent_fd: int, *, create: bool) -> int:
    if create:
        try:
            os.mkdir(name, 0o755, dir_fd=parent_fd)
        except FileExistsError:
            pass
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent_fd)


def write_files_inside(folder: Path, files: Mapping[str, str], *, source: str,
                       executable: Callable[[str], bool] = lambda rel: False) -> list[Path]:
    """Write `files` ({relative path: text}) under `folder` (created if missing; must not be a link).

    Every path is checked (check_relative_path) before anything is written; then each file is
    created fresh (O_CREAT|O_EXCL|O_NOFOLLOW) through directory descriptors that never follow a
    link. Two paths that collide ('a' and 'a/b') or a link met on the way raise UnsafeNameError.
    `executable(rel)` files get mode 0755, the others 0644. Returns the paths written."""
    checked = [(check_relative_path(rel, source=source), rel, text) for rel, text in files.items()]
    bad = [rel for _, rel, text in checked if not isinstance(text, str)]
    if bad:
        raise UnsafeNameError(f"{source}: file {bad[0]!r}: expected text")
    folder.mkdir(parents=True, exist_ok=True)
    root_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    written = []
    try:
        for pure, rel, text in sorted(checked, key=lambda t: t[0].parts):
            fds = [root_fd]
            try:
                for part in pure.parts[:-1]:
                    fds.append(_open_dir(part, fds[-1], create=True))
                mode = 0o755 if executable(rel) else 0o644
                fd = os.open(pure.parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode,
                             dir_fd=fds[-1])
                os.fchmod(fd, mode)  # exactly this mode, whatever the umask
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(text)
            except OSError as exc:
                raise UnsafeNameError(f"{source}: path {rel!r} cannot be written inside {folder}: "
                                      f"{exc.strerror or exc} (a link, or a path that collides with another)") from exc
            finally:
                for fd_ in fds[1:]:
                    os.close(fd_)
            written.append(folder / pure)
    finally:
        os.close(root_fd)
    return written

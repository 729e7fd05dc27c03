"""A damaged warehouse file: tell DuckDB's "this file is broken" errors from the others, and say how
to recover.

The warehouse file holds nothing that is not also in the event archive (ingest.rebuild), so a file that
is truncated, overwritten or fails a block checksum loses no data: `skillgate warehouse rebuild`
replays the archive, then ingests the spool. What must not happen is a raw DuckDB traceback that
never mentions that, or the writer mistaking the damage for a bad event and refusing events. So the
places that open or query the file turn damage into `WarehouseDamaged` (one paragraph naming the
file and the fix); ingest treats it as an error of the machine: events stay pending.

A file DuckDB cannot open for lack of permission (or on a read-only filesystem) is not damage: it
becomes the matching OSError, which the command line explains in terms of SKILLGATE_HOME.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

__all__ = ["WarehouseDamaged", "as_os_error", "damage_named", "is_damage", "warehouse_damaged"]

# How DuckDB 1.x/2.x words a file that is not (or no longer) a readable database.
_DAMAGE_MARKERS = (
    "not a valid duckdb database file",
    "corrupt database file",
    "could not read enough bytes",
    "does not match stored checksum",
    "database file is corrupt",
)
_OS_MARKERS = (("permission denied", errno.EACCES), ("read-only file system", errno.EROFS))


class WarehouseDamaged(RuntimeError):
    """The warehouse file cannot be read as a DuckDB database; the message names it and the fix."""

    def __init__(self, path: Path, detail: str) -> None:
        self.path, self.detail = path, detail
        log_root = path.parent / "warehouse-log"
        super().__init__(
            f"{path}: the warehouse file is damaged and cannot be read (DuckDB: {detail}). Nothing recorded is "
            f"lost: every row was applied from the event archive, and events recorded since wait in the spool "
            f"({log_root}). Rebuild the file from them with `skillgate warehouse rebuild` (the damaged file is "
            f"kept beside it as {path.name}.damaged-TIME)."
        )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def is_damage(exc: BaseException) -> bool:
    """Whether `exc` is DuckDB saying the database file itself is broken."""
    return isinstance(exc, duckdb.Error) and any(m in str(exc).lower() for m in _DAMAGE_MARKERS)


def warehouse_damaged(path: Path, exc: BaseException) -> WarehouseDamaged:
    return WarehouseDamaged(path, _first_line(exc))


@contextmanager
def damage_named(path: Path) -> Iterator[None]:
    """Around queries on the file at `path`: a DuckDB error that is damage to the file (a damaged block
    shows only when a query reads it) leaves as WarehouseDamaged, naming the fix; any other as it is."""
    try:
        yield
    except duckdb.Error as exc:
        if is_damage(exc):
            raise warehouse_damaged(path, exc) from None
        raise


def as_os_error(path: Path, exc: BaseException) -> OSError | None:
    """The OSError (PermissionError, EROFS) a DuckDB open error stands for, if it is one."""
    text = str(exc).lower()
    for marker, code in _OS_MARKERS:
        if isinstance(exc, duckdb.Error) and marker in text:
            return (PermissionError if code == errno.EACCES else OSError)(code, marker.capitalize(), str(path))
    return None

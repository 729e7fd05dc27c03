"""Versioned schema migrations: warehouse/migrations/NNN_name.sql, applied in order, once each.

Each migration runs in its own transaction together with its `schema_version` row, so a file is
either fully applied or not at all. Only the one writer (ingest, rebuild) migrates; readers open
read-only and ask the writer to migrate first when the file is behind (read.py).

A migration is never edited once shipped: a file that has applied it would never see the change.
So the SQL repeats itself where the schema grows (005 rebuilds eval_trial with 001's columns, a
view repeats another's joins), and those repeats stay (`duplicates` lists them).

    migrate(con)            # -> versions applied now, e.g. [1, 2]
    current_version(con)    # -> 2
    LATEST_VERSION          # -> highest NNN shipped with this code
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import duckdb

from skillgate_core.ownership.records import utc_now

__all__ = ["LATEST_VERSION", "MIGRATIONS_DIR", "Migration", "current_version", "migrate", "migrations"]

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
_NAME = re.compile(r"(\d{3})_([a-z0-9_]+)\.sql")


@dataclass(frozen=True)
class Migration:
    """One schema step."""

    version: int
    """NNN of the file name."""
    name: str
    """The rest of the file name."""
    sql: str
    """Its statements."""


@cache
def migrations() -> tuple[Migration, ...]:
    found = []
    for p in sorted(MIGRATIONS_DIR.glob("*.sql")):
        m = _NAME.fullmatch(p.name)
        if not m:
            raise RuntimeError(f"migration file {p.name} is not named NNN_name.sql")
        found.append(Migration(int(m.group(1)), m.group(2), p.read_text(encoding="utf-8")))
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migrations must be numbered 001.. without gaps, found {versions}")
    return tuple(found)


LATEST_VERSION = len(migrations())


def current_version(con: duckdb.DuckDBPyConnection) -> int:
    """The highest applied migration (0 for an empty file)."""
    try:  # cheaper than asking information_schema (~15 ms here) on every ingest
        row = con.execute("select coalesce(max(version), 0) from schema_version").fetchone()
    except duckdb.CatalogException:
        return 0
    return int(row[0]) if row else 0


def migrate(con: duckdb.DuckDBPyConnection) -> list[int]:
    """Apply every migration newer than the file's version; returns the versions applied."""
    have = current_version(con)
    if have > LATEST_VERSION:
        raise RuntimeError(
            f"warehouse schema version {have} is newer than this code knows ({LATEST_VERSION}): upgrade skillgate"
        )
    applied = []
    for m in migrations():
        if m.version <= have:
            continue
        con.execute("begin transaction")
        try:
            con.execute(m.sql)
            con.execute(
                "insert into schema_version values (?, ?, ?::timestamptz)", [m.version, m.name, utc_now()]
            )
            con.execute("commit")
        except BaseException:
            con.execute("rollback")
            raise
        applied.append(m.version)
    return applied

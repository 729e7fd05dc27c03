"""Reading the warehouse: ingest what is pending (best effort), then open read-only with retry.

Several processes may read at once (DuckDB allows many read-only openers). A reader only waits
while an ingest transaction holds the file, which is short by construction (MAX_BATCH files per
transaction), so it retries with backoff instead of failing. If the ingest could not run (another
reader held the file), the result is at most the pending events behind; `QueryResult.pending`
says how many.

    with read_connection() as con:
        con.execute("select count(*) from run").fetchone()
    res = query("select * from experiment_exports(?)", ["exp-1"])
    res.columns, res.rows, res.pending
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import duckdb

from skillgate_core.base.paths import StateLayout, state_layout
from warehouse.damage import WarehouseDamaged, as_os_error, damage_named, is_damage, warehouse_damaged
from warehouse.guard import refuse_in_ray_worker
from warehouse.ingest import ensure_database, ingest, is_lock_error
from warehouse.migrate import LATEST_VERSION, current_version
from warehouse.spool import event_log, list_pending
from warehouse.sql_guard import ReadOnlySqlError, check_read_only, lock_down

__all__ = [
    "QueryResult", "QueryStream", "WarehouseBusy", "WarehouseDamaged", "open_read_only", "query", "query_stream",
    "read_connection", "row_count",
]

log = logging.getLogger(__name__)


class WarehouseBusy(TimeoutError):
    """The warehouse file stayed locked by a writer for longer than the reader would wait."""


@dataclass(frozen=True)
class QueryResult:
    """Rows of one query."""

    columns: tuple[str, ...]
    """Column names."""
    rows: list[tuple[Any, ...]]
    """The rows."""
    pending: int
    """Events still in the spool when the query ran (0: the result is complete)."""

    def dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, r, strict=True)) for r in self.rows]


def _announce_reader(state: StateLayout) -> None:
    marker = event_log(state).reader_waiting
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:  # a read-only state dir: readers simply compete as before
        pass


def open_read_only(state: StateLayout, timeout_s: float) -> duckdb.DuckDBPyConnection:
    """A read-only connection, retried while a writer holds the file (WarehouseBusy after `timeout_s`);
    WarehouseDamaged when the file is not a readable database."""
    deadline = time.monotonic() + timeout_s
    delay = 0.005
    while True:
        try:
            con = duckdb.connect(str(state.warehouse_file), read_only=True)
            con.execute("set TimeZone = 'UTC'")
            return con
        except duckdb.Error as exc:
            if is_damage(exc):
                raise warehouse_damaged(state.warehouse_file, exc) from None
            if not is_lock_error(exc):
                raise as_os_error(state.warehouse_file, exc) or exc from None
            _announce_reader(state)
            if time.monotonic() >= deadline:
                raise WarehouseBusy(
                    f"{state.warehouse_file} stayed locked for {timeout_s} s: {str(exc).splitlines()[0]}"
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.1)


def row_count(con: duckdb.DuckDBPyConnection, table: str) -> int:
    """Rows of `table` (a name from our schema, never user text)."""
    row = con.execute(f"select count(*) from {table}").fetchone()
    assert row is not None  # an aggregate without group by returns exactly one row
    return int(row[0])


@contextmanager
def read_connection(
    state: StateLayout | None = None, *, ingest_first: bool = True, timeout_s: float = 10.0
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection to an up-to-date (as far as possible) warehouse; closed on exit."""
    refuse_in_ray_worker("read")
    state = state or state_layout()
    if ingest_first:
        try:
            ingest(state, lock_wait_s=min(1.0, timeout_s), db_wait_s=min(1.0, timeout_s), budget_s=timeout_s)
        except WarehouseDamaged:  # the open below says so, once, with the fix
            pass
        except Exception as exc:  # reading must not fail because the writer could not run
            log.warning("warehouse: ingest before read failed: %s", exc)
    if not state.warehouse_file.exists():
        ensure_database(state, wait_s=timeout_s)
    con = open_read_only(state, timeout_s)
    try:
        behind = current_version(con) < LATEST_VERSION
    except duckdb.Error as exc:
        con.close()
        if is_damage(exc):
            raise warehouse_damaged(state.warehouse_file, exc) from None
        raise
    if behind:  # an older file: let the writer migrate it first
        con.close()
        ensure_database(state, wait_s=timeout_s)
        con = open_read_only(state, timeout_s)
    try:
        with damage_named(state.warehouse_file):
            yield con
    finally:
        con.close()


@dataclass(frozen=True)
class QueryStream:
    """Rows of one query, fetched as they are read: `batches()` yields lists of at most `batch_rows` rows
    (DuckDB streams the result), so printing 20 million rows never holds them all."""

    columns: tuple[str, ...]
    """Column names."""
    pending: int
    """Events still in the spool when the query ran (0: the result is complete)."""
    cursor: duckdb.DuckDBPyConnection
    """The open result (valid inside `query_stream`'s block only)."""
    batch_rows: int = 10_000
    """Rows fetched at a time."""

    def batches(self) -> Iterator[list[tuple[Any, ...]]]:
        if not self.columns:
            return
        while batch := self.cursor.fetchmany(self.batch_rows):
            yield batch


def _execute(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] | None,
             untrusted: bool) -> duckdb.DuckDBPyConnection:
    check_read_only(con, sql)
    # DuckDB draws a progress bar on stdout for a query still running after 2 s, which a streamed result is
    # while it is read: it would land inside the csv or json being printed
    con.execute("set enable_progress_bar = false")
    if untrusted:
        lock_down(con)
    try:
        return con.execute(sql, list(params) if params is not None else None)
    except duckdb.PermissionException as exc:
        raise ReadOnlySqlError(f"skillgate sql reads only the warehouse: {str(exc).splitlines()[0]}") from None


@contextmanager
def query_stream(
    sql: str,
    params: Sequence[Any] | None = None,
    state: StateLayout | None = None,
    *,
    untrusted: bool = False,
    batch_rows: int = 10_000,
) -> Iterator[QueryStream]:
    """`query`, with the rows read in batches inside the block (QueryStream.batches) instead of all at once."""
    state = state or state_layout()
    with read_connection(state) as con:
        cur = _execute(con, sql, params, untrusted)
        columns = tuple(d[0] for d in cur.description or ())
        yield QueryStream(columns=columns, pending=len(list_pending(event_log(state))), cursor=cur,
                          batch_rows=batch_rows)


def query(
    sql: str,
    params: Sequence[Any] | None = None,
    state: StateLayout | None = None,
    *,
    ingest_first: bool = True,
    untrusted: bool = False,
) -> QueryResult:
    """Run one SELECT (anything else raises ReadOnlySqlError, sql_guard.py).

    untrusted: the statement comes from a user (`skillgate sql`): the connection is also locked so it
    can reach no file, network or extension (see sql_guard.py for why only then).
    """
    state = state or state_layout()
    with read_connection(state, ingest_first=ingest_first) as con:
        cur = _execute(con, sql, params, untrusted)
        columns = tuple(d[0] for d in cur.description or ())
        rows = cur.fetchall() if cur.description else []
    return QueryResult(columns=columns, rows=rows, pending=len(list_pending(event_log(state))))

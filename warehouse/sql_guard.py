"""Someone else's SQL, read-only for real: one SELECT on a connection that can reach nothing but the
warehouse. `warehouse.query` checks every statement here; `skillgate sql` also locks the connection.

A read-only DuckDB connection refuses writes to the database file, but not `COPY ... TO` (a file
anywhere), `EXPORT DATABASE`, `ATTACH` (another database file, created if missing), `INSTALL`/`LOAD`
(downloads and native code), `SET`/`PRAGMA` (settings), `CREATE TEMP ...`, nor `read_text('/etc/…')`
inside a SELECT. Two independent walls:

1. the statement, as DuckDB's own parser classifies it (`extract_statements`), must be exactly one
   SELECT (DESCRIBE, SHOW, SUMMARIZE, FROM-first and VALUES parse as SELECT), or EXPLAIN [ANALYZE]
   of one; anything else is refused with the kind and why;
2. for a statement typed by a user (`query(..., untrusted=True)`, what `skillgate sql` runs) the
   connection itself is locked down before it runs: external access (files, network, extensions)
   off, then `lock_configuration` so the statement cannot turn it back on. DuckDB keeps settings per
   database instance, which a process shares among its connections to one file until the last one
   closes, so this is for a command's one query, not for a notebook that keeps connections open.

    check_read_only(con, "copy (select * from run) to 'x.csv'")
    # ReadOnlySqlError: skillgate sql is read-only: it runs one SELECT ...; got COPY (writes files) ...
"""

from __future__ import annotations

import re

import duckdb

__all__ = ["ALLOWED", "ReadOnlySqlError", "check_read_only", "explain_refusal", "lock_down"]

ALLOWED = ("SELECT", "EXPLAIN")
"""Statement types that may run (EXPLAIN only of a SELECT)."""

_WHY = {
    "COPY": "writes files; print the rows with --format csv or json and redirect them instead",
    "EXPORT": "writes files; print the rows with --format csv or json and redirect them instead",
    "ATTACH": "opens other databases",
    "DETACH": "opens other databases",
    "LOAD": "installs or loads extensions",
    "PRAGMA": "changes settings",
    "SET": "changes settings",
    "VARIABLE_SET": "changes settings",
    "CREATE": "changes the warehouse, which only its writer changes (warehouse/ingest.py)",
    "INSERT": "changes the warehouse, which only its writer changes (warehouse/ingest.py)",
    "UPDATE": "changes the warehouse, which only its writer changes (warehouse/ingest.py)",
    "DELETE": "changes the warehouse, which only its writer changes (warehouse/ingest.py)",
    "DROP": "changes the warehouse, which only its writer changes (warehouse/ingest.py)",
    "ALTER": "changes the warehouse, which only its writer changes (warehouse/ingest.py)",
    "MERGE_INTO": "changes the warehouse, which only its writer changes (warehouse/ingest.py)",
}
_HEAD = "skillgate sql is read-only: it runs one SELECT (or EXPLAIN of one) on the warehouse"
# Comments before EXPLAIN, then EXPLAIN [ANALYZE]: what follows is the statement it explains.
_EXPLAIN = re.compile(r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*explain(?:\s+analy[sz]e)?\b(.*)$", re.I | re.S)


class ReadOnlySqlError(duckdb.PermissionException):
    """A statement that is not one plain query, or a query reaching outside the warehouse; the message
    says which kind and why. A duckdb.Error, so whoever already handles DuckDB's refusals handles it."""


def _kind(statement: duckdb.Statement) -> str:
    return str(statement.type).rsplit(".", 1)[-1]


def explain_refusal(kind: str) -> str:
    return f"{_HEAD}; got {kind}, which {_WHY.get(kind, 'is not a query')}"


def check_read_only(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Raise ReadOnlySqlError unless `sql` is exactly one SELECT (or EXPLAIN of one)."""
    statements = con.extract_statements(sql)  # DuckDB's parser: a syntax error raises ParserException
    if len(statements) != 1:
        raise ReadOnlySqlError(f"{_HEAD}; got {len(statements)} statements: run them one at a time")
    (statement,) = statements
    kind = _kind(statement)
    if kind == "EXPLAIN":
        inner = _EXPLAIN.match(statement.query)
        if inner is None:  # not worth guessing what it explains
            raise ReadOnlySqlError(explain_refusal(kind))
        check_read_only(con, inner.group(1))
        return
    if kind not in ALLOWED:
        raise ReadOnlySqlError(explain_refusal(kind))


def lock_down(con: duckdb.DuckDBPyConnection) -> None:
    """No files, network or extensions beyond the open warehouse, and no way to turn them back on."""
    con.execute("set autoinstall_known_extensions = false")
    con.execute("set autoload_known_extensions = false")
    con.execute("set enable_external_access = false")
    con.execute("set lock_configuration = true")

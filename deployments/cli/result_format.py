"""Rows on the terminal: a table, one block per record (vertical), CSV or JSON.

    print_rows(columns, rows, fmt="auto", title="4 row(s)")

`auto` is a table unless the table would be wider than the terminal (a warehouse row easily has
twenty columns and a 64-character digest); then it is vertical, like psql's \\x:

    -[ row 1 ]--------------
    run_id:        grpo-2
    stage:         grpo
    config_digest: 9b1e04...

csv and json write the values as they are (json: typed, one list of objects), for pipes and scripts;
`write_row_stream` writes them batch by batch, so a query of millions of rows is never held whole.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = ["FORMATS", "Format", "cell_text", "choose_format", "print_rows", "table_width", "write_row_stream"]

Format = Literal["auto", "table", "vertical", "csv", "json"]
FORMATS: tuple[str, ...] = ("table", "vertical", "csv", "json")
"""What --format accepts (leaving it out means auto)."""


# C0 controls but newline and tab, DEL, C1 controls (0x9b is a one-byte CSI): agent text holds them.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` with every terminal control character but newline and tab shown as \\xNN: agent text
    (trajectories, query results) cannot clear the screen, move the cursor, fake lines or links."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def cell_text(value: object) -> str:
    """One value as printable text: '' for NULL, ISO for times, compact JSON for structures."""
    if value is None:
        return ""
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, default=str, separators=(",", ":"))  # ensure_ascii: escapes them itself
    return printable(str(value))


def table_width(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> int:
    """Characters a rich table needs to show every cell unwrapped: each column's widest line, plus
    the borders and one space of padding either side of each cell."""
    widths = [len(c) for c in columns]
    for row in rows:
        for i, value in enumerate(row):
            widths[i] = max(widths[i], max((len(line) for line in cell_text(value).splitlines()), default=0))
    return sum(widths) + 3 * len(widths) + 1


def choose_format(fmt: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]], width: int) -> str:
    """The format to print in: `fmt` when given, else table if it fits in `width` columns, else vertical."""
    if fmt and fmt != "auto":
        return fmt
    return "table" if table_width(columns, rows) <= width else "vertical"


def _vertical(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    pad = max((len(c) for c in columns), default=0)
    blocks = []
    for n, row in enumerate(rows, 1):
        lines = [f"-[ row {n} ]" + "-" * max(3, pad)]
        for col, value in zip(columns, row, strict=True):
            text = cell_text(value).splitlines() or [""]
            lines.append(f"{col + ':':{pad + 1}} {text[0]}".rstrip())
            lines += [f"{'':{pad + 1}} {more}" for more in text[1:]]  # continuation lines stay in the value column
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


def _json_item(columns: Sequence[str], row: Sequence[Any]) -> str:
    """One row as print_rows' json lays it out inside the list (indent 2, one level in)."""
    return "\n".join("  " + line for line in json.dumps(dict(zip(columns, row, strict=True)), default=str,
                                                       indent=2).splitlines())


def write_row_stream(columns: Sequence[str], batches: Iterable[Sequence[Sequence[Any]]], fmt: str,
                     limit: int = 0) -> tuple[int, int]:
    """csv or json of every row of `batches` (at most `limit` written, 0 = all), written as each batch comes:
    the same bytes print_rows writes for the same rows. Returns (rows written, rows in all)."""
    columns = [printable(c) for c in columns]
    written = total = 0
    out = sys.stdout
    w = csv.writer(out) if fmt == "csv" else None
    if w is not None:
        w.writerow(columns)
    for batch in batches:
        total += len(batch)
        room = len(batch) if limit <= 0 else max(0, min(len(batch), limit - written))
        rows = batch[:room]
        if w is not None:
            w.writerows([[cell_text(v) for v in r] for r in rows])
        elif rows:
            out.write(("[\n" if written == 0 else ",\n") + ",\n".join(_json_item(columns, r) for r in rows))
        written += len(rows)
    if fmt == "json":
        out.write("[]\n" if written == 0 else "\n]\n")
    return written, total


def print_rows(columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str | None = None, title: str = "",
               console: Console | None = None) -> str:
    """Print `rows` in `fmt` (None/auto: table or vertical by width); returns the format used."""
    console = console or Console()
    columns = [printable(c) for c in columns]  # a column alias is query text too
    chosen = choose_format(fmt, columns, rows, console.width)
    if chosen == "json":
        print(json.dumps([dict(zip(columns, r, strict=True)) for r in rows], default=str, indent=2))
    elif chosen == "csv":
        w = csv.writer(sys.stdout)
        w.writerow(columns)
        w.writerows([[cell_text(v) for v in r] for r in rows])
    elif chosen == "vertical":
        # plain print: a value is never re-wrapped or styled, so it copies back exactly
        if rows:
            print(_vertical(columns, rows))
        if title:
            print(f"({title})")
    else:
        table = Table(title=title or None)
        for c in columns:
            table.add_column(c, overflow="fold")
        for r in rows:
            table.add_row(*(escape(cell_text(v)) for v in r))
        console.print(table)
    return chosen

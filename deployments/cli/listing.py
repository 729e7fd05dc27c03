"""Listings of things with long ids (`skillgate runs`, `skillgate experiments`): every id on one line.

An id is copied into the next command, so it must never be folded (a GRPO experiment id is ~60
characters, a run id ~35). A table is printed when all its columns fit the terminal unfolded; when
they do not (120 columns are too few for `runs`), one block per row instead: the row's id on a line of
its own, then its short fields packed on lines, then each long field on a line of its own (a list
one item a line).

    print_listing(console, "4 run(s)", ["run", "stage", ...], rows)   # rows: cells as Rich markup
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = ["SHORT_FIELD", "print_listing"]

SHORT_FIELD = 24
"""Cells up to this many characters (one line) share a line in the block layout; longer ones get one each."""


def _width(cell: str) -> int:
    return max((Text.from_markup(line).cell_len for line in cell.split("\n")), default=0)


def _fits(console: Console, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> bool:
    widths = [max([len(c), *(_width(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    return sum(widths) + 3 * len(widths) + 1 <= console.width  # "│ " + cell + " " per column, closing "│"


def print_listing(console: Console, title: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """The rows (first cell: the id) as a table when it fits unfolded, else as blocks (module docstring)."""
    if _fits(console, columns, rows):
        table = Table(title=title)
        for col in columns:
            table.add_column(col, no_wrap=True)
        for row in rows:
            table.add_row(*row)
        console.print(table)
        return
    console.print(title, style="italic", highlight=False)
    for row in rows:
        console.print(f"[bold]{row[0]}[/]", highlight=False, soft_wrap=True)
        short = [f"{name}: {cell}" for name, cell in zip(columns[1:], row[1:], strict=True)
                 if "\n" not in cell and _width(cell) <= SHORT_FIELD]
        line = ""
        for field in short:
            if line and _width(line) + 3 + _width(field) > console.width - 2:
                console.print(f"  {line}", highlight=False)
                line = ""
            line = f"{line} · {field}" if line else field
        if line:
            console.print(f"  {line}", highlight=False)
        for name, cell in zip(columns[1:], row[1:], strict=True):
            if "\n" in cell:  # a list (outputs, evaluations): one item a line, each whole
                console.print(f"  {name}:", highlight=False)
                for item in cell.split("\n"):
                    console.print(f"    {item}", highlight=False, soft_wrap=True)
            elif _width(cell) > SHORT_FIELD:
                console.print(f"  {name}: {cell}", highlight=False, soft_wrap=True)

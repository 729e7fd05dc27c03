"""`skillgate skills check DIR` and `skillgate skills index DIR [--out FILE]`.

check: one row per skill folder under DIR (ok / warn / invalid, with every problem); exit 1 if any
skill is invalid, names repeat, or DIR holds no skill. index: write the library's parquet index
(default SKILLGATE_HOME/datasets/skill_index/<DIR name>.parquet) and print its path and sha256.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from skillgate_core.base.digests import file_sha256
from skillgate_core.base.paths import state_layout
from skillgate_core.skills import (
    SkillError,
    find_skill_dirs,
    load_skill,
    read_index,
    validate_skill,
    write_index,
)

console = Console()
_STYLE = {"ok": "green", "warn": "yellow", "invalid": "bold red"}


def register(app: typer.Typer) -> None:
    skills_app = typer.Typer(help="Check and index skill libraries (folders of SKILL.md).", no_args_is_help=True)

    @skills_app.command("check")
    def check(directory: Path = typer.Argument(..., metavar="DIR", help="skill library root")) -> None:
        """Validate every SKILL.md under DIR: one row per skill, exit 1 if any is invalid."""
        folders = find_skill_dirs(directory)
        if not folders:
            console.print(f"[bold red]no SKILL.md found under {escape(str(directory))}[/]")
            raise typer.Exit(1)
        rows: list[tuple[Path, str, str, str]] = []  # folder, name, status, problems
        for folder in folders:
            try:
                problems = validate_skill(folder)
                errors = [p for p in problems if p.severity == "error"]
                name = folder.name if errors else load_skill(folder).name
            except Exception as exc:  # one unreadable skill is its own row, never the end of the check
                rows.append((folder, folder.name, "invalid", f"SKILL.md: could not be checked ({type(exc).__name__}: {exc})"))
                continue
            status = "invalid" if errors else ("warn" if problems else "ok")
            text = "\n".join(f"{p.field}: {p.message}" + ("" if p.severity == "error" else " (warning)") for p in problems)
            rows.append((folder, name, status, text))
        counts = Counter(name for _, name, status, _ in rows if status != "invalid")
        for i, row in enumerate(rows):
            if row[2] != "invalid" and counts[row[1]] > 1:
                others = [str(r[0]) for r in rows if r[1] == row[1] and r[0] != row[0]]
                rows[i] = (row[0], row[1], "invalid", f"name: duplicate skill name {row[1]!r}: also at {', '.join(others)}")
        table = Table(title=f"skills under {directory}")
        for col in ("skill", "name", "status", "problems"):
            table.add_column(col)
        for folder, name, status, text in rows:
            # lexically, never resolved: a linked skill folder is named as the link it is
            rel = Path(os.path.relpath(folder, directory)).as_posix()
            table.add_row(escape(rel), escape(name), f"[{_STYLE[status]}]{status}[/]", escape(text) or "-")
        console.print(table)
        invalid = sum(r[2] == "invalid" for r in rows)
        console.print(f"{len(rows)} skills, {invalid} invalid")
        if invalid:
            raise typer.Exit(1)

    @skills_app.command("index")
    def index(
        directory: Path = typer.Argument(..., metavar="DIR", help="skill library root"),
        out: Path | None = typer.Option(None, "--out", help="parquet file to write (default: the state dir)"),
    ) -> None:
        """Write the library's parquet index (name, description, path, digests, line counts)."""
        target = out or state_layout().datasets / "skill_index" / f"{Path(directory).resolve().name}.parquet"
        try:
            write_index(directory, target)
        except SkillError as exc:
            for problem in exc.problems:
                console.print(f"[bold red]error:[/] {escape(str(problem))}", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from exc
        n = read_index(target).height
        console.print(f"indexed {n} skills -> {target}\nsha256 {file_sha256(target)}", highlight=False)

    app.add_typer(skills_app, name="skills")

"""`skillgate doctor`."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from deployments.cli.doctor import run_checks
from skillgate_core.base.paths import default_home

_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red"}


def register(app: typer.Typer) -> None:
    @app.command()
    def doctor() -> None:
        """Check packages, torch device, docker, bubblewrap, Prefect API, warehouse and disk."""
        rows = run_checks()
        table = Table(title="skillgate doctor")
        for col in ("check", "status", "found", "fix"):
            table.add_column(col)
        for r in rows:
            table.add_row(r.name, f"[{_STYLE[r.status]}]{r.status}[/]", r.detail, r.fix)
        Console().print(table)
        if any(r.status == "fail" for r in rows):
            raise typer.Exit(1)

    @app.command()
    def where() -> None:
        """Print the state dir (warehouse, experiments, datasets, Prefect home) and which rule chose it."""
        home, rule = default_home()
        print(home)
        Console(stderr=True).print(f"[dim]chosen by: {rule} (set SKILLGATE_HOME to move it; the current "
                                   "directory never matters)[/]")

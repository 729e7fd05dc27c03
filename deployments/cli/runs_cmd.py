"""`skillgate runs [--stage S] [--status S] [--limit N] [--json]`: recent stage runs from the warehouse.

    skillgate runs                           # the 20 latest: run id, stage, status, trigger, started, seconds,
                                             # experiment, outputs (role=digest prefix)
    skillgate runs --stage collect --status completed --limit 5
    skillgate runs --json                    # everything, with full digests and output paths

Every id and digest it prints is something `skillgate lineage` takes (a digest by its first 12
characters too). `skillgate experiments` lists the experiment folders instead.
"""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.markup import escape

from deployments.cli.listing import print_listing

__all__ = ["register"]

console = Console()
SHORT_DIGEST = 12
"""Characters of a digest shown in the table (a unique prefix `skillgate lineage` resolves)."""


def _seconds(value: float | None, status: str) -> str:
    if value is None:
        return "-" if status != "running" else "running"
    return f"{value:.1f}"


def _outputs(run: dict) -> str:
    parts = [f"{o['role']}={o['sha256'][:SHORT_DIGEST]}" for o in run["outputs"]]
    if run.get("outputs_from"):
        parts.append(f"(from {run['outputs_from']})")
    return "\n".join(parts) or "none"


def register(app: typer.Typer) -> None:
    @app.command()
    def runs(
        stage: str = typer.Option(None, "--stage", help="only runs of this stage"),
        status: str = typer.Option(None, "--status", help="only runs with this status: running, completed, failed, "
                                   "interrupted, cancelled"),
        limit: int = typer.Option(20, "--limit", help="at most this many, newest first (0: all)"),
        as_json: bool = typer.Option(False, "--json", help="print the runs as JSON (full digests and paths)"),
    ) -> None:
        """List recent stage runs: id, stage, status, trigger, start, seconds, experiment and outputs."""
        from warehouse import read_connection
        from warehouse.runs import RUN_STATUSES, recent_runs

        if status is not None and status not in RUN_STATUSES:
            raise typer.BadParameter(f"expected one of {', '.join(RUN_STATUSES)}, got {status!r}",
                                     param_hint="--status")
        with read_connection() as con:
            rows = recent_runs(con, stage=stage, status=status, limit=limit)
        if as_json:
            print(json.dumps(rows, default=str, indent=2))
            return
        what = " ".join(filter(None, [status, stage]))
        cells = []
        for r in rows:
            style = {"completed": "green", "running": "yellow"}.get(r["status"], "bold red")
            status_text = f"[{style}]{r['status']}[/]" + (" (reused)" if r["reused"] else "")
            cells.append([escape(r["run_id"]), escape(r["stage"]), status_text, r["trigger"],
                          r["started_at"].strftime("%Y-%m-%d %H:%M:%S"), _seconds(r["seconds"], r["status"]),
                          escape(r["experiment_id"] or "none"), escape(_outputs(r))])
        print_listing(console, f"{len(rows)} {what + ' ' if what else ''}run(s), newest first",
                      ["run", "stage", "status", "trigger", "started (UTC)", "seconds", "experiment", "outputs"], cells)
        if not rows and (stage or status):
            console.print("[dim]nothing matches; `skillgate runs` without filters lists every stage's runs[/]")

"""`skillgate experiments [ID] [--json]`: what the experiment folders hold, read from them now.

    skillgate experiments                  # one line per experiment: segments, latest checkpoint, exports
    skillgate experiments grpo-... --json  # one experiment in full (segments, checkpoints, exports, evals)

Nothing is cached: the listing is derived from the folders when asked (ownership.describe_experiments).
The same facts are in the warehouse: `skillgate sql "select * from v_segment where experiment_id = ..."`.
"""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from deployments.cli.listing import print_listing
from deployments.cli.result_format import printable

__all__ = ["register"]

console = Console()


def register(app: typer.Typer) -> None:
    @app.command()
    def experiments(
        experiment_id: str = typer.Argument(None, metavar="[EXPERIMENT_ID]", help="show only this experiment"),
        as_json: bool = typer.Option(False, "--json", help="print everything as JSON"),
    ) -> None:
        """List the experiments under SKILLGATE_HOME/experiments: segments, checkpoints, exports, evaluations."""
        from skillgate_core.base.paths import state_layout
        from skillgate_core.ownership import BadRecord, OwnershipError, describe_experiments, experiments_root

        errors = Console(stderr=True, soft_wrap=True)
        bad: list[BadRecord] = []
        try:
            listing = describe_experiments(experiments_root(state_layout()), experiment_id, on_bad=bad.append)
        except OwnershipError as exc:
            errors.print(f"[bold red]error:[/] {escape(printable(str(exc)))}", highlight=False)
            raise typer.Exit(1) from None
        if as_json:
            print(json.dumps(listing, indent=2))
        else:
            _print_table(listing)
        for b in bad:  # one bad file is named and left out; the rest is listed (exit 1 all the same)
            errors.print(f"[bold yellow]skipped:[/] {escape(printable(str(b.path)))}: {escape(printable(b.problem))}",
                         highlight=False)
        if bad:
            raise typer.Exit(1)


def _print_table(listing: dict[str, dict[str, Any]]) -> None:
    cells = []
    for eid, e in listing.items():
        segs = e["segments"]
        last = segs[-1] if segs else None
        seg_text = f"{len(segs)}" + (f" (last: {last['run_name']}, {last['exit_reason'] or 'running'})" if last else "")
        ckpt = e["checkpoints"][-1] if e["checkpoints"] else None
        cells.append([escape(eid), escape(e["algorithm"]), escape(seg_text),
                      f"step {ckpt['step']} ({escape(ckpt['run_name'])})" if ckpt else "none",
                      escape("\n".join(x["export_id"] for x in e["exports"]) or "none"),
                      # each as `traj show` / `lineage` take it (a bare name also resolves when unique)
                      escape("\n".join(f"{eid}/{v['eval_id']} ({v['status']})" for v in e["evals"]) or "none")])
    print_listing(console, f"{len(listing)} experiment(s)",
                  ["experiment", "algorithm", "segments", "latest checkpoint", "exports", "evaluations"], cells)
    if listing:
        console.print("[dim]resume one: skillgate run rl-train --execute --resume EXPERIMENT_ID grpo.steps=N[/]")

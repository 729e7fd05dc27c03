"""`skillgate recipes`, `skillgate show RECIPE`, `skillgate run RECIPE [--execute] [--resume EXPERIMENT_ID] [k=v ...]`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from deployments import RECIPES_DIR
from skillgate_core.base.config import config_digest, config_to_dict, field_docs
from skillgate_core.base.config_ranges import field_ranges
from skillgate_core.pipeline.recipes import find_recipe, list_recipes, plan_recipe, resolve_recipe

console = Console()


def _plan_table(resolved, outlook) -> Table:
    title = f"plan of recipe '{resolved.name}' ({resolved.recipe.source.name})"
    if resolved.selection:
        title += f" {resolved.selection.describe()}"
    table = Table(title=title)
    # No "code: built" column: every shipped stage has its code, so it said "built" on every row (read as
    # "output built"); a stage without code says so in its note ("not built yet (...)", recipe_plan).
    for col in ("#", "stage", "output", "inputs", "note"):
        table.add_column(col)
    for i, row in enumerate(plan_recipe(resolved), 1):
        wiring = ", ".join(f"{r} <- {src}" + (f" [dim](found: {row.found[r]})[/]" if r in row.found else "")
                           for r, src in row.inputs.items())
        if row.missing:
            wiring += (", " if wiring else "") + ", ".join(f"[red]{r} <- ?[/]" for r in row.missing if r not in row.inputs)
        name = row.entry + (f" [cyan](added: builds {row.added_for})[/]" if row.added_for else "")
        o = outlook[row.entry]
        output = "[green]on record: reused[/]" if o.reused else f"[yellow]will compute[/] [dim]({escape(o.why)})[/]"
        note = escape(row.note) if row.built else f"[yellow]{escape(row.note)}[/]"
        table.add_row(str(i), name, output, wiring or "-", note)
    return table


def _say_what_overrides_recompute(resolved, changed: dict[str, str], outlook) -> None:
    """One line per override that changes a stage's config: that stage and everything downstream recompute."""
    from deployments.cli.run_fast import downstream_of

    for entry, overrides in changed.items():
        after = [e for e in downstream_of(resolved, {entry}) if not outlook[e].reused]
        then = f"; downstream, {len(after)} more recompute: {', '.join(after)}" if after else ""
        console.print(f"[yellow]{escape(overrides)}[/] changes {entry}'s config: {entry} computes anew{then}",
                      highlight=False)


def _split(values: list[str] | None) -> list[str]:
    return [v for item in values or [] for v in item.split(",") if v]


def register(app: typer.Typer) -> None:
    @app.command()
    def recipes() -> None:
        """List the recipe catalog, with the inputs each recipe is missing."""
        table = Table(title=f"recipes ({RECIPES_DIR})")
        catalog = list_recipes(RECIPES_DIR)
        # A name is what the user types next: never cut it; the other columns wrap around it.
        table.add_column("name", no_wrap=True, min_width=max((len(r.name) for r in catalog), default=4))
        for col in ("stages", "description", "takes from outside"):
            table.add_column(col, overflow="fold")
        for recipe in catalog:
            plan = plan_recipe(resolve_recipe(recipe))
            outside = sorted({m for p in plan for m in p.missing if p.built})
            how = f"newest on record, else built by '{recipe.upstream}'" if recipe.upstream else "newest on record"
            notes = f"{', '.join(outside)} ({how})" if outside else "[green]nothing[/]"
            table.add_row(recipe.name, " > ".join(recipe.stages), escape(recipe.description), notes)
        console.print(table)

    # Declarations, not logic, like each command here: typer reads the options from the signature.
    @app.command()
    def show(
        recipe: str = typer.Argument(..., help="recipe name or path to a .toml"),
        overrides: list[str] = typer.Argument(None, help="STAGE.KEY=VALUE overrides"),
        as_json: bool = typer.Option(False, "--json", help="print the resolved config as JSON"),
    ) -> None:
        """Print a recipe's resolved config (every value, its doc, and the config digests)."""
        resolved = resolve_recipe(find_recipe(recipe, RECIPES_DIR), overrides or [])
        if as_json:
            data = {s: resolved.config_json(s) for s in resolved.recipe.stages}
            print(json.dumps({"recipe": resolved.name, "digest": resolved.digest(), "stages": data}, indent=2))
            return
        console.print(f"[bold]{resolved.name}[/]: {resolved.recipe.description}")
        console.print(f"source: {resolved.recipe.source}\nrecipe digest: {resolved.digest()}")
        for stage in resolved.recipe.stages:
            cfg = resolved.configs[stage]
            if isinstance(cfg, Mapping):
                console.print(f"\n[bold]{stage}[/] [yellow](not built yet: values not validated)[/] {dict(cfg)}")
                continue
            table = Table(title=f"{stage}  ({type(cfg).__name__}, digest {config_digest(cfg)[:16]})")
            for col in ("key", "value", "meaning"):
                table.add_column(col)
            cls: type = type(cfg)  # annotated: mypy does not take type[Any] as Hashable (for @cache)
            docs, ranges = field_docs(cls), field_ranges(cls)
            for key, value in config_to_dict(cfg).items():
                allowed = f" ({ranges[key].describe()})" if key in ranges else ""
                table.add_row(key, json.dumps(value), docs.get(key, "") + allowed)
            console.print(table)

    @app.command()
    def run(
        recipe: str = typer.Argument(..., help="recipe name or path to a .toml"),
        overrides: list[str] = typer.Argument(None, help="STAGE.KEY=VALUE overrides, inputs.ROLE=PATH"),
        execute: bool = typer.Option(False, "--execute", help="run it (default: print the plan only)"),
        trigger: str = typer.Option("cli", help="recorded trigger: cli, schedule, ui, test"),
        resume: str = typer.Option("", "--resume", metavar="EXPERIMENT_ID",
                                   help="continue this experiment from its latest checkpoint (sets grpo.resume_experiment)"),
        only: list[str] = typer.Option(None, "--only", metavar="STAGE",
                                       help="run only this stage (repeat or comma-separate); inputs from the warehouse or inputs.ROLE="),
        start: str = typer.Option("", "--from", metavar="STAGE", help="start at this stage"),
        until: str = typer.Option("", "--until", metavar="STAGE", help="stop after this stage"),
    ) -> None:
        """Dry run by default: print the plan of stages. With --execute, run the `skillgate` flow."""
        from deployments.cli.run_fast import all_reused, changed_by_overrides, plan_outlook
        from flows.run_plan import plan_run
        from skillgate_core.base.paths import default_home

        home, rule = default_home()
        resolved = plan_run(recipe, list(overrides or []), trigger=trigger, resume=resume, only=_split(only),
                            start=start, until=until)
        changed = {}
        if overrides:  # the same run without them: which stages do they change?
            baseline = plan_run(recipe, [], trigger=trigger, resume=resume, only=_split(only), start=start,
                                until=until)
            changed = changed_by_overrides(resolved, baseline)
        outlook = plan_outlook(resolved, changed)
        console.print(_plan_table(resolved, outlook))
        _say_what_overrides_recompute(resolved, changed, outlook)
        for entry, keys in resolved.left_out.items():
            console.print(f"{entry}: the recipe's {', '.join(keys)} left out (unused with these overrides)",
                          highlight=False)
        console.print(f"[dim]state dir: {home} ({rule})[/]")
        if resume:
            console.print(f"resume: {escape(resume)} (a resume always trains: never reused)")
        if not execute:
            console.print("[dim]dry run: add --execute to run it[/]")
            return
        reused = all_reused(outlook)
        result: dict[str, Any]
        if reused is not None:  # the common re-run: nothing to compute, so no Prefect server to start
            result = {"recipe": resolved.name, "digest": resolved.digest(), "stages": reused}
            console.print("[green]up to date[/]: every stage of this plan has a finished identical run; nothing ran "
                          "(no Prefect flow run started)")
        else:
            from prefect import tags

            from deployments.cli.interrupts import stop_on_interrupt
            from flows.skillgate import RECIPE_TAG_PREFIX, skillgate
            from flows.temporary_server import kill_temporary_servers, shield_from_terminal_interrupt

            shield_from_terminal_interrupt()  # the first Ctrl-C must leave the server to record the stop
            with stop_on_interrupt(console, "the run: the running stage with its sandboxes and Ray workers, "
                                   "then the Prefect server", force=kill_temporary_servers), \
                    tags(RECIPE_TAG_PREFIX + resolved.name):
                result = skillgate(recipe=recipe, overrides=list(overrides or []), trigger=trigger, resume=resume,
                                   only=_split(only), start=start, until=until)
        table = Table(title=f"result of '{resolved.name}' (digest {result['digest'][:16]})")
        for col in ("stage", "status", "run id", "outputs"):
            table.add_column(col)
        for entry, res in result["stages"].items():
            detail = "\n".join(f"{r}: {p}  [dim]sha256 {res['output_digests'][r][:12]}[/]"
                                for r, p in res.get("outputs", {}).items())
            style = {"completed": "green", "reused": "green"}.get(res["status"], "red")
            table.add_row(entry, f"[{style}]{res['status']}[/]", res.get("run_id") or "-", detail)
        console.print(table)
        from deployments.cli.run_fast import print_report_and_lineage

        print_report_and_lineage(console, result)

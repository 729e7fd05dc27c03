"""`skillgate recipes`, `skillgate show RECIPE`, `skillgate run RECIPE [--execute] [--resume EXPERIMENT_ID] [k=v ...]`."""

from __future__ import annotations

import json
from collections.abc import Mapping

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from deployments import RECIPES_DIR
from skillgate_core.config import config_digest, config_to_dict, field_docs
from skillgate_core.config_ranges import field_ranges
from skillgate_core.recipes import find_recipe, list_recipes, plan_recipe, resolve_recipe, resume_overrides

console = Console()


def _plan_table(resolved) -> Table:
    table = Table(title=f"plan of recipe '{resolved.name}' ({resolved.recipe.source.name})")
    for col in ("#", "stage", "built", "inputs", "note"):
        table.add_column(col)
    for i, row in enumerate(plan_recipe(resolved), 1):
        wiring = ", ".join(f"{r} <- {src}" for r, src in row.inputs.items())
        if row.missing:
            wiring += (", " if wiring else "") + ", ".join(f"[red]{r} <- ?[/]" for r in row.missing if r not in row.inputs)
        table.add_row(str(i), row.stage, "yes" if row.built else "[yellow]no[/]", wiring or "-", escape(row.note))
    return table


def register(app: typer.Typer) -> None:
    @app.command()
    def recipes() -> None:
        """List the recipe catalog, with the inputs each recipe is missing."""
        table = Table(title=f"recipes ({RECIPES_DIR})")
        for col in ("name", "stages", "description", "missing inputs / not built"):
            table.add_column(col)
        for recipe in list_recipes(RECIPES_DIR):
            plan = plan_recipe(resolve_recipe(recipe))
            missing = sorted({f"{m} (for {p.stage})" for p in plan for m in p.missing if p.built})
            unbuilt = [p.stage for p in plan if not p.built]
            notes = "; ".join(filter(None, [", ".join(missing), f"not built: {', '.join(unbuilt)}" if unbuilt else ""]))
            table.add_row(recipe.name, " > ".join(recipe.stages), escape(recipe.description), escape(notes) or "[green]ready[/]")
        console.print(table)

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
            docs, ranges = field_docs(type(cfg)), field_ranges(type(cfg))
            for key, value in config_to_dict(cfg).items():
                allowed = f" ({ranges[key].describe()})" if key in ranges else ""
                table.add_row(key, json.dumps(value), docs.get(key, "") + allowed)
            console.print(table)

    @app.command()
    def run(
        recipe: str = typer.Argument(..., help="recipe name or path to a .toml"),
        overrides: list[str] = typer.Argument(None, help="STAGE.KEY=VALUE overrides"),
        execute: bool = typer.Option(False, "--execute", help="run it (default: print the plan only)"),
        trigger: str = typer.Option("cli", help="recorded trigger: cli, schedule, ui, test"),
        resume: str = typer.Option("", "--resume", metavar="EXPERIMENT_ID",
                                   help="continue this experiment from its latest checkpoint (sets grpo.resume_experiment)"),
    ) -> None:
        """Dry run by default: print the plan of stages. With --execute, run the `skillgate` flow."""
        found = find_recipe(recipe, RECIPES_DIR)
        extra = resume_overrides(found, resume) if resume else []
        resolved = resolve_recipe(found, [*(overrides or []), *extra])
        console.print(_plan_table(resolved))
        if resume:
            console.print(f"resume: {', '.join(escape(e) for e in extra)} (a resume always trains: never reused)")
        if not execute:
            console.print("[dim]dry run: add --execute to run it[/]")
            return
        from flows.skillgate import skillgate

        result = skillgate(recipe=recipe, overrides=list(overrides or []), trigger=trigger, resume=resume)
        table = Table(title=f"result of '{resolved.name}' (digest {result['digest'][:16]})")
        for col in ("stage", "status", "outputs / note"):
            table.add_column(col)
        for stage, res in result["stages"].items():
            detail = res.get("note") or ", ".join(f"{r}: {p}" for r, p in res.get("outputs", {}).items())
            style = {"completed": "green", "reused": "green", "not-built": "yellow"}.get(res["status"], "red")
            table.add_row(stage, f"[{style}]{res['status']}[/]", escape(detail))
        console.print(table)

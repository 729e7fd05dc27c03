"""The plan of an entry-flow run, without Prefect: the CLI prints it (a dry run) before anything runs.

`plan_run` resolves and plans a run exactly as the `skillgate` flow will (flows/skillgate.py calls
it); it imports neither Prefect nor torch, so `skillgate run RECIPE` answers in about a second.
"""

from __future__ import annotations

from deployments import RECIPES_DIR
from skillgate_core.base.config import ConfigError
from skillgate_core.base.paths import state_layout
from skillgate_core.pipeline.recipes import (
    ResolvedRecipe,
    Selection,
    find_recipe,
    resolve_recipe,
    resume_overrides,
)
from warehouse.outputs import WarehouseInputFinder

__all__ = ["PlanNotRunnable", "check_runnable", "override_source", "plan_run"]


class PlanNotRunnable(ConfigError):
    """The run's plan has inputs that nothing provides (or stages that are not built)."""


def override_source(trigger: str) -> str:
    """How errors name where overrides came from."""
    return "command line" if trigger == "cli" else "flow parameter 'overrides'"


def plan_run(recipe: str, overrides: list[str] | None = None, *, trigger: str = "cli", resume: str = "",
             only: list[str] | None = None, start: str = "", until: str = "") -> ResolvedRecipe:
    """Resolve and plan a run exactly as the flow will (the CLI prints this plan before running it)."""
    found = find_recipe(recipe, RECIPES_DIR)
    extra = resume_overrides(found, resume) if resume else []
    selection = Selection(only=tuple(only or ()), start=start, until=until)
    return resolve_recipe(found, [*(overrides or []), *extra], source=override_source(trigger),
                          selection=selection, finder=WarehouseInputFinder(state_layout()), build_missing=True)


def check_runnable(resolved: ResolvedRecipe) -> None:
    """Raise PlanNotRunnable naming every stage that cannot run (an input nothing provides, not built)."""
    problems = [f"{row.entry}: {row.note}" for row in resolved.plan if row.missing or not row.built]
    if problems:
        raise PlanNotRunnable(f"recipe '{resolved.name}' cannot run; nothing was started:\n  " + "\n  ".join(problems))

"""The one entry flow: `skillgate(recipe, overrides)` routes to one sub-flow per stage.

Every recipe deployment in prefect.yaml points here with a recipe name, so a Prefect UI run,
`prefect deployment run skillgate/rl-train` and `skillgate run` all go through the same code (the
nightly regression, which loops over experiments, is flows/eval_nightly.py and runs its
evaluations through the same `eval70` stage sub-flow). Stages that are not built yet are reported as such, never faked.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger, tags
from prefect.artifacts import create_markdown_artifact

from deployments import RECIPES_DIR
from flows.stage_flows import STAGE_FLOWS
from skillgate_core.recipes import find_recipe, plan_recipe, resolve_recipe, resume_overrides
from skillgate_core.stages import get_stage
from tasks.stage import TRIGGER_TAG_PREFIX
from warehouse import TRIGGERS

__all__ = ["skillgate"]


@flow(name="skillgate", log_prints=True)
def skillgate(recipe: str, overrides: list[str] | None = None, trigger: str = "ui", resume: str = "") -> dict[str, Any]:
    """Run RECIPE (catalog name or .toml path) with `stage.key=value` overrides.

    trigger: who started it (ui, schedule, cli, test); recorded with the run.
    resume: an experiment id: the recipe's training stage continues that experiment from its latest
    checkpoint in a new segment (sets grpo.resume_experiment; never answered from the stage cache).
    Returns {"recipe", "digest", "stages": {stage: record or {"status": "not-built"}}}.
    """
    if trigger not in TRIGGERS:
        raise ValueError(f"trigger must be one of {', '.join(TRIGGERS)}, got {trigger!r}")
    logger = get_run_logger()
    found = find_recipe(recipe, RECIPES_DIR)
    extra = resume_overrides(found, resume) if resume else []
    resolved = resolve_recipe(found, [*(overrides or []), *extra])
    plan = plan_recipe(resolved)
    artifacts: dict[str, str] = dict(resolved.recipe.inputs)
    results: dict[str, Any] = {}
    lines = [f"# skillgate `{resolved.name}` ({trigger}{', resume ' + resume if resume else ''})", "", "| stage | status | outputs |", "|---|---|---|"]
    for row in plan:
        if not row.built:
            logger.warning("stage %s: %s", row.stage, row.note)
            results[row.stage] = {"status": "not-built", "note": row.note}
            lines.append(f"| {row.stage} | not built yet | {row.note} |")
            continue
        missing = [r for r in get_stage(row.stage).inputs if r not in artifacts]
        if missing:
            logger.warning("stage %s: skipped, missing inputs %s", row.stage, missing)
            results[row.stage] = {"status": "skipped", "note": f"missing inputs: {', '.join(missing)}"}
            lines.append(f"| {row.stage} | skipped | missing inputs: {', '.join(missing)} |")
            continue
        inputs = {r: artifacts[r] for r in get_stage(row.stage).inputs}
        with tags(TRIGGER_TAG_PREFIX + trigger):  # the stage task records it with the run (warehouse)
            record = STAGE_FLOWS[row.stage](resolved.config_json(row.stage), inputs)
        artifacts.update(record["outputs"])
        results[row.stage] = {"status": "reused" if record["reused"] else "completed", **record}
        outs = ", ".join(f"{r}: `{p}`" for r, p in record["outputs"].items())
        lines.append(f"| {row.stage} | {results[row.stage]['status']} ({record['seconds']} s) | {outs} |")
    create_markdown_artifact(key="skillgate-run-summary", markdown="\n".join(lines))
    return {"recipe": resolved.name, "digest": resolved.digest(), "stages": results}

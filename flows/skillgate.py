"""The one entry flow: `skillgate(recipe, overrides)` runs a recipe's plan, one sub-flow per stage.

Every recipe deployment in prefect.yaml points here with a recipe name, so a Prefect UI run,
`prefect deployment run skillgate/rl-train` and `skillgate run` all go through the same code (the
nightly regression, which loops over experiments, is flows/eval_nightly.py and runs its
evaluations through the same `eval70` stage sub-flow).

The plan (skillgate_core/pipeline/recipe_plan.py) decides where every input comes from: an earlier stage of
the run, an explicit input, the newest completed output of that role in the warehouse, or a stage
added to build it. A plan that cannot run (an input nothing provides) fails the run before any stage
starts, with every reason in the run's state message and summary artifact; a stage that fails fails
the run. A run never ends Completed without having done its job.

The run's artifacts: `skillgate-run-summary` (each stage: status, inputs, outputs) and, when it
evaluated or built a report, `skillgate-headline` (per arm: trial success, oracle exposure,
clean-oracle rate; where the report is: tasks/headline.py). Paths are shown from SKILLGATE_HOME.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger, tags
from prefect.artifacts import create_markdown_artifact

from flows.run_plan import PlanNotRunnable, check_runnable, plan_run
from flows.stage_flows import STAGE_FLOWS
from skillgate_core.base.interrupts import cancellation, interrupt_signal
from skillgate_core.base.paths import state_layout
from skillgate_core.pipeline.gathered import stage_inputs
from tasks.headline import publish_headline
from tasks.home_paths import shown_path
from tasks.stage import TRIGGER_TAG_PREFIX
from warehouse import TRIGGERS

__all__ = ["PlanNotRunnable", "RECIPE_TAG_PREFIX", "plan_run", "skillgate"]

RECIPE_TAG_PREFIX = "recipe:"


def _run_name(parameters: dict[str, Any]) -> str:
    parts = [parameters["recipe"]]
    for flag, key in (("only", "only"), ("from", "start"), ("until", "until")):
        value = parameters.get(key)
        if value:
            parts.append(f"--{flag} {','.join(value) if isinstance(value, list) else value}")
    return " ".join(parts) + f" ({parameters.get('trigger', 'ui')})"


def _flow_run_name() -> str:
    from prefect.runtime import flow_run

    return _run_name(flow_run.parameters)


@flow(name="skillgate", log_prints=True, flow_run_name=_flow_run_name)
def skillgate(
    recipe: str,
    overrides: list[str] | None = None,
    trigger: str = "ui",
    resume: str = "",
    only: list[str] | None = None,
    start: str = "",
    until: str = "",
) -> dict[str, Any]:
    """Run RECIPE (catalog name or .toml path) with `stage.key=value` overrides.

    trigger: who started it (ui, schedule, cli, test); recorded with the run.
    resume: an experiment id: the recipe's training stage continues that experiment from its latest
    checkpoint in a new segment (sets grpo.resume_experiment; never answered from the stage cache).
    only / start / until: run part of the recipe (entry or stage names; `skillgate run --only/--from/--until`).
    Returns {"recipe", "digest", "stages": {entry: record}} (record status: completed or reused).
    """
    if trigger not in TRIGGERS:
        raise ValueError(f"trigger must be one of {', '.join(TRIGGERS)}, got {trigger!r}")
    logger = get_run_logger()
    resolved = plan_run(recipe, overrides, trigger=trigger, resume=resume, only=only, start=start, until=until)
    head = f"# skillgate `{resolved.name}` ({trigger}{', resume ' + resume if resume else ''})"
    lines = [head, "", "| stage | status | inputs | outputs |", "|---|---|---|---|"]
    try:
        check_runnable(resolved)
    except PlanNotRunnable as exc:
        lines += [f"| {row.entry} | {'cannot run: ' + row.note if row.note else 'not started'} | | |"
                  for row in resolved.plan]
        create_markdown_artifact(key="skillgate-run-summary", markdown="\n".join(lines + ["", f"**Failed**: {exc}"]))
        raise
    layout = state_layout()
    outputs: dict[str, dict[str, str]] = {}
    results: dict[str, Any] = {}
    for row in resolved.plan:
        inputs = stage_inputs(row.sources, outputs, layout)
        for role, where in row.found.items():
            logger.info("%s: input %s = newest on record: %s (%s)", row.entry, role, inputs[role], where)
        stage_flow = STAGE_FLOWS[row.stage].with_options(flow_run_name=f"{resolved.name}/{row.entry}")
        try:
            with tags(TRIGGER_TAG_PREFIX + trigger, RECIPE_TAG_PREFIX + resolved.name):
                record = stage_flow(resolved.config_json(row.entry), inputs)
        except BaseException as exc:
            signal_name, cancelled_by = interrupt_signal(exc), cancellation(exc)
            ended = (f"**cancelled**: {cancelled_by}" if cancelled_by else
                     f"**interrupted** by {signal_name}" if signal_name else
                     f"**failed**: {type(exc).__name__}: {str(exc)[:300]}")
            lines.append(f"| {row.entry} | {ended} | | |")
            create_markdown_artifact(key="skillgate-run-summary", markdown="\n".join(lines))
            raise
        outputs[row.entry] = dict(record["outputs"])
        results[row.entry] = {"status": "reused" if record["reused"] else "completed", **record}
        ins = ", ".join(f"{r}: `{shown_path(p, layout.home)}`" + (" (found)" if r in row.found else "")
                        for r, p in inputs.items())
        outs = ", ".join(f"{r}: `{shown_path(p, layout.home)}`" for r, p in record["outputs"].items())
        added = f" (added: builds {row.added_for})" if row.added_for else ""
        lines.append(f"| {row.entry}{added} | {results[row.entry]['status']} ({record['seconds']} s) | {ins} | {outs} |")
    create_markdown_artifact(key="skillgate-run-summary", markdown="\n".join(lines))
    publish_headline(resolved.name, results, layout.home)  # per arm: success, exposures; where the report is
    return {"recipe": resolved.name, "digest": resolved.digest(), "stages": results}

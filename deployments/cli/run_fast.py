"""What `skillgate run` will do, said before it does it, and the closing lines after a run.

Before: per planned stage, whether a finished identical run is on record (same config digest, same
input digests: pipeline.finished_run), so the run reuses its output, or the stage will compute, and
why: its config differs from the recipe's because of an override, an input it reads is recomputed
upstream first, a resume always trains, or no run with this config on these inputs finished yet.
Nothing is written to find out (a gathered input, which is content-addressed, is looked up, not
built). The dry-run plan shows it; a re-run whose every stage would be reused computes nothing and
starts no Prefect server and no flow run: the result is read from the stage folders (measured: a
second `make demo` in seconds instead of ~20 s of server start-up alone). Anything that would
compute goes through the flow as usual.

After a run, the report (if the run built one) and one lineage query over the warehouse: for each
evaluation of the run, which export, trained by which run, from which inputs and commit, scored what.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from skillgate_core.base.config import config_digest
from skillgate_core.base.paths import state_layout
from skillgate_core.pipeline.gathered import gathered_path, source_entry, source_paths
from skillgate_core.pipeline.recipes import ResolvedRecipe
from skillgate_core.pipeline.run import StageRecord, finished_run

__all__ = ["LINEAGE_SQL", "Outlook", "all_reused", "changed_by_overrides", "downstream_of", "lineage_sql",
           "plan_outlook", "print_report_and_lineage"]


@dataclass(frozen=True)
class Outlook:
    """What a run will do with one planned entry."""

    reused: bool
    """True: a finished identical run is on record and its output is reused (nothing computes)."""
    why: str
    """Why it computes (empty when reused), in words."""
    record: StageRecord | None = None
    """The finished run that would be reused."""


def plan_outlook(resolved: ResolvedRecipe, changed: dict[str, str] | None = None) -> dict[str, Outlook]:
    """Entry -> Outlook for every entry of the plan, in order, reading only (see the module docstring).
    `changed`: entry -> the overrides that changed its config (changed_by_overrides), named in `why`."""
    layout = state_layout()
    changed = changed or {}
    outputs: dict[str, dict[str, str]] = {}
    result: dict[str, Outlook] = {}
    for row in resolved.plan:
        if row.missing or not row.built:
            result[row.entry] = Outlook(False, "cannot run (see note)")
            continue
        upstream = sorted({source_entry(s) for srcs in row.sources.values() for s in srcs} - {""} - set(outputs))
        if upstream:
            result[row.entry] = Outlook(False, f"reads what {', '.join(upstream)} will compute")
            continue
        inputs: dict[str, str] = {}
        for role, srcs in row.sources.items():
            paths = source_paths(role, srcs, outputs)
            folder = Path(next(iter(paths.values()))) if len(paths) == 1 else gathered_path(paths, layout)
            if folder.exists():  # a gathered folder not made yet: never read by a finished run
                inputs[role] = str(folder)
        config = resolved.configs[row.entry]
        record = finished_run(row.stage, config, inputs, layout) if len(inputs) == len(row.sources) else None
        if record is not None:
            outputs[row.entry] = dict(record.outputs)
            result[row.entry] = Outlook(True, "", record)
        elif not getattr(config, "reusable", True):
            result[row.entry] = Outlook(False, "a resume always trains")
        elif row.entry in changed:
            result[row.entry] = Outlook(False, f"config changed by {changed[row.entry]}")
        else:
            result[row.entry] = Outlook(False, "no finished run with this config on these inputs")
    return result


def changed_by_overrides(resolved: ResolvedRecipe, baseline: ResolvedRecipe) -> dict[str, str]:
    """Entry -> the overrides that make its config differ from the recipe's own (`baseline`: the same
    recipe resolved without them)."""
    changed = {}
    for entry, config in resolved.configs.items():
        base = baseline.configs.get(entry)
        if base is None or isinstance(config, dict) or isinstance(base, dict):
            continue
        if config_digest(config) != config_digest(base):
            named = [o for o in resolved.overrides if o.partition("=")[0].partition(".")[0] in (entry, entry.partition(":")[0])]
            changed[entry] = ", ".join(named) or "an override"
    return changed


def downstream_of(resolved: ResolvedRecipe, entries: set[str]) -> list[str]:
    """The planned entries that read, directly or through others, an output of `entries`."""
    reached = set(entries)
    for row in resolved.plan:
        if {source_entry(s) for srcs in row.sources.values() for s in srcs} & reached:
            reached.add(row.entry)
    return [row.entry for row in resolved.plan if row.entry in reached and row.entry not in entries]


def all_reused(outlook: dict[str, Outlook]) -> dict[str, dict[str, Any]] | None:
    """Entry -> reused record for every stage of the plan (`plan_outlook`), or None when one would compute."""
    if not all(o.reused for o in outlook.values()):
        return None
    return {entry: {"status": "reused", **o.record.to_json(), "run_id": None}
            for entry, o in outlook.items() if o.record is not None}


LINEAGE_SQL = """select l.experiment_id, l.scope as benchmark, round(l.value, 3) as trial_success, l.n as trials,
       l.export_id, l.run_id as trained_by_run, left(l.git_sha, 12) as git_sha, l.git_dirty,
       list(struct_pack(role := i.role, sha256 := left(i.sha256, 12)) order by i.role) as trained_from
from v_metric_lineage l, unnest(l.inputs) as u(i)
where l.metric = 'trial_success' and l.scope = 'all'
  and l.eval_run_id in (select produced_by_run from dataset_version where sha256 in ({digests}))
group by all order by l.experiment_id"""
"""For each evaluation output of a run: the score, the export, the training run, its commit and inputs."""


def lineage_sql(digests: list[str]) -> str:
    """LINEAGE_SQL over these eval-row digests, as one line a user can paste: the digests are written in
    as literals (sha256 hex only, so quoting them is safe), not as placeholders a pasted copy lacks."""
    bad = [d for d in digests if not re.fullmatch(r"[0-9a-f]{64}", d)]
    if bad:
        raise ValueError(f"not sha256 hex digests: {bad}")
    return " ".join(LINEAGE_SQL.format(digests=", ".join(f"'{d}'" for d in digests)).split())


def print_report_and_lineage(console: Console, result: dict[str, Any]) -> None:
    stages = result["stages"]
    reports = [Path(r["outputs"]["report"]) for r in stages.values() if "report" in r.get("outputs", {})]
    for report in reports:
        console.print(f"[bold]report[/]: {report / 'report.md'}\n[bold]figures[/]: {report / 'figures'}")
    digests = [r["output_digests"]["eval_rows"] for r in stages.values() if "eval_rows" in r.get("output_digests", {})]
    if not digests:
        return
    from warehouse import query

    sql = lineage_sql(digests)
    rows = query(sql).dicts()
    console.print("[bold]lineage[/] (warehouse): which export, trained by which run from which inputs, scored what")
    for r in rows:
        inputs = ", ".join(f"{i['role']} {i['sha256']}" for i in r["trained_from"])
        console.print(f"  [bold]{escape(r['experiment_id'])}[/]: trial success {r['trial_success']} over {r['trials']} "
                      f"trials; export {escape(r['export_id'])}; trained by run {r['trained_by_run']} at commit "
                      f"{r['git_sha']}{' (dirty)' if r['git_dirty'] else ''} from {escape(inputs)}")
    # One line, never wrapped by the console (soft_wrap), in double quotes: the SQL holds no $, `, \ or ",
    # so the shell passes it unchanged.
    console.print(f"[dim]the query: skillgate sql \"{escape(sql)}\"[/]", soft_wrap=True)

"""What `skillgate run --execute` does around the flow: the up-to-date check, and the closing lines.

A re-run whose every stage has a finished identical run (same config digest, same input digests:
pipeline.finished_run) computes nothing, so it starts no Prefect server and no flow run: the result
is read from the stage folders (measured: a second `make demo` in seconds instead of ~20 s of server
start-up alone). Anything that would compute goes through the flow as usual.

After a run, the report (if the run built one) and one lineage query over the warehouse: for each
evaluation of the run, which export, trained by which run, from which inputs and commit, scored what.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from skillgate_core.gathered import stage_inputs
from skillgate_core.paths import state_layout
from skillgate_core.pipeline import finished_run
from skillgate_core.recipes import ResolvedRecipe

__all__ = ["LINEAGE_SQL", "all_reused", "lineage_sql", "print_report_and_lineage"]


def all_reused(resolved: ResolvedRecipe) -> dict[str, dict[str, Any]] | None:
    """Entry -> reused record for every stage of the plan, or None as soon as one would compute."""
    layout = state_layout()
    if any(row.missing or not row.built for row in resolved.plan):
        return None  # the flow fails it with every reason named
    outputs: dict[str, dict[str, str]] = {}
    records: dict[str, dict[str, Any]] = {}
    for row in resolved.plan:
        record = finished_run(row.stage, resolved.configs[row.entry], stage_inputs(row.sources, outputs, layout), layout)
        if record is None:
            return None
        outputs[row.entry] = dict(record.outputs)
        records[row.entry] = {"status": "reused", **record.to_json(), "run_id": None}
    return records


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

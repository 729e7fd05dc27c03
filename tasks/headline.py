"""The entry run's headline artifact: per evaluated arm, the numbers a reader opens the run for, and
where the report is.

One row per evaluation stage of the run (an `eval70` entry: one arm): its method, trial success
(resolved / trials), oracle exposure and clean-oracle rate (docs/method.md 8), read from the
summary.json the stage wrote beside its rows; then the report's place under SKILLGATE_HOME when the
run built one (its figures are in the `paper-report` artifact of the paper-tables flow run). Paths
are shown from the state dir (tasks/home_paths.py): the reader's machine is not the runner's.

The table is what fits the Prefect UI's artifact pane at a laptop's width: each arm named by what it
trained with (SkillGate for the paper's method, else its method label; an entry name like `eval70`
says nothing of the arm), then its four numbers; the long names (method label, recipe entry,
protocol id) follow below the table, one line per arm (a protocol column pushed the clean-oracle
rate off-screen at 1400 px).

    markdown = headline_markdown("demo", results)   # results: the entry flow's {entry: stage record}
    publish_headline("demo", results)                # the same, as the entry flow run's artifact
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skillgate_core.evaluation.arm_label import parse_arm_label
from skillgate_core.evaluation.paper_config import PaperConfig
from tasks.home_paths import shown_path

__all__ = ["HEADLINE_KEY", "arm_rows", "headline_markdown", "publish_headline"]

HEADLINE_KEY = "skillgate-headline"
"""The artifact key (on the entry flow run)."""
SUMMARY_FILE = "summary.json"


def _rate(value: object) -> str:
    # "n/a", not "-": a cell holding only "-" renders as a list bullet in the UI's markdown
    return f"{value:.3f}" if isinstance(value, int | float) and not isinstance(value, bool) else "n/a"


def arm_name(method: str) -> str:
    """SkillGate for the paper's method (PaperConfig.method; @sN for another training seed), else the label."""
    label = parse_arm_label(method) if method else None
    if label is not None and label.profile == PaperConfig().method and not label.variants:
        return "SkillGate" + (f"@s{label.seed}" if label.seed else "")
    return method or "?"


def arm_rows(results: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One dict per entry whose outputs hold evaluation rows with a summary, in run order."""
    rows = []
    for entry, record in results.items():
        rows_dir = record.get("outputs", {}).get("eval_rows")
        summary_file = Path(rows_dir) / SUMMARY_FILE if rows_dir else None
        if summary_file is None or not summary_file.is_file():
            continue
        s = json.loads(summary_file.read_text())
        rows.append({"arm": entry, "name": arm_name(str(s.get("method", ""))), "method": s.get("method", ""), "protocol_id": s.get("protocol_id", ""),
                     "trials": int(s["trials"]), "resolved": round(float(s["trial_success"]) * int(s["trials"])),
                     "trial_success": s["trial_success"], "oracle_exposure": s.get("oracle_exposure"),
                     "clean_oracle_rate": s.get("clean_oracle_rate"), "errors": s.get("errors", 0)})
    return rows


def headline_markdown(recipe: str, results: Mapping[str, Mapping[str, Any]], home: Path | None = None) -> str | None:
    """The headline (module docstring), or None when the run evaluated nothing and built no report."""
    arms = arm_rows(results)
    report = next((Path(r["outputs"]["report"]) for r in results.values() if "report" in r.get("outputs", {})), None)
    if not arms and report is None:
        return None
    lines = [f"# {recipe}: headline", ""]
    if arms:
        lines += ["| arm | trial success | oracle exposure | clean-oracle rate | errors |", "|---|---|---|---|---|"]
        lines += [f"| {a['name']} | {_rate(a['trial_success'])} ({a['resolved']}/{a['trials']}) | "
                  f"{_rate(a['oracle_exposure'])} | {_rate(a['clean_oracle_rate'])} | {a['errors']} |" for a in arms]
        lines += [""] + [f"- {a['name']}: method `{a['method']}`, entry `{a['arm']}`, protocol `{a['protocol_id']}`"
                         for a in arms]
        lines += ["", "Trial success counts errors in its denominator; oracle exposure: the share of trials that "
                      "read the oracle skill; clean-oracle rate: the share whose distinct reads are exactly the "
                      "oracle (docs/method.md 8).", ""]
    else:
        lines += ["No evaluation ran in this run.", ""]
    if report is not None:
        lines += [f"Report: `{shown_path(report / 'report.md', home)}` (tables and figures beside it; "
                  "`skillgate where` prints SKILLGATE_HOME). Its figures are shown in the `paper-report` "
                  "artifact of this run's paper-tables flow run."]
    return "\n".join(lines) + "\n"


def publish_headline(recipe: str, results: Mapping[str, Mapping[str, Any]], home: Path | None = None) -> bool:
    """The headline as a markdown artifact of the current flow run; False when there is none to show."""
    from prefect.artifacts import create_markdown_artifact

    markdown = headline_markdown(recipe, results, home)
    if markdown is None:
        return False
    create_markdown_artifact(key=HEADLINE_KEY, markdown=markdown, description=f"headline numbers of {recipe}")
    return True

"""Abductive diagnosis: name the root cause of every incident from its log symptoms and a table.

Log lines look like `2024-05-01T10:00:00Z host-17 WARN [INC-0412] W-022 retry budget low`: the
incident id in brackets, then symptom codes among the words.

Parameters (one skill = one set of them; a misleading skill changes exactly one):
    log_dir        folder holding the logs
    log_scope      "all": the live log and every rotated file (NAME, NAME.1, NAME.2, ...);
                   "current": only the live log file
    log_name       the live log's file name
    code_pattern   regular expression of a symptom code
    rules          [{"cause": C, "codes": {CODE: min_count, ...}}, ...] in priority order: a rule
                   matches when every code occurs at least min_count times in the incident
    rule_order     "first": the first matching rule wins; "last": the last one does
    fallback       cause written when no rule matches
    output         output path: CSV with the header `incident,cause`, one row per incident by id
"""

from __future__ import annotations

import re
from collections import Counter

from skillgate_core.benchgen.engines.common import csv_rows, format_csv  # embed-drop

INCIDENT_LINE = re.compile(r"\[(INC-\d+)\]([^\n]*)")


def log_files(params: dict, files: dict[str, str]) -> list[str]:
    live = f"{params['log_dir'].rstrip('/')}/{params['log_name']}"
    if params["log_scope"] == "current":
        return [live] if live in files else []
    rotated = re.compile(re.escape(live) + r"(\.\d+)?$")
    return sorted(p for p in files if rotated.match(p))


def symptoms(params: dict, files: dict[str, str]) -> dict[str, Counter]:
    """incident id -> Counter of symptom codes over the log files in scope."""
    code = re.compile(params["code_pattern"])
    found: dict[str, Counter] = {}
    for path in log_files(params, files):
        for incident, rest in INCIDENT_LINE.findall(files[path]):
            found.setdefault(incident, Counter()).update(code.findall(rest))
    return found


def diagnose(params: dict, codes: Counter) -> str:
    rules = params["rules"] if params["rule_order"] == "first" else list(reversed(params["rules"]))
    for rule in rules:
        if all(codes[c] >= n for c, n in rule["codes"].items()):
            return rule["cause"]
    return params["fallback"]


def causes(params: dict, files: dict[str, str]) -> dict[str, str]:
    """incident id -> cause, for every incident seen in the logs in scope."""
    return {inc: diagnose(params, found) for inc, found in sorted(symptoms(params, files).items())}


def solve(params: dict, files: dict[str, str]) -> dict[str, str]:
    result = causes(params, files)
    return {params["output"]: format_csv(["incident", "cause"], [[inc, cause] for inc, cause in result.items()])}


def checker(params: dict, inputs: dict[str, str]):
    """files -> problems, with the expected causes recomputed from `inputs` once."""
    expected = causes(params, inputs)
    return lambda files: compare_causes(expected, params["output"], files)


def check(params: dict, inputs: dict[str, str], files: dict[str, str]) -> list[str]:
    """The output must give every incident exactly its cause (any row order, header optional)."""
    return checker(params, inputs)(files)


def compare_causes(expected: dict[str, str], path: str, files: dict[str, str]) -> list[str]:
    """Problems of the output at `path` against the expected incident -> cause map."""
    if path not in files:
        return [f"{path}: missing"]
    rows = csv_rows(files[path])
    if rows and [c.lower() for c in rows[0]] == ["incident", "cause"]:
        rows = rows[1:]
    got: dict[str, str] = {}
    problems: list[str] = []
    for i, row in enumerate(rows):
        if len(row) != 2:
            problems.append(f"{path}: row {i + 1}: expected 2 columns (incident,cause), got {len(row)}")
            continue
        if row[0] in got:
            problems.append(f"{path}: incident {row[0]} listed twice")
        got[row[0]] = row[1]
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    wrong = sorted(inc for inc in set(expected) & set(got) if got[inc] != expected[inc])
    if missing:
        problems.append(f"{path}: {len(missing)} incident(s) missing, e.g. {missing[0]}")
    if extra:
        problems.append(f"{path}: {len(extra)} unknown incident(s), e.g. {extra[0]}")
    if wrong:
        problems.append(f"{path}: {len(wrong)} wrong cause(s), e.g. {wrong[0]}: got {got[wrong[0]]!r}, "
                        f"expected {expected[wrong[0]]!r}")
    return problems

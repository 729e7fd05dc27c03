"""The shortcut audit of a built suite: can names alone, or slate positions alone, find the oracle?

    report = audit_bench(Path("bench"), margin=0.05, alpha=0.001)   # -> audit.json's content
    check_audit(report)                                          # AuditError naming what fails, if anything

Each predictor of `audit_predictors` is fitted on the TRAINING split's tasks (choice_model: answer rates
per token, ties counted fractionally) and scored on every split. eval70_v1 and slate147 are scored
by the model fitted on every training task. The training split itself is cross-fitted: each domain's
training tasks are scored by the model fitted on the other domains' (each skill by the others' when
the suite has one domain), because a model scored on the tasks it was fitted on also finds what it
memorised (a suite of 16 training skills has a slate order or a suffix per skill to memorise). That
in-sample score is reported too (`train_in_sample`), not judged. Accuracy is the mean over a split's
tasks; chance is the mean of 1/|candidates|, and a name predictor over the whole slate is held to the
cluster-level chance instead (audit_predictors, `bar`).

The rule (docs/benchmarks.md, The shortcut audit): a predictor fails on a split iff

    accuracy - chance > margin   and   P(Binomial(units, chance) >= floor(accuracy * units)) < alpha

`units` are the split's independent draws: distinct oracle skills for a name predictor (a skill's tasks
share its names), tasks for a position predictor (each slate is shuffled on its own). The margin is the
shortcut size that counts; the tail probability (`p_value`) keeps a predictor that knows nothing from
failing on the noise of a small split: on eval70_v1's 70 slates a position predictor clears chance +
0.05 by luck in 7-11% of suites, and the tail keeps each check's false alarms under 1 in 1,000.

A skew that is only the noise of independent draws does not carry from one domain to another, yet a
policy trained on the whole split learns it, so the audit also checks the draws themselves
(audit_balance: each (family, split)'s oracle-suffix counts differ by at most one). On the default
suite every name predictor scores chance exactly (its draws are balanced: balanced_draws).

The report holds no timings, so auditing one suite twice writes the same audit.json; like gate.json,
it is left out of the suite digest.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from skillgate_core.benchgen.audit_balance import balance_failures, suffix_balance
from skillgate_core.benchgen.audit_predictors import PREDICTORS, AuditTask, Predictor, cluster_indices
from skillgate_core.benchgen.choice_model import Choice, expected_accuracy, fit_choices
from skillgate_core.benchgen.skill_plan import GenerationError
from skillgate_core.benchgen.stats import read_task_rows
from skillgate_core.benchgen.suite import AUDIT_FILE, suite_digest
from skillgate_core.benchgen.suite_config import SPLITS, BenchBuildConfig
from skillgate_core.formats.slate_manifest import MANIFEST_FILE
from skillgate_core.skills import read_slate

__all__ = ["AUDIT_FORMAT", "AuditError", "audit_bench", "audit_failures", "audit_settings", "audit_tasks",
           "check_audit", "load_audit_tasks", "write_audit"]

AUDIT_FORMAT = "skillgate-bench-audit/1"
FIT_SPLIT = "train"
RULE = "fail iff accuracy - chance > margin and P(Binomial(units, chance) >= floor(accuracy * units)) < alpha"


class AuditError(GenerationError):
    """The suite fails its shortcut audit; the message names each failing predictor and split."""


def load_audit_tasks(bench: Path) -> list[AuditTask]:
    """Every task of the suite at `bench`: its split, family, oracle and slate names (skills.json order)."""
    tasks = []
    for row in read_task_rows(bench):
        slate = read_slate(bench / row["path"] / MANIFEST_FILE)
        if slate.oracle is None:  # read_slate refuses a slate without one; kept for the type checker
            raise ValueError(f"{bench / row['path'] / MANIFEST_FILE}: no oracle")
        tasks.append(AuditTask(task_id=row["task_id"], split=row["split"], family=row["family"],
                               domain=row["domain"], oracle=slate.oracle, names=slate.names))
    return tasks


def _round(x: float) -> float:
    return round(x, 6)


def _binomial_tail(n: int, p: float, k: int) -> float:
    """P(Binomial(n, p) >= k), summed in log space (n is up to a split's 1,000+ tasks)."""
    if k <= 0:
        return 1.0
    if p <= 0:
        return 0.0
    if p >= 1:
        return 1.0 if k <= n else 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    return min(1.0, math.fsum(math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                                       + i * log_p + (n - i) * log_q) for i in range(k, n + 1)))


def _verdict(predictor: Predictor, tasks: list[AuditTask], choices: list[Choice], hits: list[float],
             margin: float, alpha: float) -> dict[str, Any]:
    """One predictor on one split: accuracy, chance, the binomial tail and whether it passes."""
    accuracy = sum(hits) / len(tasks)
    chance = sum(1 / len(c.candidates) for c in choices) / len(tasks)
    cluster_chance = sum(1 / len(cluster_indices(t)) for t in tasks) / len(tasks)
    bar = cluster_chance if predictor.bar == "cluster" else chance
    units = len({t.oracle for t in tasks}) if predictor.kind == "name" else len(tasks)
    p_value = _binomial_tail(units, bar, math.floor(accuracy * units + 1e-9))
    by_family: dict[str, list[float]] = {}
    for task, hit in zip(tasks, hits, strict=True):
        by_family.setdefault(task.family, []).append(hit)
    out = {"tasks": len(tasks), "units": units, "accuracy": _round(accuracy), "chance": _round(chance),
           "bar": _round(bar), "excess": _round(accuracy - bar), "p_value": float(f"{p_value:.4g}"),
           "passed": not (accuracy - bar > margin and p_value < alpha),
           "by_family": {f: _round(sum(h) / len(h)) for f, h in sorted(by_family.items())}}
    if predictor.bar == "cluster":
        out["cluster_chance"] = _round(cluster_chance)
    return out


def _folds(train: list[AuditTask]) -> list[list[int]]:
    """Indices of the training tasks per cross-fitting fold: one per domain, else one per oracle skill."""
    key = (lambda t: t.domain) if len({t.domain for t in train}) > 1 else (lambda t: t.oracle)
    folds: dict[str, list[int]] = {}
    for i, task in enumerate(train):
        folds.setdefault(key(task), []).append(i)
    return [folds[k] for k in sorted(folds)]


def _cross_fitted(choices: list[Choice], folds: list[list[int]]) -> list[float]:
    """Each training task's expected accuracy under the model fitted on the other folds."""
    hits = [0.0] * len(choices)
    for fold in folds:
        held = set(fold)
        model = fit_choices(c for i, c in enumerate(choices) if i not in held)
        for i in fold:
            hits[i] = expected_accuracy(model, choices[i])
    return hits


def _audit_predictor(predictor: Predictor, by_split: dict[str, list[AuditTask]], splits: list[str],
                     margin: float, alpha: float) -> dict[str, Any]:
    choices = {s: [predictor.choice(t) for t in by_split[s]] for s in splits}
    model = fit_choices(choices[FIT_SPLIT])
    hits = {s: [expected_accuracy(model, c) for c in choices[s]] for s in splits}
    in_sample = sum(hits[FIT_SPLIT]) / len(hits[FIT_SPLIT])
    folds = _folds(by_split[FIT_SPLIT])
    if len(folds) > 1:  # one training skill in one domain: nothing to cross-fit with, in-sample it stays
        hits[FIT_SPLIT] = _cross_fitted(choices[FIT_SPLIT], folds)
    return {"kind": predictor.kind, "candidates": predictor.candidates, "about": predictor.about,
            "train_in_sample": _round(in_sample),
            "splits": {s: _verdict(predictor, by_split[s], choices[s], hits[s], margin, alpha) for s in splits}}


def audit_tasks(tasks: Iterable[AuditTask], margin: float, alpha: float, digest: str = "") -> dict[str, Any]:
    """The audit report over these tasks (module docstring); `digest` names the suite audited."""
    tasks = list(tasks)
    by_split: dict[str, list[AuditTask]] = {}
    for task in tasks:
        by_split.setdefault(task.split, []).append(task)
    if not by_split.get(FIT_SPLIT):
        raise ValueError(f"the audit fits on the {FIT_SPLIT} split, and the suite has no {FIT_SPLIT} task")
    splits = [s for s in SPLITS if by_split.get(s)] + sorted(set(by_split) - set(SPLITS))
    report: dict[str, Any] = {
        "format": AUDIT_FORMAT, "suite_digest": digest, "fitted_on": FIT_SPLIT, "rule": RULE,
        "margin": margin, "alpha": alpha,
        "splits": {s: {"tasks": len(by_split[s]), "skills": len({t.oracle for t in by_split[s]})} for s in splits},
        "predictors": {p.name: _audit_predictor(p, by_split, splits, margin, alpha) for p in PREDICTORS.values()},
        "suffix_balance": suffix_balance(tasks),
    }
    report["failures"] = audit_failures(report)
    report["passed"] = not report["failures"]
    return report


def audit_failures(report: dict[str, Any]) -> list[str]:
    """One line per failing (predictor, split) with its accuracy, chance, margin and p-value, then one per
    unbalanced suffix draw."""
    lines = []
    for name, predictor in report["predictors"].items():
        for split, r in predictor["splits"].items():
            if not r["passed"]:
                lines.append(f"{name} on {split}: accuracy {r['accuracy']:.4f} vs chance {r['bar']:.4f}, excess "
                             f"{r['excess']:+.4f} > margin {report['margin']}, p-value {r['p_value']:.2g} < alpha "
                             f"{report['alpha']} over {r['units']} units")
    return lines + balance_failures(report["suffix_balance"])


def audit_bench(bench: Path, margin: float, alpha: float, digest: str | None = None) -> dict[str, Any]:
    """The audit report of the suite at `bench` (its digest computed unless given)."""
    return audit_tasks(load_audit_tasks(bench), margin, alpha, digest if digest is not None else suite_digest(bench))


def audit_settings(bench: Path) -> tuple[float, float]:
    """(margin, alpha) the suite at `bench` was built with (suite.json's config); BenchBuildConfig's defaults
    for a suite built before the audit existed."""
    config = json.loads((bench / "suite.json").read_text(encoding="utf-8")).get("config", {})
    defaults = BenchBuildConfig()
    return (float(config.get("audit_margin", defaults.audit_margin)),
            float(config.get("audit_alpha", defaults.audit_alpha)))


def write_audit(bench: Path, report: dict[str, Any]) -> Path:
    """Write the report as bench/audit.json (left out of the suite digest)."""
    path = bench / AUDIT_FILE
    path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def check_audit(report: dict[str, Any]) -> None:
    """AuditError naming every failing predictor and split, if any."""
    if report["failures"]:
        raise AuditError("the suite fails its shortcut audit (a name or a slate position finds the oracle better "
                         "than chance, or the oracles' suffixes are unbalanced; docs/benchmarks.md, The shortcut "
                         "audit):\n  " + "\n  ".join(report["failures"]))

"""Nightly regression check: did trial success drop outside a seeded task-cluster bootstrap interval?

The two evaluations share one protocol fingerprint, so they hold the same tasks. Tasks are the
clusters: each bootstrap draw resamples task ids with replacement (the same draw for both sides,
i.e. paired) and takes trial success on each side over the drawn tasks' trials (errors count as
unresolved, in the denominator). A regression is a drop whose whole (1 - alpha) interval of the
paired difference lies below 0. Kept small on purpose; evaluation/bootstrap.py may replace it.

    check = check_regression(current_rows, previous_rows, n_boot=2000, seed=0)
    check.regressed, check.delta, (check.ci_low, check.ci_high)
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["RegressionCheck", "check_regression", "paired_task_bootstrap", "task_successes", "trial_success"]


@dataclass(frozen=True)
class RegressionCheck:
    """The comparison of one evaluation with the previous one of the same fingerprint."""

    metric: str
    """What is compared (trial_success)."""
    current: float
    """Trial success now."""
    previous: float
    """Trial success of the previous evaluation."""
    delta: float
    """current - previous."""
    ci_low: float
    """Lower end of the bootstrap interval of delta."""
    ci_high: float
    """Upper end of the bootstrap interval of delta."""
    alpha: float
    """1 - interval coverage."""
    n_boot: int
    """Bootstrap draws."""
    seed: int
    """Seed of the draws."""
    tasks: int
    """Task clusters."""
    regressed: bool
    """delta < 0 and the whole interval lies below 0."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def task_successes(rows: Iterable[Mapping[str, Any]]) -> dict[str, tuple[int, int]]:
    """task_id -> (resolved trials, trials) over trial rows (any outcome but resolved is a failure)."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        c = counts[str(r["task_id"])]
        c[0] += r["outcome"] == "resolved"
        c[1] += 1
    return {k: (v[0], v[1]) for k, v in counts.items()}


def _success(counts: Mapping[str, tuple[int, int]], tasks: Iterable[str]) -> float:
    resolved = trials = 0
    for t in tasks:
        resolved += counts[t][0]
        trials += counts[t][1]
    return resolved / trials if trials else 0.0


def trial_success(rows: Iterable[Mapping[str, Any]]) -> float:
    """Resolved trials / trials over trial rows (0.0 without rows), as the comparison counts them."""
    counts = task_successes(rows)
    return _success(counts, counts)


def paired_task_bootstrap(current: Mapping[str, tuple[int, int]], previous: Mapping[str, tuple[int, int]], *,
                          n_boot: int = 2000, seed: int = 0, alpha: float = 0.05) -> tuple[float, float, float]:
    """(delta, ci_low, ci_high) of trial success current - previous, tasks resampled with replacement."""
    if set(current) != set(previous):
        raise ValueError(f"the evaluations hold different tasks ({len(set(current) ^ set(previous))} differ): "
                         "compare evaluations of one protocol fingerprint only")
    if not current:
        raise ValueError("no tasks to compare")
    if not (0 < alpha < 1) or n_boot < 1:
        raise ValueError(f"need 0 < alpha < 1 and n_boot >= 1, got alpha={alpha}, n_boot={n_boot}")
    tasks = sorted(current)
    delta = _success(current, tasks) - _success(previous, tasks)
    rng = random.Random(seed)
    deltas = []
    for _ in range(n_boot):
        draw = [tasks[rng.randrange(len(tasks))] for _ in tasks]
        deltas.append(_success(current, draw) - _success(previous, draw))
    deltas.sort()
    lo = deltas[int((alpha / 2) * (n_boot - 1))]
    hi = deltas[int((1 - alpha / 2) * (n_boot - 1) + 0.5)]
    return delta, lo, hi


def check_regression(current_rows: Iterable[Mapping[str, Any]], previous_rows: Iterable[Mapping[str, Any]], *,
                     n_boot: int = 2000, seed: int = 0, alpha: float = 0.05) -> RegressionCheck:
    """Compare trial success of two evaluations of one fingerprint (module docstring)."""
    current, previous = task_successes(current_rows), task_successes(previous_rows)
    delta, lo, hi = paired_task_bootstrap(current, previous, n_boot=n_boot, seed=seed, alpha=alpha)
    tasks = sorted(current)
    return RegressionCheck(metric="trial_success", current=_success(current, tasks), previous=_success(previous, tasks),
                           delta=delta, ci_low=lo, ci_high=hi, alpha=alpha, n_boot=n_boot, seed=seed,
                           tasks=len(tasks), regressed=delta < 0 and hi < 0)

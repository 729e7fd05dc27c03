"""Paired task-cluster bootstrap of a method against a baseline on one frozen protocol (docs/method.md 9).

The unit of resampling is the task (its repeats are correlated, so they travel together) and the two
methods are paired on it: each resample draws T task ids with replacement from the common task set
and evaluates both methods on the same draw. Per resample:

    trial success diff = sum_t w_t c_t^m / sum_t w_t n_t^m  -  (same for the baseline)
    pass@k diff        = sum_t w_t (pass@k_t^m - pass@k_t^b) / T

(w_t = how often task t was drawn; c = resolved trials, n = trials, errors count in n). The CI is the
percentile interval of the B resampled differences; the point estimate is the difference on the
observed tasks. Seeded (numpy PCG64), so the same trials give the same interval.

    result = paired_bootstrap(skillgate, baseline, resamples=10_000, seed=0)
    result.intervals[0]   # BootstrapInterval(statistic='trial_success', difference=0.05, ci_low=..., ...)

Refuses two fingerprints (ProtocolMismatchError) and two task sets (TaskSetMismatchError).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from skillgate_core.evaluation.metrics import Trial, pass_at_k, task_success_counts
from skillgate_core.evaluation.protocol import assert_same_protocol

__all__ = [
    "MIN_RESAMPLES",
    "BootstrapInterval",
    "PairedBootstrap",
    "TaskSetMismatchError",
    "bootstrap_differences",
    "paired_bootstrap",
    "percentile_interval",
]

MIN_RESAMPLES = 10_000
"""Fewer resamples leave the 2.5% / 97.5% percentiles resting on a handful of draws."""


class TaskSetMismatchError(ValueError):
    """The method and the baseline were not evaluated on the same tasks."""


@dataclass(frozen=True)
class BootstrapInterval:
    """One statistic's paired difference, method - baseline, with its percentile interval."""

    statistic: str
    """'trial_success' or 'pass@K'."""
    method_value: float
    """The method's value on the observed tasks."""
    baseline_value: float
    """The baseline's value on the observed tasks."""
    difference: float
    """method_value - baseline_value."""
    ci_low: float
    """Lower percentile of the resampled differences."""
    ci_high: float
    """Upper percentile of the resampled differences."""


@dataclass(frozen=True)
class PairedBootstrap:
    """The result of `paired_bootstrap`."""

    method: str
    baseline: str
    fingerprint: str
    tasks: int
    resamples: int
    seed: int
    confidence: float
    k: int
    intervals: tuple[BootstrapInterval, ...]
    distributions: dict[str, np.ndarray] = field(repr=False, compare=False)
    """statistic -> the B resampled differences (for the figure; not in to_json)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method, "baseline": self.baseline, "fingerprint": self.fingerprint,
            "tasks": self.tasks, "resamples": self.resamples, "seed": self.seed,
            "confidence": self.confidence, "k": self.k,
            "intervals": [dict(i.__dict__) for i in self.intervals],
        }


def _task_arrays(trials: Sequence[Trial], k: int, label: str) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    counts = task_success_counts(trials)
    short = {t: n for t, (n, _) in counts.items() if n < k}
    if short:
        first = sorted(short)[0]
        raise ValueError(f"{label}: pass@{k} needs >= {k} trials per task; {len(short)} task(s) have fewer "
                         f"(e.g. {first}: {short[first]})")
    tasks = list(counts)
    n = np.array([counts[t][0] for t in tasks], dtype=np.float64)
    c = np.array([counts[t][1] for t in tasks], dtype=np.float64)
    p = np.array([pass_at_k(counts[t][0], counts[t][1], k) for t in tasks], dtype=np.float64)
    return tasks, n, c, p


def bootstrap_differences(n_m: np.ndarray, c_m: np.ndarray, p_m: np.ndarray, n_b: np.ndarray, c_b: np.ndarray,
                          p_b: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(trial-success diffs, pass@k diffs) for each row of `weights` (B x T task multiplicities)."""
    w = np.asarray(weights, dtype=np.float64)
    success = (w @ c_m) / (w @ n_m) - (w @ c_b) / (w @ n_b)
    passk = (w @ (p_m - p_b)) / w.sum(axis=1)
    return success, passk


def percentile_interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    """The (1-confidence)/2 and (1+confidence)/2 percentiles (numpy's default linear interpolation)."""
    alpha = 1.0 - confidence
    low, high = np.quantile(values, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def paired_bootstrap(method: Sequence[Trial], baseline: Sequence[Trial], *, method_label: str, baseline_label: str,
                     method_fingerprint: str, baseline_fingerprint: str, k: int = 4,
                     resamples: int = MIN_RESAMPLES, seed: int = 0, confidence: float = 0.95) -> PairedBootstrap:
    """Paired task-cluster bootstrap of `method` - `baseline` in trial success and pass@k."""
    fingerprint = assert_same_protocol([(method_label, method_fingerprint), (baseline_label, baseline_fingerprint)])
    if resamples < MIN_RESAMPLES:
        raise ValueError(f"resamples must be >= {MIN_RESAMPLES}, got {resamples}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    tasks_m, n_m, c_m, p_m = _task_arrays(method, k, method_label)
    tasks_b, n_b, c_b, p_b = _task_arrays(baseline, k, baseline_label)
    if tasks_m != tasks_b:
        only_m = sorted(set(tasks_m) - set(tasks_b))
        only_b = sorted(set(tasks_b) - set(tasks_m))
        raise TaskSetMismatchError(
            f"{method_label} and {baseline_label} were evaluated on different tasks: {len(only_m)} only in "
            f"{method_label} {only_m[:3]}, {len(only_b)} only in {baseline_label} {only_b[:3]}; a paired bootstrap "
            "needs the same task set")
    t = len(tasks_m)
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(t, np.full(t, 1.0 / t), size=resamples)
    success, passk = bootstrap_differences(n_m, c_m, p_m, n_b, c_b, p_b, weights)
    observed = {
        "trial_success": (float(c_m.sum() / n_m.sum()), float(c_b.sum() / n_b.sum()), success),
        f"pass@{k}": (float(p_m.mean()), float(p_b.mean()), passk),
    }
    intervals = tuple(
        BootstrapInterval(name, m, b, m - b, *percentile_interval(dist, confidence))
        for name, (m, b, dist) in observed.items()
    )
    return PairedBootstrap(method=method_label, baseline=baseline_label, fingerprint=fingerprint, tasks=t,
                           resamples=resamples, seed=seed, confidence=confidence, k=k, intervals=intervals,
                           distributions={name: dist for name, (_, _, dist) in observed.items()})

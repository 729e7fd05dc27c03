"""Paired task-cluster bootstrap of a method against a baseline on one frozen protocol (docs/method.md 9).

The unit of resampling is the task (its repeats are correlated, so they travel together) and the two
methods are paired on it: each resample draws T task ids with replacement from the common task set
and evaluates both methods on the same draw. Per resample:

    rate diff   = sum_t w_t x_t^m / sum_t w_t n_t^m  -  (same for the baseline)
    pass@k diff = sum_t w_t (pass@k_t^m - pass@k_t^b) / T

(w_t = how often task t was drawn; n = trials, errors count in n; x = the task's trials that count
toward the rate: resolved for trial success, read the oracle at least once for oracle exposure,
distinct reads exactly the oracle for the clean-oracle rate: metrics.TRIAL_RATES). The CI is the
percentile interval of the B resampled differences; the point estimate is the difference on the
observed tasks. Seeded (numpy PCG64), so the same trials give the same interval; every statistic of
one comparison uses the same draws.

    result = paired_bootstrap(skillgate, baseline, resamples=10_000, seed=0)
    result.interval("trial_success")  # BootstrapInterval(statistic='trial_success', difference=0.05, ...)

Seeds pooled (`pooled_paired_bootstrap`: an arm trained at several seeds against the baseline at the
same seeds): a task's cluster is all its trials over those seeds, so a resample draws a task with every
seed's trials of it. Rates pool those trials (n and x summed over seeds); a task's pass@k is the mean
over the seeds of that seed's unbiased pass@k (k trials drawn within one seed's repeats, never across
seeds), so the pooled pass@k is the mean of the per-seed pass@k values. One seed is `paired_bootstrap`.

Pairs pooled (`pooled_pairs_bootstrap`): the same pooling over any list of (method, baseline) pairs, each pair
evaluated on the same tasks, e.g. the same two arms trained in several sessions from different SFT policies
(each pair shares its own SFT start). A task's cluster is then every pair's trials of it; a pair never meets
another pair's baseline.

Refuses two fingerprints (ProtocolMismatchError) and two task sets (TaskSetMismatchError), between the
method and the baseline and between seeds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from skillgate_core.evaluation.metrics import TRIAL_RATES, Trial, pass_at_k, task_counts
from skillgate_core.evaluation.protocol import assert_same_protocol

__all__ = [
    "MIN_RESAMPLES",
    "SELECTION_RATES",
    "BootstrapInterval",
    "PairedBootstrap",
    "TaskSetMismatchError",
    "bootstrap_differences",
    "paired_bootstrap",
    "percentile_interval",
    "pooled_paired_bootstrap",
    "pooled_pairs_bootstrap",
    "rate_differences",
]

MIN_RESAMPLES = 10_000
"""Fewer resamples leave the 2.5% / 97.5% percentiles resting on a handful of draws."""

SELECTION_RATES = ("oracle_exposure", "clean_oracle_rate")
"""Selection rates compared after trial success and pass@k: what SkillGate's credit is meant to move."""


class TaskSetMismatchError(ValueError):
    """The method and the baseline were not evaluated on the same tasks."""


@dataclass(frozen=True)
class BootstrapInterval:
    """One statistic's paired difference, method - baseline, with its percentile interval."""

    statistic: str
    """'trial_success', 'pass@K', 'oracle_exposure' or 'clean_oracle_rate' (in that order in a result)."""
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
    arm_seeds: tuple[int, ...] = ()
    """Training seeds of the two arms whose trials it compares: one for a per-seed comparison, several when
    seeds are pooled (`pooled_paired_bootstrap`); empty when the caller did not say."""

    @property
    def pooled(self) -> bool:
        """Whether it pools the trials of several seeds."""
        return len(self.arm_seeds) > 1

    def interval(self, statistic: str) -> BootstrapInterval:
        """The interval of one statistic (KeyError naming those there are)."""
        for i in self.intervals:
            if i.statistic == statistic:
                return i
        raise KeyError(f"no statistic {statistic!r}; have {[i.statistic for i in self.intervals]}")

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method, "baseline": self.baseline, "fingerprint": self.fingerprint,
            "tasks": self.tasks, "resamples": self.resamples, "seed": self.seed,
            "confidence": self.confidence, "k": self.k, "arm_seeds": list(self.arm_seeds),
            "intervals": [dict(i.__dict__) for i in self.intervals],
        }


@dataclass(frozen=True)
class _TaskArrays:
    """One side of a comparison, per task (sorted task ids): the numbers a resample reweights."""

    tasks: list[str]
    trials: np.ndarray
    """Trials per task (errors included)."""
    passk: np.ndarray
    """Unbiased pass@k per task."""
    counted: dict[str, np.ndarray]
    """Rate name (metrics.TRIAL_RATES) -> trials per task that count toward it."""


_RATES = ("trial_success", *SELECTION_RATES)


def _task_arrays(groups: Sequence[tuple[str, Sequence[Trial]]], k: int) -> _TaskArrays:
    """One side from its trials at each seed ((label, trials) per seed, the same tasks at every seed): trials
    and counted trials summed over the seeds, pass@k the mean over the seeds of each seed's pass@k."""
    sides = []
    for label, trials in groups:
        counts = {rate: task_counts(trials, TRIAL_RATES[rate]) for rate in _RATES}
        short = {t: n for t, (n, _) in counts["trial_success"].items() if n < k}
        if short:
            example = sorted(short)[0]
            raise ValueError(f"{label}: pass@{k} needs >= {k} trials per task; {len(short)} task(s) have fewer "
                             f"(e.g. {example}: {short[example]})")
        sides.append((label, counts))
    first_label, first = sides[0]
    tasks = list(first["trial_success"])
    for label, counts in sides[1:]:  # a task's cluster must hold every seed's trials of it
        _check_same_tasks(tasks, list(counts["trial_success"]), first_label, label)
    n = np.array([sum(c["trial_success"][t][0] for _, c in sides) for t in tasks], dtype=np.float64)
    p = np.array([sum(pass_at_k(*c["trial_success"][t], k) for _, c in sides) / len(sides) for t in tasks],
                 dtype=np.float64)
    counted = {rate: np.array([sum(c[rate][t][1] for _, c in sides) for t in tasks], dtype=np.float64)
               for rate in _RATES}
    return _TaskArrays(tasks=tasks, trials=n, passk=p, counted=counted)


def rate_differences(n_m: np.ndarray, x_m: np.ndarray, n_b: np.ndarray, x_b: np.ndarray,
                     weights: np.ndarray) -> np.ndarray:
    """Per row of `weights` (B x T task multiplicities): the method's pooled trial rate minus the baseline's.
    Pooled over trials, not averaged over tasks, so that it is the rate the main table prints."""
    w = np.asarray(weights, dtype=np.float64)
    return (w @ x_m) / (w @ n_m) - (w @ x_b) / (w @ n_b)


def bootstrap_differences(n_m: np.ndarray, c_m: np.ndarray, p_m: np.ndarray, n_b: np.ndarray, c_b: np.ndarray,
                          p_b: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(trial-success diffs, pass@k diffs) for each row of `weights` (B x T task multiplicities)."""
    w = np.asarray(weights, dtype=np.float64)
    success = rate_differences(n_m, c_m, n_b, c_b, w)
    passk = (w @ (p_m - p_b)) / w.sum(axis=1)
    return success, passk


def percentile_interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    """The (1-confidence)/2 and (1+confidence)/2 percentiles (numpy's default linear interpolation)."""
    alpha = 1.0 - confidence
    low, high = np.quantile(values, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def paired_bootstrap(method: Sequence[Trial], baseline: Sequence[Trial], *, method_label: str, baseline_label: str,
                     method_fingerprint: str, baseline_fingerprint: str, k: int = 4,
                     resamples: int = MIN_RESAMPLES, seed: int = 0, confidence: float = 0.95,
                     arm_seeds: Sequence[int] = ()) -> PairedBootstrap:
    """Paired task-cluster bootstrap of `method` - `baseline` in trial success, pass@k, oracle exposure and
    clean-oracle rate. `arm_seeds`: the (one) training seed both arms share, recorded in the result."""
    return _paired([(method_label, method)], [(baseline_label, baseline)], method_label=method_label,
                   baseline_label=baseline_label, method_fingerprint=method_fingerprint,
                   baseline_fingerprint=baseline_fingerprint, k=k, resamples=resamples, seed=seed,
                   confidence=confidence, arm_seeds=tuple(arm_seeds))


def pooled_paired_bootstrap(method: Mapping[int, Sequence[Trial]], baseline: Mapping[int, Sequence[Trial]], *,
                            method_label: str, baseline_label: str, method_fingerprint: str,
                            baseline_fingerprint: str, k: int = 4, resamples: int = MIN_RESAMPLES, seed: int = 0,
                            confidence: float = 0.95) -> PairedBootstrap:
    """`paired_bootstrap` with the seeds pooled (see the module doc): `method` and `baseline` map each training
    seed to that seed's trials, the same seeds on both sides; every seed on the same tasks."""
    seeds = sorted(method)
    if not seeds or seeds != sorted(baseline):
        raise ValueError(f"pooled seeds must be the same non-empty set on both sides: {method_label} has "
                         f"{seeds}, {baseline_label} has {sorted(baseline)}")
    return pooled_pairs_bootstrap([(f"seed {s}", method[s], baseline[s]) for s in seeds], method_label=method_label,
                                  baseline_label=baseline_label, method_fingerprint=method_fingerprint,
                                  baseline_fingerprint=baseline_fingerprint, k=k, resamples=resamples, seed=seed,
                                  confidence=confidence, arm_seeds=seeds)


def pooled_pairs_bootstrap(pairs: Sequence[tuple[str, Sequence[Trial], Sequence[Trial]]], *, method_label: str,
                           baseline_label: str, method_fingerprint: str, baseline_fingerprint: str, k: int = 4,
                           resamples: int = MIN_RESAMPLES, seed: int = 0, confidence: float = 0.95,
                           arm_seeds: Sequence[int] = ()) -> PairedBootstrap:
    """`paired_bootstrap` with several (label, method trials, baseline trials) pairs pooled (see the module doc):
    every pair on the same tasks, each method side paired with its own baseline side. `arm_seeds`: each pair's
    training seed, recorded in the result."""
    if not pairs:
        raise ValueError("pooled pairs: expected at least one (label, method trials, baseline trials) pair")
    labels = [label for label, _, _ in pairs]
    if len(set(labels)) != len(labels):
        raise ValueError(f"pooled pairs: labels must be distinct, got {labels}")
    return _paired([(f"{method_label} {label}", m) for label, m, _ in pairs],
                   [(f"{baseline_label} {label}", b) for label, _, b in pairs], method_label=method_label,
                   baseline_label=baseline_label, method_fingerprint=method_fingerprint,
                   baseline_fingerprint=baseline_fingerprint, k=k, resamples=resamples, seed=seed,
                   confidence=confidence, arm_seeds=tuple(arm_seeds))


def _paired(method: Sequence[tuple[str, Sequence[Trial]]], baseline: Sequence[tuple[str, Sequence[Trial]]], *,
            method_label: str, baseline_label: str, method_fingerprint: str, baseline_fingerprint: str, k: int,
            resamples: int, seed: int, confidence: float, arm_seeds: tuple[int, ...]) -> PairedBootstrap:
    """The bootstrap of both entry points: `method` and `baseline` are (label, trials) per pooled seed."""
    fingerprint = assert_same_protocol([(method_label, method_fingerprint), (baseline_label, baseline_fingerprint)])
    if resamples < MIN_RESAMPLES:
        raise ValueError(f"resamples must be >= {MIN_RESAMPLES}, got {resamples}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    for (m_label, m_trials), (b_label, b_trials) in zip(method, baseline, strict=True):
        _check_same_tasks(sorted({t.task_id for t in m_trials}), sorted({t.task_id for t in b_trials}),
                          m_label, b_label)  # each seed against its own baseline first: the clearest error
    m = _task_arrays(method, k)  # checks its seeds against each other: with the loop above, one task set
    b = _task_arrays(baseline, k)
    t = len(m.tasks)
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(t, np.full(t, 1.0 / t), size=resamples)
    success, passk = bootstrap_differences(m.trials, m.counted["trial_success"], m.passk, b.trials,
                                           b.counted["trial_success"], b.passk, weights)
    observed = {
        "trial_success": (_pooled(m, "trial_success"), _pooled(b, "trial_success"), success),
        f"pass@{k}": (float(m.passk.mean()), float(b.passk.mean()), passk),
    }
    for rate in SELECTION_RATES:  # the same draws as trial success: one paired resample, every statistic
        observed[rate] = (_pooled(m, rate), _pooled(b, rate),
                          rate_differences(m.trials, m.counted[rate], b.trials, b.counted[rate], weights))
    intervals = tuple(
        BootstrapInterval(name, mv, bv, mv - bv, *percentile_interval(dist, confidence))
        for name, (mv, bv, dist) in observed.items()
    )
    return PairedBootstrap(method=method_label, baseline=baseline_label, fingerprint=fingerprint, tasks=t,
                           resamples=resamples, seed=seed, confidence=confidence, k=k, intervals=intervals,
                           distributions={name: dist for name, (_, _, dist) in observed.items()},
                           arm_seeds=arm_seeds)


def _pooled(side: _TaskArrays, rate: str) -> float:
    """The rate on the observed tasks: counted trials / trials."""
    return float(side.counted[rate].sum() / side.trials.sum())


def _check_same_tasks(tasks_m: list[str], tasks_b: list[str], method_label: str, baseline_label: str) -> None:
    if tasks_m == tasks_b:
        return
    only_m = sorted(set(tasks_m) - set(tasks_b))
    only_b = sorted(set(tasks_b) - set(tasks_m))
    raise TaskSetMismatchError(
        f"{method_label} and {baseline_label} were evaluated on different tasks: {len(only_m)} only in "
        f"{method_label} {only_m[:3]}, {len(only_b)} only in {baseline_label} {only_b[:3]}; a paired bootstrap "
        "needs the same task set")

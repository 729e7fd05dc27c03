"""Evaluation metrics (METHOD.md 8). Errors are unresolved trials and stay in the denominator.

>>> pass_at_k(n=4, c=1, k=4)   # {resolved, fail, error, fail}: pass@4 = 1
1.0
>>> pass_at_k(n=4, c=1, k=1)   # ... and trial success 1/4
0.25
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from math import comb
from typing import Any, Literal

__all__ = ["READ_CATEGORIES", "Trial", "pass_at_k", "summarize_trials"]

READ_CATEGORIES = ("oracle", "misleading", "relevant", "irrelevant", "unadvertised")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task from n trials of which c resolved: 1 - C(n-c, k) / C(n, k).

    The probability that k trials drawn without replacement from the n hold at least one success.
    pass@1 = c / n (trial success); pass@n = 1 iff c >= 1. Count errored trials in n, not in c.
    """
    for name, value in (("n", n), ("c", c), ("k", k)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {value!r}")
    if not (n >= 1 and 0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need n >= 1, 0 <= c <= n, 1 <= k <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    # Exact integers, one correctly rounded division: no cancellation for large n.
    return (comb(n, k) - comb(n - c, k)) / comb(n, k)


@dataclass(frozen=True)
class Trial:
    """One evaluation trial, as the runner records it."""

    task_id: str
    """The task."""
    benchmark: str
    """Benchmark (family) the task belongs to."""
    repeat: int
    """Trial index within the task (0..repeats-1)."""
    outcome: Literal["resolved", "fail", "error"]
    """resolved = score >= 1; fail = graded below 1; error = infrastructure failure (ABORTED)."""
    reads: tuple[str, ...] = ()
    """Categories of the skill reads in order (oracle, misleading, relevant, irrelevant, unadvertised)."""
    read_names: tuple[str, ...] = ()
    """Skill names read, in order, aligned with `reads` (unique reads and clean-oracle use names)."""
    skill_reasoning: bool = False
    """Whether the first turn opened with <skill_reasoning>."""

    def __post_init__(self) -> None:
        if len(self.reads) != len(self.read_names):
            raise ValueError(
                f"trial {self.task_id}#{self.repeat}: {len(self.reads)} read categories but "
                f"{len(self.read_names)} read names; they must be aligned (one name per read)"
            )

    @property
    def clean_oracle(self) -> bool:
        """The set of distinct skill NAMES read is exactly {oracle}: [O, O] counts, [O, M] does not."""
        names = set(self.read_names)
        return len(names) == 1 and self.reads[0] == "oracle"

    @property
    def unique_reads(self) -> int:
        """Distinct skill names read (never categories: two misleading skills are two reads)."""
        return len(set(self.read_names))


def _rate(num: int, den: int) -> float | None:
    return num / den if den else None


def summarize_trials(trials: Sequence[Trial], ks: Sequence[int] = (1, 4)) -> dict[str, Any]:
    """The METHOD.md 8 metrics over a set of trials. Errors count as unresolved, in every denominator,
    and are also reported as their own count. Rates with an empty denominator are None."""
    if not trials:
        raise ValueError("no trials to summarize")
    n = len(trials)
    resolved = [t.outcome == "resolved" for t in trials]
    read = [bool(t.reads) for t in trials]
    by_task: dict[str, list[Trial]] = defaultdict(list)
    for t in trials:
        by_task[t.task_id].append(t)
    repeats = {len(v) for v in by_task.values()}
    out: dict[str, Any] = {
        "trials": n,
        "tasks": len(by_task),
        "errors": sum(t.outcome == "error" for t in trials),
        "trial_success": sum(resolved) / n,
    }
    per_bench: dict[str, list[bool]] = defaultdict(list)
    for t, ok in zip(trials, resolved, strict=True):
        per_bench[t.benchmark].append(ok)
    out["trial_success_by_benchmark"] = {b: sum(v) / len(v) for b, v in sorted(per_bench.items())}
    for k in ks:
        if all(k <= r for r in repeats):
            out[f"pass@{k}"] = sum(
                pass_at_k(len(v), sum(x.outcome == "resolved" for x in v), k) for v in by_task.values()
            ) / len(by_task)
    max_r = max(repeats)
    solved_counts = [sum(x.outcome == "resolved" for x in v) for v in by_task.values()]
    out["tasks_with_at_least"] = {f">={j}/{max_r}": sum(c >= j for c in solved_counts) for j in range(1, max_r + 1)}
    out["read_rate"] = sum(read) / n
    out["p_resolved_given_read"] = _rate(sum(r and ok for r, ok in zip(read, resolved, strict=True)), sum(read))
    out["p_resolved_given_no_read"] = _rate(
        sum((not r) and ok for r, ok in zip(read, resolved, strict=True)), n - sum(read)
    )
    out["skill_reasoning_rate"] = sum(t.skill_reasoning for t in trials) / n
    all_reads = [c for t in trials for c in t.reads]
    out["oracle_exposure"] = sum("oracle" in t.reads for t in trials) / n
    out["misleading_exposure"] = sum("misleading" in t.reads for t in trials) / n
    out["read_share_by_category"] = {c: _rate(all_reads.count(c), len(all_reads)) for c in READ_CATEGORIES}
    out["p_oracle_given_any_read"] = _rate(sum("oracle" in t.reads for t in trials), sum(read))
    out["clean_oracle_rate"] = sum(t.clean_oracle for t in trials) / n
    out["unique_reads_per_trial"] = sum(t.unique_reads for t in trials) / n
    first = Counter(t.reads[0] for t in trials if t.reads)
    out["first_read_category"] = {c: _rate(first[c], sum(read)) for c in READ_CATEGORIES}
    return out

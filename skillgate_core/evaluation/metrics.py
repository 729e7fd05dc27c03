"""Evaluation metrics (docs/method.md 8). Errors are unresolved trials and stay in the denominator.

`summarize_trials` gives every docs/method.md 8 number of one set of trials (one method on one protocol):
trial success overall and per benchmark (family), unbiased pass@k, outcome counts (errors on their
own), selection metrics, the behaviour cost (reads, turns, tokens, seconds per trial) and the premise
numbers (`premise`: credit.premise over the trials, errors left out; docs/method.md 8b).
`Trial.from_row` reads one eval_trials.parquet row.

>>> pass_at_k(n=4, c=1, k=4)   # {resolved, fail, error, fail}: pass@4 = 1
1.0
>>> pass_at_k(n=4, c=1, k=1)   # ... and trial success 1/4
0.25
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from math import comb
from typing import Any, Literal

from skillgate_core.credit.premise import PremiseEpisode, premise_episode, summarize_premise

__all__ = [
    "OUTCOMES",
    "READ_CATEGORIES",
    "TRIAL_RATES",
    "Trial",
    "behaviour_cost",
    "outcome_counts",
    "pass_at_k",
    "summarize_trials",
    "task_counts",
    "task_success_counts",
    "trial_rate",
]

READ_CATEGORIES = ("oracle", "misleading", "relevant", "irrelevant", "unadvertised")
Outcome = Literal["resolved", "fail", "error"]
OUTCOMES: tuple[Outcome, ...] = ("resolved", "fail", "error")


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


# Declarations below, not logic: each field documented where it is declared (docs/design.md, Style).
@dataclass(frozen=True)
class Trial:
    """One evaluation trial, as the runner records it."""

    task_id: str
    """The task."""
    benchmark: str
    """Benchmark (family) the task belongs to."""
    repeat: int
    """Trial index within the task (0..repeats-1)."""
    outcome: Outcome
    """resolved = score >= 1; fail = graded below 1; error = infrastructure failure (ABORTED)."""
    reads: tuple[str, ...] = ()
    """Categories of the skill reads in order (oracle, misleading, relevant, irrelevant, unadvertised)."""
    read_names: tuple[str, ...] = ()
    """Skill names read, in order, aligned with `reads` (unique reads and clean-oracle use names)."""
    skill_reasoning: bool = False
    """Whether the first turn opened with <skill_reasoning>."""
    turns: int = 0
    """Assistant turns of the episode."""
    response_tokens: int = 0
    """Tokens the policy generated over the episode."""
    loss_tokens: int = 0
    """Sampled tokens that a trainer would put a loss on (loss mask = 1)."""
    seconds: float = 0.0
    """Wall seconds of the trial (episode + verification)."""
    consulted_names: tuple[str, ...] | None = None
    """Every skill any file of which the trial opened or executed (docs/reads.md: its SKILL.md, a script
    run or read, its data), once, in order, the read ones included; None: not recorded (the reads
    stand for it)."""
    name_tokens: int | None = None
    """Sampled tokens that are skill-name (identity) tokens of its attributed reads; None: not measured."""
    read_call_tokens: int | None = None
    """Sampled tokens of those reads' whole calls (the name tokens included); None: not measured."""
    reasoning_tokens: int | None = None
    """Sampled tokens inside `<skill_reasoning>`; None: not measured."""

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"trial {self.task_id}#{self.repeat}: outcome {self.outcome!r} is not one of {OUTCOMES}")
        if len(self.reads) != len(self.read_names):
            raise ValueError(
                f"trial {self.task_id}#{self.repeat}: {len(self.reads)} read categories but "
                f"{len(self.read_names)} read names; they must be aligned (one name per read)"
            )

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Trial:
        """One eval_trials.parquet row (extra columns are ignored; cost columns may be missing)."""
        return cls(
            task_id=str(row["task_id"]),
            benchmark=str(row["benchmark"]),
            repeat=int(row["repeat"]),
            outcome=row["outcome"],
            reads=tuple(row.get("reads") or ()),
            read_names=tuple(row.get("read_names") or ()),
            consulted_names=None if row.get("consulted_names") is None else tuple(row["consulted_names"]),
            skill_reasoning=bool(row.get("skill_reasoning") or False),
            turns=int(row.get("turns") or 0),
            response_tokens=int(row.get("response_tokens") or 0),
            loss_tokens=int(row.get("loss_tokens") or 0),
            seconds=float(row.get("seconds") or 0.0),
            name_tokens=_count(row.get("name_tokens")),
            read_call_tokens=_count(row.get("read_call_tokens")),
            reasoning_tokens=_count(row.get("reasoning_tokens")),
        )

    def premise(self) -> PremiseEpisode:
        """Its premise facts (credit.premise, docs/method.md 8b): reads and outcome from the row, clean as the
        clean-oracle rate counts it (consultation of another skill included), the token counts where measured
        (loss_tokens are its sampled tokens)."""
        measured = None not in (self.name_tokens, self.read_call_tokens, self.reasoning_tokens)
        return premise_episode(self.reads, self.read_names, resolved=self.resolved, turns=self.turns,
                               sampled_tokens=self.loss_tokens if measured else None, name_tokens=self.name_tokens,
                               call_tokens=self.read_call_tokens, reasoning_tokens=self.reasoning_tokens,
                               aborted=self.outcome == "error", clean=self.clean_oracle)

    @property
    def resolved(self) -> bool:
        return self.outcome == "resolved"

    @property
    def first_read(self) -> str | None:
        """Category of the first skill read, None when nothing was read."""
        return self.reads[0] if self.reads else None

    @property
    def read_sequence(self) -> str:
        """The read categories in order as letters, e.g. '[O,M]'; '[]' for no read (the strata key)."""
        return "[" + ",".join(c[0].upper() for c in self.reads) + "]"

    def exposed_to(self, category: str) -> bool:
        """Whether the trial read a skill of `category` at least once (exposure counts trials, not reads)."""
        return category in self.reads

    @property
    def consulted(self) -> tuple[str, ...]:
        """The consulted skills' names, once each, in order (the read ones always included)."""
        return tuple(dict.fromkeys([*(self.consulted_names or ()), *self.read_names]))

    @property
    def consulted_beyond_read(self) -> tuple[str, ...]:
        """Skills the trial consulted (opened or ran a file of) without reading their SKILL.md / README.md."""
        read = set(self.read_names)
        return tuple(n for n in self.consulted if n not in read)

    @property
    def clean_oracle(self) -> bool:
        """The set of distinct skill NAMES read is exactly {oracle} ([O, O] counts, [O, M] does not), and no
        other skill was consulted: inspecting the others' scripts, then reading the oracle, is not clean."""
        names = set(self.read_names)
        return len(names) == 1 and self.reads[0] == "oracle" and not self.consulted_beyond_read

    @property
    def unique_reads(self) -> int:
        """Distinct skill names read (never categories: two misleading skills are two reads)."""
        return len(set(self.read_names))


def _count(value: Any) -> int | None:
    return None if value is None else int(value)


def _rate(num: int, den: int) -> float | None:
    return num / den if den else None


TRIAL_RATES: dict[str, Callable[[Trial], bool]] = {
    "trial_success": lambda t: t.resolved,
    "oracle_exposure": lambda t: t.exposed_to("oracle"),
    "misleading_exposure": lambda t: t.exposed_to("misleading"),
    "clean_oracle_rate": lambda t: t.clean_oracle,
    "consulted_beyond_read_rate": lambda t: bool(t.consulted_beyond_read),
}
"""Rates that are a share of ALL trials (errors included): name -> whether one trial counts. The main
table, the ablation and the paired bootstrap read these same definitions."""


def trial_rate(trials: Sequence[Trial], rate: str) -> float:
    """The share of `trials` for which TRIAL_RATES[rate] holds (every trial in the denominator)."""
    if not trials:
        raise ValueError(f"no trials for the rate {rate}")
    counts = TRIAL_RATES[rate]
    return sum(counts(t) for t in trials) / len(trials)


def task_counts(trials: Sequence[Trial], counts: Callable[[Trial], bool]) -> dict[str, tuple[int, int]]:
    """task_id -> (trials n, trials for which `counts` holds), tasks in sorted order."""
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for t in trials:
        tally[t.task_id][0] += 1
        tally[t.task_id][1] += counts(t)
    return {task: (n, c) for task, (n, c) in sorted(tally.items())}


def task_success_counts(trials: Sequence[Trial]) -> dict[str, tuple[int, int]]:
    """task_id -> (trials n, resolved c), tasks in sorted order. Errored trials count in n only."""
    return task_counts(trials, TRIAL_RATES["trial_success"])


def outcome_counts(trials: Sequence[Trial]) -> dict[str, int]:
    """Trials per outcome: resolved, fail, error (an error is also unresolved everywhere else)."""
    found = Counter(t.outcome for t in trials)
    return {o: found[o] for o in OUTCOMES}


def behaviour_cost(trials: Sequence[Trial]) -> dict[str, float | None]:
    """What a trial costs, per trial: skill reads (every read action), distinct skills read, assistant
    turns, generated tokens, loss tokens, wall seconds; and generated tokens per resolved trial."""
    if not trials:
        raise ValueError("no trials to cost")
    n = len(trials)
    resolved = sum(t.resolved for t in trials)
    tokens = sum(t.response_tokens for t in trials)
    return {
        "reads_per_trial": sum(len(t.reads) for t in trials) / n,
        "unique_reads_per_trial": sum(t.unique_reads for t in trials) / n,
        "consulted_skills_per_trial": sum(len(t.consulted) for t in trials) / n,
        "turns_per_trial": sum(t.turns for t in trials) / n,
        "response_tokens_per_trial": tokens / n,
        "loss_tokens_per_trial": sum(t.loss_tokens for t in trials) / n,
        "seconds_per_trial": sum(t.seconds for t in trials) / n,
        "response_tokens_per_resolved": tokens / resolved if resolved else None,
    }


def _success_block(trials: Sequence[Trial], ks: Sequence[int]) -> dict[str, Any]:
    """Trial success, outcome counts and pass@k of one set of trials (overall or one benchmark)."""
    per_task = task_success_counts(trials)
    repeats = {n for n, _ in per_task.values()}
    out: dict[str, Any] = {
        "trials": len(trials),
        "tasks": len(per_task),
        "resolved": sum(c for _, c in per_task.values()),
        "errors": sum(t.outcome == "error" for t in trials),
        "outcomes": outcome_counts(trials),
        "trial_success": sum(c for _, c in per_task.values()) / len(trials),
        "repeats": sorted(repeats),
    }
    for k in ks:
        if all(k <= r for r in repeats):  # pass@k needs at least k trials of every task
            out[f"pass@{k}"] = sum(pass_at_k(n, c, k) for n, c in per_task.values()) / len(per_task)
    max_r = max(repeats)
    out["tasks_with_at_least"] = {
        f">={j}/{max_r}": sum(c >= j for _, c in per_task.values()) for j in range(1, max_r + 1)
    }
    return out


def summarize_trials(trials: Sequence[Trial], ks: Sequence[int] = (1, 4)) -> dict[str, Any]:
    """The docs/method.md 8 metrics over a set of trials. Errors count as unresolved, in every denominator,
    and are also reported as their own count. Rates with an empty denominator are None.

    `by_benchmark` repeats the success block (trials, errors, trial success, pass@k, tasks solved
    >= j times) per benchmark (family); `cost` is `behaviour_cost`.
    """
    if not trials:
        raise ValueError("no trials to summarize")
    n = len(trials)
    resolved = [t.resolved for t in trials]
    read = [bool(t.reads) for t in trials]
    out: dict[str, Any] = _success_block(trials, ks)
    per_bench: dict[str, list[Trial]] = defaultdict(list)
    for t in trials:
        per_bench[t.benchmark].append(t)
    out["by_benchmark"] = {b: _success_block(v, ks) for b, v in sorted(per_bench.items())}
    out["trial_success_by_benchmark"] = {b: v["trial_success"] for b, v in out["by_benchmark"].items()}
    out["read_rate"] = sum(read) / n
    out["p_resolved_given_read"] = _rate(sum(r and ok for r, ok in zip(read, resolved, strict=True)), sum(read))
    out["p_resolved_given_no_read"] = _rate(
        sum((not r) and ok for r, ok in zip(read, resolved, strict=True)), n - sum(read)
    )
    out["skill_reasoning_rate"] = sum(t.skill_reasoning for t in trials) / n
    all_reads = [c for t in trials for c in t.reads]
    out["oracle_exposure"] = trial_rate(trials, "oracle_exposure")
    out["misleading_exposure"] = trial_rate(trials, "misleading_exposure")
    out["read_share_by_category"] = {c: _rate(all_reads.count(c), len(all_reads)) for c in READ_CATEGORIES}
    out["p_oracle_given_any_read"] = _rate(sum(t.exposed_to("oracle") for t in trials), sum(read))
    out["clean_oracle_rate"] = trial_rate(trials, "clean_oracle_rate")
    out["unique_reads_per_trial"] = sum(t.unique_reads for t in trials) / n
    # Consultation (docs/reads.md): skills any file of which a trial opened or ran, reads included; and the
    # trials that consulted a skill they never read (its scripts inspected or run): never clean.
    out["consulted_skills_per_trial"] = sum(len(t.consulted) for t in trials) / n
    out["consulted_beyond_read_rate"] = trial_rate(trials, "consulted_beyond_read_rate")
    first = Counter(t.reads[0] for t in trials if t.reads)
    out["first_read_category"] = {c: _rate(first[c], sum(read)) for c in READ_CATEGORIES}
    # Over ALL trials (a policy that never reads has 0 here): the x axis of the selector trade-off.
    out["oracle_first_read_rate"] = first["oracle"] / n
    out["misleading_first_read_rate"] = first["misleading"] / n
    out["cost"] = behaviour_cost(trials)
    out["premise"] = summarize_premise(t.premise() for t in trials)
    return out

"""The paper's tables (docs/method.md 9) as plain data, rendered to markdown and LaTeX.

Every evaluation table is built from `MethodTrials` of ONE protocol and first checks that they share
its fingerprint (`check_comparable`: the comparison-hygiene refusal, naming both fingerprints). A
`Table` holds display strings (rows) and the raw numbers behind them (data), so the report, the
LaTeX file and paper.json all come from one object:

    table = main_results_table(methods, k=4)
    to_markdown(table), to_latex(table), table.data

Percentages are printed with one decimal (token shares with two), counts in parentheses; a missing
value (empty denominator) is "-".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from skillgate_core.evaluation.bootstrap import BootstrapInterval, PairedBootstrap
from skillgate_core.evaluation.metrics import Trial, summarize_trials, task_success_counts
from skillgate_core.evaluation.paper_config import ABLATION_DESIGNS
from skillgate_core.evaluation.protocol import ProtocolMismatchError, assert_same_protocol
from skillgate_core.evaluation.rows import MethodTrials

__all__ = [
    "Table",
    "ablation_table",
    "behaviour_cost_table",
    "bootstrap_table",
    "check_comparable",
    "credit_starvation_bins",
    "credit_starvation_table",
    "main_results_table",
    "method_bootstrap_table",
    "pooled_bootstrap_table",
    "premise_table",
    "read_strata",
    "read_strata_table",
    "selector_tradeoff_table",
    "to_latex",
    "to_markdown",
    "training_summary",
    "training_summary_table",
]


@dataclass(frozen=True)
class Table:
    """One table: what is printed (columns, rows of strings) and the numbers behind it (data)."""

    key: str
    """File stem: tables/<section>/<key>.md and .tex."""
    title: str
    """One line."""
    caption: str
    """What the numbers are and how they are computed."""
    columns: tuple[str, ...]
    """Header cells."""
    rows: tuple[tuple[str, ...], ...]
    """Body cells, as printed."""
    data: Any
    """The raw numbers (JSON-able), as they go into paper.json."""


def _pct(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{100 * x:.{digits}f}"


def _num(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _frac(x: float | None, num: int, den: int) -> str:
    return f"{_pct(x)} ({num}/{den})"


def check_comparable(methods: Sequence[MethodTrials], table: str) -> str:
    """The one fingerprint every method's rows share; else ProtocolMismatchError naming both."""
    pairs = [(m.method, fp) for m in methods for fp in m.fingerprints]
    try:
        return assert_same_protocol(pairs)
    except ProtocolMismatchError as exc:
        raise ProtocolMismatchError(f"table {table}: {exc}") from None


def _passk_cell(trials: Sequence[Trial], k: int, value: float | None) -> str:
    """pass@k with its count when k equals every task's repeats (then it is 'tasks solved >= once')."""
    per_task = task_success_counts(trials)
    if value is None:
        return "-"
    if all(n == k for n, _ in per_task.values()):
        return _frac(value, sum(c >= 1 for _, c in per_task.values()), len(per_task))
    return _pct(value)


def _probe_cell(probe: Mapping[str, Any] | None) -> str:
    if probe is None:
        return "-"
    low, high = probe["oracle_rank1_ci"]
    return f"{100 * probe['oracle_rank1_rate']:.1f} [{100 * low:.1f}, {100 * high:.1f}]"


def main_results_table(methods: Sequence[MethodTrials], k: int,
                       probes: Mapping[tuple[str, str], Mapping[str, Any]] | None = None) -> Table:
    """Methods x benchmarks: trial success and pass@k with counts, errors on their own, then the selection
    figures over all trials (oracle and misleading exposure, clean-oracle rate); with `probes`
    ((fingerprint, method) -> selection-probe summary) a last column: the probe's oracle rank-1 rate."""
    check_comparable(methods, "main_results")
    benchmarks = sorted({t.benchmark for m in methods for t in m.trials})
    columns = ["method"]
    for b in (*benchmarks, "all"):
        columns += [f"{b} success %", f"{b} pass@{k} %"]
    columns += ["errors", "oracle exposure %", "misleading exposure %", "clean-oracle %"]
    if probes is not None:
        columns.append("probe oracle@1 % [95% CI]")
    rows, data = [], []
    for m in methods:
        summary = summarize_trials(m.trials, ks=(1, k))
        cells = [m.method]
        per: dict[str, Any] = {}
        for b in (*benchmarks, "all"):
            block = summary if b == "all" else summary["by_benchmark"].get(b)
            if block is None:
                cells += ["-", "-"]
                continue
            trials = m.trials if b == "all" else tuple(t for t in m.trials if t.benchmark == b)
            cells.append(_frac(block["trial_success"], block["resolved"], block["trials"]))
            cells.append(_passk_cell(trials, k, block.get(f"pass@{k}")))
            per[b] = {key: block[key] for key in ("trials", "tasks", "resolved", "errors", "trial_success",
                                                  "outcomes", "tasks_with_at_least")}
            per[b][f"pass@{k}"] = block.get(f"pass@{k}")
        cells.append(str(summary["errors"]))
        n = len(m.trials)
        selection = {key: summary[key] for key in ("oracle_exposure", "misleading_exposure", "clean_oracle_rate")}
        cells += [_frac(v, round(v * n), n) for v in selection.values()]
        entry: dict[str, Any] = {"method": m.method, "by_benchmark": per, **selection}
        if probes is not None:
            probe = probes.get((m.fingerprint, m.method))
            cells.append(_probe_cell(probe))
            entry["probe"] = None if probe is None else {
                key: probe[key] for key in ("tasks", "oracle_rank1_rate", "oracle_rank1_ci", "oracle_mass",
                                            "misleading_mass", "relevant_mass", "irrelevant_mass", "turn")}
        rows.append(tuple(cells))
        data.append(entry)
    return Table(
        key="main_results",
        title="Main results",
        caption=(f"Trial success (resolved/trials) and task pass@{k} (unbiased; with the number of tasks solved "
                 f"at least once when every task has {k} trials), per benchmark and overall. Errored trials "
                 "(infrastructure failures) count as unresolved in every denominator and are also counted. "
                 "Oracle / misleading exposure: trials that read the oracle / a misleading skill at least once; "
                 "clean-oracle: trials whose distinct reads are exactly the oracle and that opened or ran no file "
                 "of another skill."
                 + ("" if probes is None else " Probe: the share of tasks whose oracle is the policy's most likely "
                    "first read among the 16 slate skills, teacher-forced (chance 6.25%), with a task bootstrap "
                    "interval; '-' where no probe was run (an endpoint policy).")),
        columns=tuple(columns), rows=tuple(rows), data=data)


def ablation_table(methods: Sequence[MethodTrials], ablation_methods: Sequence[str], k: int) -> Table:
    """The credit-design ablation: one row per configured method that has rows, in the configured order."""
    check_comparable(methods, "credit_ablation")
    by_name = {m.method: m for m in methods}
    rows, data, absent = [], [], []
    for name in ablation_methods:
        m = by_name.get(name)
        if m is None:
            absent.append(name)
            continue
        s = summarize_trials(m.trials, ks=(1, k))
        rows.append((ABLATION_DESIGNS.get(name, name), name, _frac(s["trial_success"], s["resolved"], s["trials"]),
                     _pct(s.get(f"pass@{k}")), _pct(s["oracle_exposure"]), _pct(s["misleading_exposure"]),
                     _pct(s["clean_oracle_rate"]), _num(s["unique_reads_per_trial"])))
        data.append({"method": name, "design": ABLATION_DESIGNS.get(name, name), "trials": s["trials"],
                     "trial_success": s["trial_success"], f"pass@{k}": s.get(f"pass@{k}"),
                     "oracle_exposure": s["oracle_exposure"], "misleading_exposure": s["misleading_exposure"],
                     "clean_oracle_rate": s["clean_oracle_rate"],
                     "unique_reads_per_trial": s["unique_reads_per_trial"]})
    caption = ("Credit-design ablation. Exposure = share of trials that read at least one skill of that category; "
               "clean oracle = the distinct skill names read are exactly {oracle} and no file of another skill "
               "was opened or run; unique reads = distinct skill names read per trial.")
    if absent:
        caption += f" Without evaluation rows: {', '.join(absent)}."
    return Table(key="credit_ablation", title="Credit-design ablation", caption=caption,
                 columns=("design", "method", "success %", f"pass@{k} %", "oracle exposure %",
                          "misleading exposure %", "clean oracle %", "unique reads / trial"),
                 rows=tuple(rows), data={"rows": data, "absent": absent})


def selector_tradeoff_table(methods: Sequence[MethodTrials]) -> Table:
    """Oracle first-read rate against trial success, per method (the numbers of the trade-off figure)."""
    check_comparable(methods, "selector_tradeoff")
    rows, data = [], []
    for m in methods:
        s = summarize_trials(m.trials, ks=(1,))
        rows.append((m.method, _pct(s["oracle_first_read_rate"]), _pct(s["misleading_first_read_rate"]),
                     _pct(s["read_rate"]), _pct(s["p_oracle_given_any_read"]), _pct(s["clean_oracle_rate"]),
                     _frac(s["trial_success"], s["resolved"], s["trials"])))
        data.append({"method": m.method, **{key: s[key] for key in (
            "oracle_first_read_rate", "misleading_first_read_rate", "read_rate", "p_oracle_given_any_read",
            "clean_oracle_rate", "trial_success", "p_resolved_given_read", "p_resolved_given_no_read")}})
    return Table(
        key="selector_tradeoff", title="Selector trade-off",
        caption=("First read = the category of the first skill read, as a share of ALL trials (a policy that "
                 "never reads scores 0); P(oracle | read) among trials that read anything."),
        columns=("method", "oracle first read %", "misleading first read %", "read rate %", "P(oracle | read) %",
                 "clean oracle %", "success %"),
        rows=tuple(rows), data=data)


def _interval_cells(i: BootstrapInterval) -> tuple[str, ...]:
    """statistic, method %, baseline %, difference (pp), interval (pp): one bootstrap row as printed."""
    return (i.statistic, _pct(i.method_value), _pct(i.baseline_value), f"{100 * i.difference:+.1f}",
            f"[{100 * i.ci_low:+.1f}, {100 * i.ci_high:+.1f}]")


def _bootstrap_caption(first: PairedBootstrap | None) -> str:
    caption = ("Paired task-cluster bootstrap: tasks resampled with replacement (both methods on the same draw), "
               "difference in trial success, pass@k, oracle exposure (trials that read the oracle at least once) "
               "and clean-oracle rate (trials whose distinct reads are exactly the oracle and that consulted no "
               "other skill), percentile interval.")
    if first:
        caption += (f" {first.resamples} resamples, seed {first.seed}, {100 * first.confidence:g}% interval, "
                    f"protocol fingerprint {first.fingerprint[:10]}.")
    return caption


def _interval_column(first: PairedBootstrap | None) -> str:
    return f"{100 * first.confidence:g}% CI (pp)" if first else "CI (pp)"


def bootstrap_table(results: Sequence[tuple[str, PairedBootstrap]]) -> Table:
    """Paired task-cluster bootstrap, method - baseline, overall and per benchmark."""
    rows, data = [], []
    for scope, r in results:
        rows += [(scope, *_interval_cells(i), str(r.tasks)) for i in r.intervals]
        data.append({"scope": scope, **r.to_json()})
    first = results[0][1] if results else None
    title = f"Paired bootstrap: {first.method} - {first.baseline}" if first else "Paired bootstrap"
    return Table(key="paired_bootstrap", title=title, caption=_bootstrap_caption(first),
                 columns=("scope", "statistic", "method %", "baseline %", "difference (pp)", _interval_column(first),
                          "tasks"),
                 rows=tuple(rows), data=data)


def method_bootstrap_table(baseline: str, results: Sequence[PairedBootstrap], skipped: Mapping[str, str]) -> Table:
    """Paired task-cluster bootstrap of every method with rows - `baseline` at the method's seed, over all
    tasks; `skipped`: method -> why it has no comparison (e.g. evaluated on other tasks)."""
    rows = [(r.method, *_interval_cells(i), str(r.tasks)) for r in results for i in r.intervals]
    first = results[0] if results else None
    caption = (_bootstrap_caption(first) + f" Every method with rows on this protocol against {baseline}, over all "
               "tasks, each labelled by its rows' method (an SFT policy's evaluation included); the same draws "
               f"for every method. An arm trained at seed N (label ARM@sN) is compared with {baseline}@sN, the "
               f"baseline at its own seed; a label without a seed (e.g. sft) with seed 0's {baseline}.")
    if skipped:
        caption += " No comparison: " + "; ".join(f"{m} ({why})" for m, why in skipped.items()) + "."
    return Table(key="paired_bootstrap_methods", title=f"Paired bootstrap: every method - {baseline}",
                 caption=caption,
                 columns=("method", "statistic", "method %", "baseline %", "difference (pp)", _interval_column(first),
                          "tasks"),
                 rows=tuple(rows),
                 data={"baseline": baseline, "comparisons": [r.to_json() for r in results],
                       "skipped": [{"method": m, "reason": why} for m, why in skipped.items()]})


def _seeds_cell(seeds: Sequence[int]) -> str:
    return ", ".join(map(str, seeds))


def pooled_bootstrap_table(baseline: str, results: Sequence[PairedBootstrap], skipped: Mapping[str, str]) -> Table:
    """Paired task-cluster bootstrap of every arm trained at two or more seeds - `baseline` at the same seeds,
    the seeds' trials pooled (bootstrap.pooled_paired_bootstrap); `skipped`: arm -> why it has none."""
    rows = [(r.method, _seeds_cell(r.arm_seeds), *_interval_cells(i), str(r.tasks))
            for r in results for i in r.intervals]
    first = results[0] if results else None
    caption = (_bootstrap_caption(first) + f" Seeds pooled: each arm with rows at two or more seeds that {baseline} "
               "has too, against the baseline at those seeds (listed); a task's cluster is all its trials over "
               "those seeds, resampled together. Rates pool the trials of every seed; a task's pass@k is each "
               "seed's unbiased pass@k (k trials within one seed's repeats, never across seeds) averaged over the "
               "seeds, so the pooled pass@k is the mean of the per-seed pass@k values.")
    if skipped:
        caption += " No pooled comparison: " + "; ".join(f"{m} ({why})" for m, why in skipped.items()) + "."
    return Table(key="paired_bootstrap_pooled_seeds", title=f"Paired bootstrap, seeds pooled: every arm - {baseline}",
                 caption=caption,
                 columns=("method", "seeds", "statistic", "method %", "baseline %", "difference (pp)",
                          _interval_column(first), "tasks"),
                 rows=tuple(rows),
                 data={"baseline": baseline, "comparisons": [r.to_json() for r in results],
                       "skipped": [{"method": m, "reason": why} for m, why in skipped.items()]})


def read_strata(methods: Sequence[MethodTrials], max_strata: int) -> dict[str, Any]:
    """Trials and resolved per (read sequence, method); the `max_strata` most frequent sequences, the rest
    pooled as 'other'. Sequences are category letters in read order: '[O]', '[M]', '[]', '[O,M]', ..."""
    totals = Counter(t.read_sequence for m in methods for t in m.trials)
    ordered = sorted(totals, key=lambda s: (-totals[s], s))
    shown, pooled = ordered[:max_strata], set(ordered[max_strata:])
    keys = shown + (["other"] if pooled else [])
    cells: dict[str, dict[str, dict[str, int]]] = {s: {} for s in keys}
    for m in methods:
        for s in keys:
            cells[s][m.method] = {"trials": 0, "resolved": 0}
        for t in m.trials:
            key = "other" if t.read_sequence in pooled else t.read_sequence
            cells[key][m.method]["trials"] += 1
            cells[key][m.method]["resolved"] += t.resolved
    return {"strata": keys, "methods": [m.method for m in methods], "cells": cells,
            "pooled_as_other": sorted(pooled)}


def read_strata_table(methods: Sequence[MethodTrials], max_strata: int) -> Table:
    """Trial success conditioned on the read sequence, per method."""
    check_comparable(methods, "read_strata")
    strata = read_strata(methods, max_strata)
    rows = []
    for s in strata["strata"]:
        row = [s]
        for m in strata["methods"]:
            c = strata["cells"][s][m]
            row.append(_frac(c["resolved"] / c["trials"], c["resolved"], c["trials"]) if c["trials"] else "-")
        rows.append(tuple(row))
    return Table(
        key="read_strata", title="Success within the same read sequence",
        caption=("Trial success conditioned on the sequence of skill categories read (O oracle, M misleading, "
                 "R relevant, I irrelevant, U unadvertised; [] = no read), as resolved/trials per method."),
        columns=("read sequence", *(f"{m} success %" for m in strata["methods"])), rows=tuple(rows), data=strata)


def behaviour_cost_table(methods: Sequence[MethodTrials]) -> Table:
    """Reads, turns, tokens and seconds per trial, per method."""
    check_comparable(methods, "behaviour_cost")
    keys = ("reads_per_trial", "unique_reads_per_trial", "turns_per_trial", "response_tokens_per_trial",
            "loss_tokens_per_trial", "seconds_per_trial", "response_tokens_per_resolved")
    rows, data = [], []
    for m in methods:
        s = summarize_trials(m.trials, ks=(1,))
        cost = s["cost"]
        rows.append((m.method, str(s["trials"]), _num(cost["reads_per_trial"]), _num(cost["unique_reads_per_trial"]),
                     _num(cost["turns_per_trial"], 1), _num(cost["response_tokens_per_trial"], 0),
                     _num(cost["loss_tokens_per_trial"], 0), _num(cost["seconds_per_trial"], 1),
                     _num(cost["response_tokens_per_resolved"], 0)))
        data.append({"method": m.method, "trials": s["trials"], **{key: cost[key] for key in keys}})
    return Table(
        key="behaviour_cost", title="Behaviour cost",
        caption=("Means per trial: skill read actions, distinct skills read, assistant turns, generated tokens, "
                 "loss tokens (sampled tokens under the loss mask), wall seconds; and generated tokens per "
                 "resolved trial."),
        columns=("method", "trials", "reads", "unique reads", "turns", "response tokens", "loss tokens", "seconds",
                 "tokens / resolved"),
        rows=tuple(rows), data=data)


def premise_table(methods: Sequence[MethodTrials]) -> Table:
    """The premise checks (docs/method.md 8b) per method: P1 outcome vs selection, P2 dilution, multi-read and
    recovery, from the trials' own reads, outcomes and token counts (credit.premise)."""
    check_comparable(methods, "premise")
    rows, data = [], []
    for m in methods:
        p = summarize_trials(m.trials, ks=(1,))["premise"]
        tokens = "-" if not p["token_episodes"] else f"{p['token_episodes']}"
        rows.append((m.method, str(p["episodes"]), str(p["oracle_read_episodes"]),
                     _frac(p["p1_disagreement_share"], p["p1_disagreement"], p["oracle_read_episodes"]),
                     _frac(p["p1_clean_failed_share"], p["p1_clean_failed"], p["oracle_read_episodes"]),
                     _frac(p["p1_unclean_resolved_share"], p["p1_unclean_resolved"], p["oracle_read_episodes"]),
                     tokens, _pct(p["name_token_share"], 2), _pct(p["call_token_share"], 2),
                     _pct(p["reasoning_token_share"], 2), _num(p["sampled_tokens_mean"], 0), _num(p["turns_mean"], 1),
                     _frac(p["multi_read_rate"], p["multi_read_episodes"], p["episodes"]),
                     _frac(p["recovery_rate"], p["recovered"], p["recovery_candidates"]),
                     _frac(p["recovery_success_rate"], p["recovered_resolved"], p["recovered"])))
        data.append({"method": m.method, **p})
    return Table(
        key="premise", title="Premise checks",
        caption=("Whether these episodes have what the method's claim needs, measured on them (errored trials left "
                 "out). P1: among trials that read the oracle's SKILL.md, those whose outcome differs from a clean "
                 "oracle read (resolved XOR the distinct reads are exactly the oracle): clean reads that failed plus "
                 "resolved trials without a clean read. P2: skill-name, read-call (name included) and "
                 "<skill_reasoning> tokens as shares of all sampled tokens, over the trials whose token ids were "
                 "recorded (n tok.); sampled tokens and turns per trial. Multi-read: >= 2 distinct skills read. "
                 "Recovery: trials whose first read is not the oracle that read it later, and how many of those "
                 "resolved."),
        columns=("method", "trials", "oracle readers", "P1 outcome != clean %", "clean, failed %",
                 "resolved, not clean %", "n tok.", "name tokens %", "read-call tokens %", "reasoning tokens %",
                 "sampled tokens", "turns", "multi-read %", "recovery %", "recovered, resolved %"),
        rows=tuple(rows), data=data)


def _bin_label(edges: Sequence[int], i: int) -> str:
    return f"{edges[i]}-{edges[i + 1] - 1}" if i + 1 < len(edges) else f">={edges[i]}"


def credit_starvation_bins(episodes: Sequence[Mapping[str, Any]], edges: Sequence[int]) -> list[dict[str, Any]]:
    """Per (profile, response-length bin): episodes and token sums, the share of loss tokens that are read-call
    and identity (skill-name) tokens, and the share of oracle read actions with a negative advantage (the
    selector advantage of a two-stream profile; a plain profile's read call carries the episode's)."""
    sums: dict[tuple[str, int], Counter[str]] = {}
    for e in episodes:
        length = int(e["response_tokens"])
        i = max((j for j, edge in enumerate(edges) if length >= edge), default=0)
        c = sums.setdefault((str(e["profile"]), i), Counter())
        c["episodes"] += 1
        for key in ("response_tokens", "loss_tokens", "read_call_tokens", "identity_tokens", "oracle_actions",
                    "oracle_negative_actions"):
            c[key] += int(e[key])
    out = []
    for (profile, i), c in sorted(sums.items()):
        out.append({
            "profile": profile, "bin": _bin_label(edges, i), "bin_low": edges[i],
            "bin_high": edges[i + 1] if i + 1 < len(edges) else None,
            **{k: c[k] for k in ("episodes", "response_tokens", "loss_tokens", "read_call_tokens", "identity_tokens",
                                 "oracle_actions", "oracle_negative_actions")},
            "read_call_token_share": c["read_call_tokens"] / c["loss_tokens"] if c["loss_tokens"] else None,
            "identity_token_share": c["identity_tokens"] / c["loss_tokens"] if c["loss_tokens"] else None,
            "oracle_negative_advantage_rate": (c["oracle_negative_actions"] / c["oracle_actions"]
                                               if c["oracle_actions"] else None),
        })
    return out


def credit_starvation_table(episodes: Sequence[Mapping[str, Any]], edges: Sequence[int]) -> Table:
    """Credit starvation by response-length bin (from the trainer's credit_episodes.jsonl)."""
    bins = credit_starvation_bins(episodes, edges)
    rows = tuple((b["profile"], b["bin"], str(b["episodes"]), str(b["loss_tokens"]),
                  _pct(b["read_call_token_share"], 2), _pct(b["identity_token_share"], 2), str(b["oracle_actions"]),
                  _pct(b["oracle_negative_advantage_rate"])) for b in bins)
    return Table(
        key="credit_starvation", title="Credit starvation by response length",
        caption=("Trained episodes binned by response length (generated tokens). Read-call and identity shares = "
                 "read-call tokens and skill-name tokens over all loss tokens of the bin: how little of an "
                 "outcome-level advantage reaches the selection. Oracle negative-advantage = oracle read actions "
                 "whose advantage was negative (the selector advantage; for an outcome-only profile the episode's, "
                 "which its read call carries), over all oracle read actions. Identity tokens count where that "
                 "advantage is nonzero."),
        columns=("profile", "response tokens", "episodes", "loss tokens", "read-call share %", "identity share %",
                 "oracle reads", "oracle neg. advantage %"),
        rows=rows, data=bins)


_TRAINING_KEYS = ("reward", "success_rate", "read_rate", "oracle_read_rate", "misleading_read_rate",
                  "clean_oracle_rate", "selector_active_fraction", "selection_token_share", "read_call_token_share",
                  "oracle_negative_advantage_rate", "kl", "clip_fraction")


def training_summary(runs: Sequence[tuple[str, str, Sequence[Mapping[str, Any]]]], window: int) -> list[dict[str, Any]]:
    """Per run (profile, source, metrics rows): steps and the mean of each key over the last `window` steps."""
    out = []
    for profile, source, rows in runs:
        rows = sorted(rows, key=lambda r: int(r["step"]))
        last = rows[-window:]
        means: dict[str, float | None] = {}
        for key in _TRAINING_KEYS:
            values = [float(r[key]) for r in last if r.get(key) is not None]
            means[key] = sum(values) / len(values) if values else None
        out.append({"profile": profile, "source": source, "steps": len(rows),
                    "last_step": int(rows[-1]["step"]) if rows else None, "window": len(last), **means})
    return out


def training_summary_table(runs: Sequence[tuple[str, str, Sequence[Mapping[str, Any]]]], window: int) -> Table:
    """GRPO training, per run: outcome and selection rates and credit shares at the end of training."""
    summary = training_summary(runs, window)
    rows = tuple((s["profile"], s["source"], str(s["steps"]), _num(s["reward"], 3), _pct(s["success_rate"]),
                  _pct(s["oracle_read_rate"]), _pct(s["misleading_read_rate"]), _pct(s["clean_oracle_rate"]),
                  _pct(s["selector_active_fraction"]), _pct(s["selection_token_share"], 2),
                  _pct(s["read_call_token_share"], 2), _pct(s["oracle_negative_advantage_rate"])) for s in summary)
    return Table(
        key="training_summary", title="GRPO training, end of run",
        caption=(f"Means over the last {window} optimizer steps of each run's metrics.jsonl. Read rates are shares "
                 "of slate episodes; token shares are of loss tokens."),
        columns=("profile", "source", "steps", "reward", "success %", "oracle read %", "misleading read %",
                 "clean oracle %", "selector active %", "identity share %", "read-call share %",
                 "oracle neg. advantage %"),
        rows=rows, data=summary)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def to_markdown(table: Table) -> str:
    """A `### title` heading, the caption, and a GitHub-flavoured table."""
    lines = [f"### {table.title}", "", table.caption, "",
             "| " + " | ".join(_md_cell(c) for c in table.columns) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(table.columns))) + "|"]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows]
    if not table.rows:
        lines.append("| " + " | ".join(["(no rows)"] + [""] * (len(table.columns) - 1)) + " |")
    return "\n".join(lines) + "\n"


_LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                  ">": r"$>$", "<": r"$<$", "|": r"$|$"}


def _tex(text: str) -> str:
    return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in text)


def to_latex(table: Table) -> str:
    """A booktabs `table` environment with caption and label tab:<key>."""
    spec = "l" + "r" * (len(table.columns) - 1)
    lines = [r"\begin{table}[t]", r"\centering", r"\small",
             rf"\caption{{{_tex(table.title)}. {_tex(table.caption)}}}", rf"\label{{tab:{table.key}}}",
             rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
             " & ".join(_tex(c) for c in table.columns) + r" \\", r"\midrule"]
    lines += [" & ".join(_tex(c) for c in row) + r" \\" for row in table.rows]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"

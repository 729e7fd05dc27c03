"""One episode's premise facts (credit.premise.PremiseEpisode), from a Trajectory or a stored trajectories row.

    facts = trajectory_premise(trajectory, tokenizer)      # the reads span detection sees, P2 token counts
    counts = trajectory_token_counts(trajectory, tokenizer) # (sampled, name, call, reasoning) or None
    facts = row_premise(row)                                # a trajectories.parquet row (collect)

The reads are the ones span detection reports (docs/reads.md: what the sandbox saw opened), and the
name and call tokens are its attributed actions' identity and call tokens, found by the method's own
rule (never the labelled first-mention variant: the premise is about the episodes, not a credit
design). Reasoning tokens come from each turn's sampled ids through credit.spans.decode_with_offsets;
nothing is re-tokenized. A collect row carries its facts in the `premise` column; an older row without
it gets them from its `spans`, `loss_mask` and `turns`, with the reasoning tokens left unmeasured (that
needs the tokenizer, which a row does not hold).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from skillgate_core.agent.openai_policy import UsageCounts
from skillgate_core.agent.trajectory import Trajectory, assistant_turns, trajectory_span_report
from skillgate_core.credit.premise import PremiseEpisode, premise_episode, token_counts
from skillgate_core.credit.spans import SpanReport

__all__ = ["PREMISE_COLUMN", "row_premise", "tokens_recorded", "trajectory_premise", "trajectory_token_counts"]

PREMISE_COLUMN = "premise"
"""The trajectories.parquet column holding each episode's facts as JSON (PremiseEpisode.as_record)."""


def tokens_recorded(trajectory: Trajectory, tokenizer: Any) -> bool:
    """Whether the episode's sampled ids are real ids of `tokenizer`: not an endpoint's usage placeholders
    (agent.openai_policy.USAGE_ID, negative), nor counted by a stand-in tokenizer (UsageCounts)."""
    if tokenizer is None or isinstance(tokenizer, UsageCounts):
        return False
    return all(i >= 0 for i in trajectory.response_ids)


def trajectory_token_counts(trajectory: Trajectory, tokenizer: Any,
                            report: SpanReport | None = None) -> tuple[int, int, int, int] | None:
    """(sampled, name, call, reasoning) token counts (credit.premise.token_counts); None when the ids were not
    recorded. `report`: the episode's span report by the method's rule, when the caller has it."""
    if not tokens_recorded(trajectory, tokenizer):
        return None
    report = report if report is not None else trajectory_span_report(trajectory, tokenizer)
    return token_counts(report, assistant_turns(trajectory), trajectory.loss_mask, tokenizer)


def trajectory_premise(trajectory: Trajectory, tokenizer: Any, report: SpanReport | None = None, *,
                       clean: bool | None = None) -> PremiseEpisode:
    """The episode's facts; `report` must be the method's own span report (not first-mention) when given.
    Clean as the clean-oracle rate counts it: the distinct skills read are exactly {oracle} and no other skill
    was consulted (docs/reads.md: its scripts run or its files read); `clean` overrides that rule."""
    report = report if report is not None else trajectory_span_report(trajectory, tokenizer)
    counts = trajectory_token_counts(trajectory, tokenizer, report)
    sampled, name, call, reasoning = counts if counts is not None else (None, None, None, None)
    names = [r.skill_name for r in report.skill_reads]
    if clean is None and _consulted_beyond_read(report.consulted_names(), names):
        clean = False
    return premise_episode([r.category for r in report.skill_reads], names,
                           resolved=float(trajectory.score) >= 1.0, turns=len(trajectory.turns),
                           sampled_tokens=sampled, name_tokens=name, call_tokens=call, reasoning_tokens=reasoning,
                           aborted=trajectory.status == "aborted", clean=clean)


def _consulted_beyond_read(consulted: Sequence[str], read: Sequence[str]) -> bool:
    """Whether a skill was consulted (a file of it opened or run) whose SKILL.md / README.md was never read."""
    return bool(set(consulted) - set(read))


def row_premise(row: Mapping[str, Any]) -> PremiseEpisode:
    """A trajectories.parquet row's facts: its `premise` column, else derived from the columns it has
    (module docstring)."""
    stored = row.get(PREMISE_COLUMN)
    if stored:
        return PremiseEpisode.from_record(json.loads(stored) if isinstance(stored, str) else stored)
    spans = json.loads(row["spans"]) if row.get("spans") else {}
    actions = spans.get("actions", [])
    reads = spans.get("skill_reads") or [{"skill_name": a["skill_name"], "category": a["category"]} for a in actions]
    mask = list(row.get("loss_mask") or [])
    sampled = {i for i, m in enumerate(mask) if m}
    name_tokens = {int(i) for a in actions for i in a["identity_token_indices"]} & sampled
    call_tokens = {int(i) for a in actions for i in a["call_token_indices"]} & sampled
    turns = json.loads(row["turns"]) if isinstance(row.get("turns"), str) else list(row.get("turns") or [])
    read_names = [r["skill_name"] for r in reads]
    consulted = [c["skill_name"] for c in spans.get("consulted", [])]
    return premise_episode([r["category"] for r in reads], read_names,
                           resolved=float(row["score"]) >= 1.0, turns=len(turns),
                           clean=False if _consulted_beyond_read(consulted, read_names) else None,
                           sampled_tokens=len(sampled) if mask else None,
                           name_tokens=len(name_tokens) if spans else None,
                           call_tokens=len(call_tokens) if spans else None,
                           reasoning_tokens=None, aborted=row.get("status") == "aborted")

"""A trajectory: one graded episode with its exact token stream, and what span detection reads in it.

    row = trajectory.to_row()                                 # a flat JSON-able row (trajectories.parquet)
    report = trajectory_span_report(trajectory, tokenizer)    # SpanReport: reads, actions, mismatches
    span_report(trajectory, tokenizer)                        # the same, JSON-able (traj show, collect)
    premise_facts.trajectory_premise(trajectory, tokenizer)   # its premise facts (credit.premise)

The episode loop (episode.py) makes them; the collect stage, the trainer's rollouts and the
evaluation read them, each without importing the others.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from skillgate_core.credit.actions import SkillOpen
from skillgate_core.credit.spans import (
    AssistantTurn,
    SpanReport,
    detect_selection_spans,
    first_mention_identity,
)

__all__ = ["Trajectory", "TurnRecord", "assistant_turns", "span_record", "span_report",
           "trajectory_span_report"]


@dataclass(frozen=True)
class TurnRecord:
    """One assistant turn of a trajectory."""

    text: str
    """The turn's response text."""
    token_start: int
    """Offset of its first sampled id in the response sequence."""
    token_end: int
    """Offset just past its last sampled id."""
    finish: str
    """stop, length (max tokens), or budget (cut by the episode's limits)."""
    calls: tuple[tuple[str, str], ...]
    """(tool name, canonical JSON arguments) of each dispatched call, in order."""
    call_errors: int = 0
    """Malformed or failed calls in this turn."""


@dataclass(frozen=True)
class Trajectory:
    """One graded episode with its exact token stream."""

    task_id: str
    bench: str
    repeat: int
    policy: str
    prompt_profile: str
    slate_names: tuple[str, ...]
    slate_categories: tuple[str, ...]
    gold: str | None
    messages: tuple[dict[str, str], ...]
    prompt_ids: tuple[int, ...]
    response_ids: tuple[int, ...]
    loss_mask: tuple[int, ...]
    logprobs: tuple[float, ...]
    turns: tuple[TurnRecord, ...]
    status: str
    score: float
    raw_score: float | None
    missing_reward: bool
    verifier_detail: str
    backend: str
    duration_s: float
    extra: dict[str, Any] = field(default_factory=dict)
    skill_opens: tuple[SkillOpen, ...] | None = None
    """Every (skill, call) the environment saw a SKILL.md / README.md opened in, in order (a skill once
    per call; call None between calls); empty without skills. None: not observed (a record made before
    the environment watched opens): span detection then falls back to the call texts."""
    skill_consults: tuple[SkillOpen, ...] | None = None
    """Every (skill, call) the environment saw ANY file of the skill opened or executed in (SKILL.md, a
    script, data; a skill once per call; call None between calls), in order: the episode's consultation
    of skills (docs/reads.md); empty without skills. None: not observed (a record made before the
    environment watched every file): the reads are then all that is known to have been consulted."""

    def to_row(self) -> dict[str, Any]:
        """A flat JSON-able row (lists for sequences, JSON text for nested records)."""
        row = {k: v for k, v in self.__dict__.items()
               if k not in ("messages", "turns", "extra", "skill_opens", "skill_consults")}
        row.update(
            skill_opens=None if self.skill_opens is None else json.dumps([o.as_record() for o in self.skill_opens]),
            skill_consults=None if self.skill_consults is None else json.dumps(
                [o.as_record() for o in self.skill_consults]),
            messages=json.dumps(list(self.messages), ensure_ascii=False),
            turns=json.dumps([t.__dict__ for t in self.turns], ensure_ascii=False),
            extra=json.dumps(self.extra, ensure_ascii=False, sort_keys=True),
            slate_names=list(self.slate_names),
            slate_categories=list(self.slate_categories),
            prompt_ids=list(self.prompt_ids),
            response_ids=list(self.response_ids),
            loss_mask=list(self.loss_mask),
            logprobs=[None if math.isnan(x) else x for x in self.logprobs],
        )
        return row


def assistant_turns(trajectory: Trajectory) -> list[AssistantTurn]:
    """The trajectory's assistant turns as span detection reads them: text, sampled ids, dispatched calls."""
    return [
        AssistantTurn(
            response_text=t.text,
            token_ids=trajectory.response_ids[t.token_start : t.token_end],
            token_offset=t.token_start,
            dispatched=[(name, json.loads(args)) for name, args in t.calls],
            finish="stop" if t.finish == "stop" else "length",
        )
        for t in trajectory.turns
    ]


def trajectory_span_report(trajectory: Trajectory, tokenizer, *, first_mention: bool = False) -> SpanReport:
    """Selection-span detection (docs/method.md 4) over one trajectory's assistant turns. first_mention: the
    labelled variant identity_first_mention (credit.spans.first_mention_identity), never the default."""
    turns = assistant_turns(trajectory)
    slate = dict(zip(trajectory.slate_names, trajectory.slate_categories, strict=True))
    report = detect_selection_spans(turns, tokenizer, gold_name=trajectory.gold or "", slate=slate,
                                    opens=trajectory.skill_opens, consults=trajectory.skill_consults)
    return first_mention_identity(report, turns, tokenizer) if first_mention else report


def span_report(trajectory: Trajectory, tokenizer) -> dict:
    """Every read in order (`skill_reads`: attributed ones point at their action), every consulted skill
    (`consulted`: reads included), the selection actions and the mismatch counters of one trajectory,
    JSON-able; `reads` are the reads' categories."""
    return span_record(trajectory_span_report(trajectory, tokenizer))


def span_record(report: SpanReport) -> dict:
    """`span_report`'s JSON-able form of a report already computed (the collect row's `spans`)."""
    return {
        "reads": report.reads(),
        "actions": [a.as_record() for a in report.actions],
        "skill_reads": [{"skill_name": r.skill_name, "category": r.category, "action_index": r.action_index}
                        for r in report.skill_reads],
        "consulted": [{"skill_name": c.skill_name, "category": c.category} for c in report.consulted],
        "turns_checked": report.turns_checked,
        "parse_dispatch_mismatch": report.parse_dispatch_mismatch,
        "span_mismatch": report.span_mismatch,
        "alignment_mismatch": report.alignment_mismatch,
    }

"""Evaluation trial rows: one graded episode -> one flat row (eval_trials.parquet, one warehouse row).

The row schema (TRIAL_SCHEMA) is what the metrics, the bootstrap and the paper build read; keep it
exactly. Reads are what the environment saw opened (`Trajectory.skill_opens`: every skill whose
SKILL.md / README.md a process opened, once per call, in order of opening, attributed to a call or
not; docs/reads.md), categorised against the task's gold skill and slate: the same reads the
training utilities count, so a policy served over HTTP is measured the same way. A record made
before opens were observed falls back to the text of the calls the environment ran (a `read`, or an
`exec` running a reader, naming /skills/NAME/SKILL.md: one read per path). Consultation is what the
environment saw opened or executed of ANY file of a skill (`Trajectory.skill_consults`, the read ones
included): `consulted_names` lists each consulted skill once, in order; a record made before it was
observed lists the skills read.

    row = trial_row(trajectory, context, tokenizer)   # dict with exactly TRIAL_COLUMNS
    write_trials(rows, path)                  # eval_trials.parquet with TRIAL_SCHEMA (pyarrow)
    trial = to_trial(row)                     # metrics.Trial for summarize_trials
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillgate_core.agent.premise_facts import trajectory_token_counts
from skillgate_core.agent.trajectory import Trajectory
from skillgate_core.credit.spans import READER_COMMANDS, SKILL_PATH, normalise_tool_name
from skillgate_core.evaluation.metrics import Trial, summarize_trials
from skillgate_core.evaluation.rows import TRIAL_SCHEMA as _ROW_SCHEMA
from skillgate_core.evaluation.rows import write_eval_rows
from skillgate_core.formats.tool_calls import parse_tool_calls

__all__ = [
    "PREMISE_TOKEN_COLUMNS",
    "TRIAL_COLUMNS",
    "TRIAL_SCHEMA",
    "TrialContext",
    "consulted_of",
    "outcome_of",
    "reads_of",
    "row_id",
    "skill_reasoning_of",
    "summarize_rows",
    "to_trial",
    "trial_row",
    "trial_seed",
    "write_trials",
]

SKILL_REASONING_OPEN = "<skill_reasoning>"


TRIAL_SCHEMA: dict[str, str] = dict(_ROW_SCHEMA)
"""column -> Arrow type (evaluation.rows.TRIAL_SCHEMA: string, int32, int64, float64, bool, list<string>),
in eval_trials.parquet's column order; polars reads them as String, Int32, Int64, Float64, Boolean,
List(String). raw_score, first_read_category and the premise's token counts (name_tokens, read_call_tokens,
reasoning_tokens) may be null; status is completed | truncated | aborted, outcome resolved | fail | error,
error is '' unless the outcome is error."""

TRIAL_COLUMNS: tuple[str, ...] = tuple(TRIAL_SCHEMA)
"""Column order of eval_trials.parquet."""
PREMISE_TOKEN_COLUMNS: tuple[str, ...] = ("name_tokens", "read_call_tokens", "reasoning_tokens")
"""The premise's per-trial token counts (docs/method.md 8b): null when not measured, and may be missing from a
row published before they existed."""


@dataclass(frozen=True)
class TrialContext:
    """What every row of one evaluation shares."""

    protocol_id: str
    fingerprint: str
    method: str
    """A label: the profile name, the export id or the served model name."""
    experiment_id: str
    export_id: str
    policy: str
    """Path of the model, or the endpoint URL."""
    protocol_seed: int


def trial_seed(protocol_seed: int, task_id: str, repeat: int) -> int:
    """The sampling seed of one trial: fixed by the protocol seed, the task and the repeat (63 bits)."""
    digest = hashlib.sha256(f"eval-trial::{protocol_seed}::{task_id}::{repeat}".encode()).hexdigest()
    return int(digest[:15], 16)


def row_id(task_id: str, repeat: int) -> str:
    """ROW_ID of a trial under eval/EVAL_ID/rows/."""
    return f"{task_id}--r{repeat}"


def _is_read(name: str, arguments: Mapping[str, Any]) -> bool:
    name = normalise_tool_name(name)
    if name == "read":
        return True
    return name == "exec" and READER_COMMANDS.search(json.dumps(arguments, ensure_ascii=False)) is not None


def _category(name: str, gold: str, slate: Mapping[str, str]) -> str:
    cat = "oracle" if name == gold else slate.get(name, "unadvertised")
    return cat if cat in ("oracle", "misleading", "relevant", "irrelevant") else "unadvertised"


def reads_of(trajectory: Trajectory) -> tuple[list[str], list[str]]:
    """(categories, names) of the episode's skill reads, in order (module docstring)."""
    slate = dict(zip(trajectory.slate_names, trajectory.slate_categories, strict=True))
    gold = trajectory.gold or ""
    if trajectory.skill_opens is not None:
        names = [o.skill_name for o in trajectory.skill_opens]
        return [_category(n, gold, slate) for n in names], names
    categories: list[str] = []
    names = []
    for turn in trajectory.turns:
        if not turn.calls:  # nothing ran: a final answer, or a turn cut by length/budget
            continue
        for call in parse_tool_calls(turn.text).calls:
            if call.key() not in turn.calls or not _is_read(call.name, call.arguments):
                continue
            for m in SKILL_PATH.finditer(call.raw(turn.text)):
                name = m.group(1)
                categories.append(_category(name, gold, slate))
                names.append(name)
    return categories, names


def consulted_of(trajectory: Trajectory, read_names: Sequence[str] = ()) -> list[str]:
    """Every skill the episode consulted (any file of it opened or executed), once, in order of first
    consultation, `read_names` included (without an observed record, they are all that is known)."""
    names = [o.skill_name for o in trajectory.skill_consults or ()]
    return list(dict.fromkeys([*names, *read_names]))


def skill_reasoning_of(trajectory: Trajectory) -> bool:
    """The first assistant turn opens with <skill_reasoning> (docs/method.md 2)."""
    return bool(trajectory.turns) and trajectory.turns[0].text.lstrip().startswith(SKILL_REASONING_OPEN)


def outcome_of(status: str, score: float) -> str:
    """error = aborted (infrastructure); resolved = score >= 1; else fail (docs/method.md 3, 8)."""
    if status == "aborted":
        return "error"
    return "resolved" if score >= 1.0 else "fail"


def trial_row(trajectory: Trajectory, context: TrialContext, tokenizer: Any = None) -> dict[str, Any]:
    """The row of one graded episode, columns in TRIAL_COLUMNS order. With the tokenizer that sampled it, the
    premise's token counts (agent.premise_facts: skill-name, read-call and <skill_reasoning> tokens among the
    sampled ones); without one, or for ids an endpoint's usage stood in for, they are null."""
    reads, names = reads_of(trajectory)
    counts = trajectory_token_counts(trajectory, tokenizer) if tokenizer is not None else None
    _, name_tokens, call_tokens, reasoning_tokens = counts if counts is not None else (None, None, None, None)
    outcome = outcome_of(trajectory.status, trajectory.score)
    row = {
        "protocol_id": context.protocol_id,
        "fingerprint": context.fingerprint,
        "method": context.method,
        "experiment_id": context.experiment_id,
        "export_id": context.export_id,
        "policy": context.policy,
        "task_id": trajectory.task_id,
        "benchmark": trajectory.bench,
        "repeat": trajectory.repeat,
        "status": trajectory.status,
        "outcome": outcome,
        "score": float(trajectory.score),
        "raw_score": None if trajectory.raw_score is None else float(trajectory.raw_score),
        "error": (trajectory.verifier_detail or "aborted") if outcome == "error" else "",
        "reads": reads,
        "read_names": names,
        "consulted_names": consulted_of(trajectory, names),
        "first_read_category": reads[0] if reads else None,
        "skill_reasoning": skill_reasoning_of(trajectory),
        "turns": len(trajectory.turns),
        "response_tokens": len(trajectory.response_ids),
        "loss_tokens": int(sum(trajectory.loss_mask)),
        "seconds": float(trajectory.duration_s),
        "seed": trial_seed(context.protocol_seed, trajectory.task_id, trajectory.repeat),
        "name_tokens": name_tokens,
        "read_call_tokens": call_tokens,
        "reasoning_tokens": reasoning_tokens,
    }
    return {k: row[k] for k in TRIAL_COLUMNS}


def write_trials(rows: Iterable[Mapping[str, Any]], path: Path) -> Path:
    """Write the rows to `path` with exactly TRIAL_SCHEMA, in the caller's order (pyarrow: no polars)."""
    rows = list(rows)
    for r in rows:
        missing = [c for c in TRIAL_COLUMNS if c not in r and c not in PREMISE_TOKEN_COLUMNS]
        if missing:
            raise ValueError(f"trial row {r.get('task_id')}#{r.get('repeat')} lacks columns {missing}")
    # a row published before the premise columns existed (an evaluation resumed across the change) gets nulls
    return write_eval_rows([{c: r.get(c) for c in TRIAL_COLUMNS} for r in rows], path)


def to_trial(row: Mapping[str, Any]) -> Trial:
    """A row as metrics.Trial (what summarize_trials takes), cost columns included (turns, tokens, seconds:
    2026-12-01 they were dropped here, and every summary.json reported a cost of 0 per trial)."""
    return Trial.from_row(row)


def summarize_rows(rows: Sequence[Mapping[str, Any]], repeats: int = 4) -> dict[str, Any]:
    """summarize_trials (docs/method.md 8 metrics) over trial rows: pass@1, pass@4 and pass@repeats."""
    ks = sorted({1, min(4, repeats), repeats})
    return summarize_trials([to_trial(r) for r in rows], ks=ks)

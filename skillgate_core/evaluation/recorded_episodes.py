"""Recorded episodes read back for a person to inspect (`skillgate traj show`).

Two kinds of record hold an episode's turns:

- a trajectories dataset (stage `collect`: trajectories.parquet, one row per episode) keeps the exact
  token stream: prompt and response ids, the loss mask, each assistant turn's token range, and the
  selection actions that span detection attributed (docs/method.md 4) with their call and identity tokens;
- an evaluation's per-trial logs (rows/ROW_ID/trajectory.json) keep the messages and the turns with
  their dispatched calls, but no token ids: actions are found from the calls with the same rules
  (a read call naming /skills/NAME/SKILL.md), without token counts.

A GRPO run's credit_episodes.jsonl holds only per-episode token counts (no turns), so it is not a
source of episodes.

Credit: when the record holds several episodes of one task (a collect with repeats > 1 is a GRPO
group in all but name), each episode gets what docs/method.md 5 would give it in that group: the task
advantage on raw scores, and a selector advantage per read action under a selection utility
(clean_oracle: SkillGate; first_oracle: the selector_action_credit ablation). A group the training
filter would reject (a span mismatch, or every score equal) gets no numbers, only the reason.

    episodes = load_episodes(Path(".../collect/KEY/trajectories"))
    ep = episodes[3]; ep.turns[0].actions[0].selector_advantage
    recorded_premise(episodes)     # the record's premise numbers (docs/method.md 8b)
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from skillgate_core.agent.premise_facts import row_premise
from skillgate_core.credit import selector_advantages, task_advantages
from skillgate_core.credit.premise import PremiseEpisode, summarize_premise
from skillgate_core.credit.spans import READER_COMMANDS, SKILL_PATH, normalise_tool_name
from skillgate_core.evaluation.metrics import Trial
from skillgate_core.evaluation.runner import TRAJECTORY_FILE

__all__ = ["EpisodeCredit", "RecordedAction", "RecordedEpisode", "RecordedTurn", "TRAJECTORIES_FILE",
           "load_episodes", "recorded_premise"]

TRAJECTORIES_FILE = "trajectories.parquet"
"""The collect stage's file inside its `trajectories` output."""
ZERO_VARIANCE = 1e-12
"""Max - min raw score at or below which the dynamic filter rejects a group (docs/method.md 5)."""


# Declarations below, not logic: each field documented where it is declared (docs/design.md, Style).
@dataclass(frozen=True)
class RecordedAction:
    """One selection action: a read call that named a skill."""

    turn_index: int
    """The assistant turn (0 = first)."""
    call_index: int
    """The call within the turn, in dispatch order."""
    tool_name: str
    """read, or exec running a reader."""
    skill_name: str
    """The skill the path names."""
    category: str
    """oracle / misleading / relevant / irrelevant / unadvertised, for this task's slate."""
    call_tokens: int | None
    """Tokens of the whole tool call (outcome credit never touches them); None: not recorded."""
    identity_tokens: int | None
    """Tokens of the skill name (the only carriers of selector credit); None: not recorded."""
    selector_advantage: float | None = None
    """A_sel of this action in its group (EpisodeCredit says under which utility), when computed."""


@dataclass(frozen=True)
class RecordedTurn:
    """One assistant turn and the observation that followed it."""

    text: str
    """What the policy wrote (sampled tokens: trained when the loss mask is 1)."""
    finish: str
    """stop, length or budget."""
    calls: tuple[tuple[str, str], ...]
    """(tool name, JSON arguments) of each dispatched call."""
    observation: str | None
    """The tool responses the environment sent back (context), None after the last turn."""
    tokens: tuple[int, int] | None
    """[start, end) of the turn in the response ids; None when not recorded."""
    trained_tokens: int | None
    """Loss-mask-1 tokens within the turn."""
    context_tokens_after: int | None
    """Loss-mask-0 tokens between this turn and the next (the observation and the next header)."""
    actions: tuple[RecordedAction, ...]
    """The selection actions this turn made."""


@dataclass(frozen=True)
class EpisodeCredit:
    """What the episode's group (the record's episodes of the same task) gives it."""

    utility: str
    """The selection utility of the selector advantages (clean_oracle = SkillGate)."""
    group_size: int
    """Episodes of this task in the record."""
    task_advantage: float | None
    """GRPO advantage on the raw score; None when the group would be rejected."""
    note: str = ""
    """Why there are no numbers (a rejected group), else ''."""


@dataclass(frozen=True)
class RecordedEpisode:
    """One episode as recorded, with its turns, token accounting, actions and credit."""

    number: int
    """Its position in the record (what `--episode` takes), 0 = first."""
    source: str
    """The file it was read from."""
    task_id: str
    bench: str
    repeat: int
    policy: str
    status: str
    score: float
    raw_score: float | None
    gold: str | None
    """The task's oracle skill."""
    verifier_detail: str
    slate: tuple[tuple[str, str], ...]
    """(skill name, category) in prompt order."""
    system: str
    """The system prompt (tool schemas, instructions, the skills list): context."""
    instruction: str
    """The task instruction (the user message): context."""
    prompt_tokens: int | None
    response_tokens: int | None
    trained_tokens: int | None
    """Loss-mask-1 tokens of the whole response."""
    turns: tuple[RecordedTurn, ...]
    mismatches: Mapping[str, int]
    """Span detection's counters (parse_dispatch / span / alignment); empty when not recorded."""
    credit: EpisodeCredit | None = None
    """Group credit, when the record holds other episodes of the task."""
    consulted: tuple[tuple[str, str], ...] | None = None
    """(skill name, category) of every skill any file of which the episode opened or executed, in order
    (docs/reads.md: consultation, the reads included); None when the record did not observe it."""
    premise: PremiseEpisode | None = None
    """Its premise facts (credit.premise, docs/method.md 8b): from the trajectories row, or from the trial row
    beside an evaluation log; None for a lone log without its row."""

    @property
    def actions(self) -> tuple[RecordedAction, ...]:
        return tuple(a for t in self.turns for a in t.actions)

    @property
    def reads(self) -> list[str]:
        """Categories of its read actions, in order (what the utilities take)."""
        return [a.category for a in self.actions]

    @property
    def consulted_categories(self) -> list[str]:
        """Categories of the consulted skills (the clean test's input); the reads' when not recorded."""
        return self.reads if self.consulted is None else [c for _, c in self.consulted]


def _observations(messages: Sequence[Mapping[str, str]]) -> list[str | None]:
    """The message after each assistant message (its tool responses), None after the last."""
    out: list[str | None] = []
    for i, m in enumerate(messages):
        if m.get("role") == "assistant":
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            out.append(nxt["content"] if nxt is not None and nxt.get("role") != "assistant" else None)
    return out


def _category(name: str, slate: Mapping[str, str], gold: str | None) -> str:
    return "oracle" if gold and name == gold else slate.get(name, "unadvertised")


def _text_actions(turn_index: int, calls: Sequence[Sequence[str]], slate: Mapping[str, str],
                  gold: str | None) -> list[RecordedAction]:
    """Actions of a turn from its dispatched calls (docs/method.md 4.2-4.4), for records without tokens."""
    actions = []
    for k, (name, args) in enumerate(calls):
        tool = normalise_tool_name(name)
        if tool == "read" or (tool == "exec" and READER_COMMANDS.search(args)):
            for m in SKILL_PATH.finditer(args):
                actions.append(RecordedAction(turn_index, k, name, m.group(1), _category(m.group(1), slate, gold),
                                              None, None))
    return actions


def _prompt(messages: Sequence[Mapping[str, str]]) -> tuple[str, str]:
    system = next((m["content"] for m in messages if m.get("role") == "system"), "")
    user = next((m["content"] for m in messages if m.get("role") == "user"), "")
    return system, user


def _from_parquet_row(number: int, source: str, row: Mapping[str, Any]) -> RecordedEpisode:
    messages = json.loads(row["messages"])
    turns_raw = json.loads(row["turns"])
    spans = json.loads(row["spans"]) if row.get("spans") else {}
    mask = list(row["loss_mask"])
    recorded = [a for a in spans.get("actions", [])]
    observations = _observations(messages)
    turns = []
    for i, t in enumerate(turns_raw):
        start, end = int(t["token_start"]), int(t["token_end"])
        nxt = int(turns_raw[i + 1]["token_start"]) if i + 1 < len(turns_raw) else len(mask)
        actions = tuple(RecordedAction(a["turn_index"], a["call_index"], a["tool_name"], a["skill_name"],
                                       a["category"], len(a["call_token_indices"]), len(a["identity_token_indices"]))
                        for a in recorded if a["turn_index"] == i)
        turns.append(RecordedTurn(
            text=t["text"], finish=t["finish"], calls=tuple(tuple(c) for c in t["calls"]),
            observation=observations[i] if i < len(observations) else None, tokens=(start, end),
            trained_tokens=sum(mask[start:end]), context_tokens_after=sum(1 for m in mask[end:nxt] if m == 0),
            actions=actions))
    system, instruction = _prompt(messages)
    return RecordedEpisode(
        number=number, source=source, task_id=row["task_id"], bench=row["bench"], repeat=int(row["repeat"]),
        policy=row["policy"], status=row["status"], score=float(row["score"]),
        raw_score=None if row.get("raw_score") is None else float(row["raw_score"]), gold=row.get("gold"),
        verifier_detail=row.get("verifier_detail") or "",
        slate=tuple(zip(row["slate_names"], row["slate_categories"], strict=True)), system=system,
        instruction=instruction, prompt_tokens=len(row["prompt_ids"]), response_tokens=len(mask),
        trained_tokens=sum(mask), turns=tuple(turns),
        mismatches={k: int(spans[k]) for k in ("parse_dispatch_mismatch", "span_mismatch", "alignment_mismatch")
                    if k in spans},
        consulted=(tuple((str(c["skill_name"]), str(c["category"])) for c in spans["consulted"])
                   if "consulted" in spans else None), premise=row_premise(row))


def _from_log(number: int, source: str, log: Mapping[str, Any], row: Mapping[str, Any] | None = None) -> RecordedEpisode:
    """An evaluation's per-trial log; `row`: its trial row (row.json beside it), which holds the premise facts."""
    messages = log.get("messages", [])
    slate_pairs = tuple((str(n), str(c)) for n, c in log.get("slate", []))
    slate, gold = dict(slate_pairs), log.get("gold")
    observations = _observations(messages)
    turns = []
    for i, t in enumerate(log.get("turns", [])):
        turns.append(RecordedTurn(
            text=t["text"], finish=t["finish"], calls=tuple(tuple(c) for c in t["calls"]),
            observation=observations[i] if i < len(observations) else None, tokens=None, trained_tokens=None,
            context_tokens_after=None, actions=tuple(_text_actions(i, t["calls"], slate, gold))))
    system, instruction = _prompt(messages)
    return RecordedEpisode(
        number=number, source=source, task_id=log["task_id"], bench=log.get("bench", ""),
        repeat=int(log.get("repeat", 0)), policy=str(log.get("policy", "")), status=log.get("status", ""),
        score=float(log.get("score") or 0.0), raw_score=log.get("raw_score"), gold=gold,
        verifier_detail=log.get("verifier_detail", ""), slate=slate_pairs, system=system, instruction=instruction,
        prompt_tokens=log.get("prompt_tokens"), response_tokens=log.get("response_tokens"), trained_tokens=None,
        turns=tuple(turns), mismatches={},
        consulted=None if log.get("skill_consults") is None else tuple(
            (n, _category(n, slate, gold)) for n in dict.fromkeys(str(o["skill_name"]) for o in log["skill_consults"])),
        premise=_row_facts(row))


def _row_facts(row: Mapping[str, Any] | None) -> PremiseEpisode | None:
    """The premise facts of a trial row; None without one, or for a row that does not read as a trial (a
    damaged row.json must not keep the episode from being shown)."""
    if row is None:
        return None
    try:
        return Trial.from_row(row).premise()
    except (KeyError, TypeError, ValueError):
        return None


def _trial_row(log: Path) -> dict[str, Any] | None:
    """The trial row published beside a per-trial log (rows/ROW_ID/row.json), None when there is none or it is
    not a JSON object (a damaged file: the log is still shown)."""
    path = log.parent / "row.json"
    if not path.is_file():
        return None
    try:
        row = json.loads(path.read_text())
    except ValueError:
        return None
    return row if isinstance(row, dict) else None


def _group_credit(group: list[RecordedEpisode], utility: str) -> list[RecordedEpisode]:
    """The group's episodes with their credit (docs/method.md 5), or with the reason a filter rejects it."""
    n = len(group)
    scores = [e.raw_score if e.raw_score is not None else e.score for e in group]
    reason = ""
    if any(v for e in group for v in e.mismatches.values()):
        reason = "a span mismatch in the group: training rejects the whole group (no credit)"
    elif max(scores) - min(scores) <= ZERO_VARIANCE:
        reason = "every episode scored the same: the dynamic filter rejects the group (no credit)"
    if reason:
        return [replace(e, credit=EpisodeCredit(utility, n, None, reason)) for e in group]
    a_task = task_advantages(scores)
    a_sel = selector_advantages([e.reads for e in group], utility, None, [e.consulted_categories for e in group])
    out = []
    for e, adv, sel in zip(group, a_task, a_sel, strict=True):
        values = iter(sel)
        turns = tuple(replace(t, actions=tuple(replace(a, selector_advantage=next(values)) for a in t.actions))
                      for t in e.turns)
        out.append(replace(e, turns=turns, credit=EpisodeCredit(utility, n, adv)))
    return out


def _with_credit(episodes: list[RecordedEpisode], utility: str) -> list[RecordedEpisode]:
    groups: dict[tuple[str, str, str], list[RecordedEpisode]] = defaultdict(list)
    for e in episodes:
        groups[(e.task_id, e.bench, e.policy)].append(e)
    credited = {e.number: e for g in groups.values() if len(g) > 1 for e in _group_credit(g, utility)}
    return [credited.get(e.number, e) for e in episodes]


def _read_source(path: Path) -> list[RecordedEpisode]:
    if path.is_dir() and (path / TRAJECTORIES_FILE).is_file():
        path = path / TRAJECTORIES_FILE
    if path.is_file() and path.suffix == ".parquet":
        from skillgate_core.base.parquet_rows import read_rows

        return [_from_parquet_row(i, str(path), row) for i, row in enumerate(read_rows(path))]
    if path.is_file() and path.suffix == ".json":
        return [_from_log(0, str(path), json.loads(path.read_text()), _trial_row(path))]
    # an evaluation's folder (rows/ROW_ID/trajectory.json) or its rows/ folder; never a deeper search,
    # which would mix the trials of several evaluations into one record (and into one credit group)
    logs = sorted([*path.glob(f"rows/*/{TRAJECTORY_FILE}"), *path.glob(f"*/{TRAJECTORY_FILE}")]) if path.is_dir() else []
    if logs:
        rows = {log: _trial_row(log) for log in logs}  # the trial's row: its place in the evaluation, its facts

        def trial_index(log: Path) -> tuple[int, str]:
            row = rows[log]
            return int((row or {}).get("trial_index", 0)), str(log)

        ordered = sorted(logs, key=trial_index)
        return [_from_log(i, str(p), json.loads(p.read_text()), rows[p]) for i, p in enumerate(ordered)]
    raise FileNotFoundError(
        f"{path}: no episodes here; expected a trajectories dataset (a folder holding {TRAJECTORIES_FILE}, or the "
        f"file), an evaluation folder (rows/*/{TRAJECTORY_FILE}) or one {TRAJECTORY_FILE}")


def load_episodes(path: Path, utility: str = "clean_oracle") -> list[RecordedEpisode]:
    """Every episode recorded at `path` (module docstring), in record order, with group credit under
    `utility` where the record holds a group."""
    if not Path(path).exists():
        raise FileNotFoundError(f"{path}: no such file or folder")
    return _with_credit(_read_source(Path(path)), utility)


def recorded_premise(episodes: Sequence[RecordedEpisode]) -> dict[str, Any]:
    """The premise numbers (credit.premise.summarize_premise) of the episodes that carry their facts, with
    `without_facts`: how many do not (a log whose trial row is missing)."""
    facts = [e.premise for e in episodes if e.premise is not None]
    return {**summarize_premise(facts), "without_facts": len(episodes) - len(facts)}

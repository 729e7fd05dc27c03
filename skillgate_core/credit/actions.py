"""Skill reads: what the environment saw opened, and the attributed ones selector credit is assigned to.

- `SkillOpen`: the environment's record (envs/skill_opens.py) that a file of a skill was opened while
  one tool call ran (or between calls: a background job), whatever the command looked like. A
  trajectory holds them in order: its SKILL.md / README.md (`skill_opens`: reads), or any of its files
  (`skill_consults`: consultation).
- `SelectionAction`: an opened skill whose name the call that opened it wrote as a `/skills/NAME`
  path: span detection gives it call and identity tokens; token weights consume them. Token indices
  are offsets into the episode's response token sequence, the same coordinates as the loss mask.
- `SkillRead`: one read of the episode in order, attributed (an action) or not (a glob, a relative
  path after `cd /skills`: it counts in the utilities but has no tokens to credit).
- `ConsultedSkill`: a skill any file of which the episode opened or executed (a read, a script run, a
  data file): an episode that consulted a skill other than its one oracle read is not clean.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

__all__ = ["CATEGORIES", "Category", "ConsultedSkill", "SelectionAction", "SkillOpen", "SkillRead"]

Category = Literal["oracle", "misleading", "relevant", "irrelevant", "unadvertised"]
"""What the read skill is for this task: the gold skill, a slate member of one kind, or off-slate."""

CATEGORIES: tuple[Category, ...] = get_args(Category)


# Declarations below, not logic: each field documented where it is declared (docs/design.md, Style).
@dataclass(frozen=True)
class SkillOpen:
    """The environment saw a process open a file of this skill during one window: its SKILL.md / README.md
    in `Trajectory.skill_opens` (a read), any of its files in `Trajectory.skill_consults`."""

    skill_name: str
    """The skill folder the opened file lies in (/skills/NAME/)."""
    turn_index: int | None
    """The assistant turn whose call was running; None between calls (a background job)."""
    call_index: int | None
    """That call's index within its turn, in dispatch order; None with turn_index None."""

    def as_record(self) -> dict[str, Any]:
        """Plain JSON-able form, for trajectory records."""
        return {"skill_name": self.skill_name, "turn_index": self.turn_index, "call_index": self.call_index}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> SkillOpen:
        """Inverse of `as_record`; a clear error naming the field that is wrong."""
        name = record.get("skill_name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"skill open {dict(record)}: 'skill_name' must be a non-empty string")
        turn, call = record.get("turn_index"), record.get("call_index")
        for key, value in (("turn_index", turn), ("call_index", call)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ValueError(f"skill open {dict(record)}: '{key}' must be null or an index >= 0")
        if (turn is None) != (call is None):
            raise ValueError(f"skill open {dict(record)}: 'turn_index' and 'call_index' are both null or both set")
        return cls(name, turn, call)


@dataclass(frozen=True)
class SkillRead:
    """One skill read of an episode, in the order the environment saw it (the utilities' input)."""

    skill_name: str
    """The skill opened."""
    category: Category
    """oracle / misleading / relevant / irrelevant by slate membership, else unadvertised."""
    action_index: int | None
    """Index of its SelectionAction in the episode's actions when attributed; None when unattributed."""

    @property
    def attributed(self) -> bool:
        return self.action_index is not None


@dataclass(frozen=True)
class ConsultedSkill:
    """A skill the episode consulted: a process opened or executed a file of its folder (docs/reads.md)."""

    skill_name: str
    """The skill folder (/skills/NAME/)."""
    category: Category
    """oracle / misleading / relevant / irrelevant by slate membership, else unadvertised."""


@dataclass(frozen=True)
class SelectionAction:
    """One skill named by one read call of one assistant turn."""

    turn_index: int
    """Index of the assistant turn in the episode (0 = first)."""
    call_index: int
    """Index of the tool call within that turn, in dispatch order."""
    path_index: int
    """Index of this action among the call's actions (an exec may read two skills), in order of opening."""
    tool_name: str
    """The tool that performed the read (`read`, or `exec` running a reader command)."""
    skill_name: str
    """The skill opened and named in the call as `/skills/NAME`."""
    category: Category
    """oracle / misleading / relevant / irrelevant by slate membership, else unadvertised."""
    call_token_indices: tuple[int, ...]
    """Response tokens overlapping the whole `<tool_call>...</tool_call>`; masked out of task credit."""
    identity_token_indices: tuple[int, ...]
    """Response tokens overlapping only the skill name where the call writes it; the only carriers of selector credit."""
    first_mention: bool = False
    """True under the labelled variant identity_first_mention: the identity tokens are the FIRST mention
    of the name in the turn (in <skill_reasoning> or the call), so they may lie before the call."""

    def __post_init__(self) -> None:
        # Fail at construction rather than let a malformed span reach the weights: span detection
        # must count a span_mismatch instead of building an action that breaks these rules.
        if self.category not in CATEGORIES:
            raise ValueError(f"unknown category {self.category!r}; expected one of {CATEGORIES}")
        for name in ("call_token_indices", "identity_token_indices"):
            indices = getattr(self, name)
            if not isinstance(indices, tuple):
                object.__setattr__(self, name, tuple(int(i) for i in indices))
                indices = getattr(self, name)
            if len(set(indices)) != len(indices):
                raise ValueError(f"{name} repeats an index: {indices}")
            if any(i < 0 for i in indices):
                raise ValueError(f"{name} holds a negative index: {indices}")
        if not self.identity_token_indices:
            raise ValueError("identity_token_indices must be non-empty")
        if not self.first_mention and not set(self.identity_token_indices) <= set(self.call_token_indices):
            raise ValueError(
                "identity tokens must be a subset of call tokens: "
                f"{self.identity_token_indices} not within {self.call_token_indices}"
            )

    def as_record(self) -> dict[str, Any]:
        """Plain JSON-able form, for trajectory records and parquet rows."""
        return {
            "turn_index": self.turn_index,
            "call_index": self.call_index,
            "path_index": self.path_index,
            "tool_name": self.tool_name,
            "skill_name": self.skill_name,
            "category": self.category,
            "call_token_indices": list(self.call_token_indices),
            "identity_token_indices": list(self.identity_token_indices),
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> SelectionAction:
        """Inverse of `as_record`; validates like the constructor."""
        return cls(
            turn_index=int(record["turn_index"]),
            call_index=int(record["call_index"]),
            path_index=int(record["path_index"]),
            tool_name=str(record["tool_name"]),
            skill_name=str(record["skill_name"]),
            category=record["category"],
            call_token_indices=tuple(int(i) for i in record["call_token_indices"]),
            identity_token_indices=tuple(int(i) for i in record["identity_token_indices"]),
        )

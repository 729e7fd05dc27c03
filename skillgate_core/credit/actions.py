"""One attributed skill read: the unit that selector credit is assigned to (METHOD.md 4.6).

Span detection (a later module) turns each `/skills/NAME/SKILL.md` match inside a read call into a
`SelectionAction`; utilities, advantages and token weights consume them. Token indices are offsets
into the episode's response token sequence, the same coordinates as the episode's loss mask.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

__all__ = ["CATEGORIES", "Category", "SelectionAction"]

Category = Literal["oracle", "misleading", "relevant", "irrelevant", "unadvertised"]
"""What the read skill is for this task: the gold skill, a slate member of one kind, or off-slate."""

CATEGORIES: tuple[Category, ...] = get_args(Category)


# Declarations below, not logic: each field documented where it is declared (DESIGN.md Style).
@dataclass(frozen=True)
class SelectionAction:
    """One skill named by one read call of one assistant turn."""

    turn_index: int
    """Index of the assistant turn in the episode (0 = first)."""
    call_index: int
    """Index of the tool call within that turn, in dispatch order."""
    path_index: int
    """Index of this skill path among the matches in the call's raw text (an exec may name two)."""
    tool_name: str
    """The tool that performed the read (`read`, or `exec` running a reader command)."""
    skill_name: str
    """The skill name captured from `/skills/NAME/SKILL.md`."""
    category: Category
    """oracle / misleading / relevant / irrelevant by slate membership, else unadvertised."""
    call_token_indices: tuple[int, ...]
    """Response tokens overlapping the whole `<tool_call>...</tool_call>`; masked out of task credit."""
    identity_token_indices: tuple[int, ...]
    """Response tokens overlapping only the skill-name capture; the only carriers of selector credit."""

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
        if not set(self.identity_token_indices) <= set(self.call_token_indices):
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

"""What the loop records per (skill, structure): verdict, reason, rounds, calls, tokens and cost."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = ["BuildRecord", "CallRecord", "Verdict"]

Verdict = Literal["accepted", "skipped", "unresolved"]


# Declarations below, not logic: each field documented where it is declared (docs/design.md, Style).
@dataclass(frozen=True)
class CallRecord:
    """One model call."""

    role: str
    """fit-check, builder or reviewer."""
    round: int
    """Build round it belongs to (0 for the fit-check)."""
    prompt_tokens: int
    """usage.prompt_tokens."""
    completion_tokens: int
    """usage.completion_tokens."""
    seconds: float
    """Request wall time."""


@dataclass(frozen=True)
class BuildRecord:
    """The outcome for one skill and one reasoning structure."""

    skill: str
    """Skill name."""
    structure: str
    """procedural, diagnosis, constraints or planning."""
    task_id: str
    """The package id."""
    verdict: Verdict
    """accepted (all gates passed), skipped (fit-check said no) or unresolved (kept apart)."""
    reason: str
    """Why skipped / unresolved; "" when accepted."""
    rounds: int
    """Builder rounds used (1 = no repair)."""
    path: str
    """Where the package was written ("" when skipped)."""
    calls: tuple[CallRecord, ...] = ()
    """Every model call, in order."""
    history: tuple[str, ...] = ()
    """The problems fed back to the builder, round by round."""
    cost_usd: float = 0.0
    """Token cost at the configured prices."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Gate verdicts and other facts."""

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens for c in self.calls)

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens for c in self.calls)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens)
        return data

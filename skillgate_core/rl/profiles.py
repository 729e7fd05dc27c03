"""The training profiles (docs/method.md 7): what differs between the compared RL runs.

This is the registry: a new profile is one `Profile` in `_ALL` plus its recipe `rl.<name>` (and deployment).
Prose and tests never state how many there are; they count `profile_names()` (tests/repo/test_profile_count.py).

All profiles share the GRPO base recipe; a profile fixes only the slate the agent sees, how
advantages are built (behaviour term, selector utility), the selector coefficient lambda and the
loss kind. The recipe's numbers (clip ranges, beta, lr) live in configs, not here.

    >>> get_profile("selector_clean_oracle_action_credit").utility
    'clean_oracle'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

__all__ = [
    "PROFILES",
    "BehaviourTerm",
    "LossKind",
    "Profile",
    "SlateMode",
    "UnknownProfileError",
    "get_profile",
    "profile_names",
]

SlateMode = Literal["none", "mixed", "paired"]
"""none = no skills; mixed = the 16-skill slate; paired = each task as a no-skill + a slate group."""
BehaviourTerm = Literal["none", "mixed_separated", "hybrid_slate"]
"""Episode-level behaviour term added to the task advantage (skillgate_core.credit.behaviour)."""
LossKind = Literal["plain_clipped", "two_stream"]
"""plain_clipped = grpo_clipped_loss on the loss mask; two_stream = selector_grpo_loss."""
UtilityName = Literal["clean_oracle", "first_oracle"]


class UnknownProfileError(ValueError):
    """A profile name that is not in the registry; the message lists the valid names."""


@dataclass(frozen=True)
class Profile:
    """One RL training profile."""

    name: str
    """Registry key; also the recipe and experiment label."""
    slate: SlateMode
    """Which skills the agent is shown."""
    behaviour: BehaviourTerm
    """Behaviour term added to every token's task advantage ("none" for plain GRPO)."""
    utility: UtilityName | None
    """Selector utility of the two-stream profiles; None when there is no selector stream."""
    selector_coef: float
    """lambda, the selector-stream coefficient (0 when there is no selector stream or it is masked)."""
    loss: LossKind
    """Which loss function trains the policy."""

    def __post_init__(self) -> None:
        # The combinations below are the only coherent ones; refusing others keeps a typo in a
        # recipe from silently training a different method.
        if self.loss == "two_stream":
            if self.utility is None or self.slate != "mixed" or self.behaviour != "none":
                raise ValueError(
                    f"{self.name}: a two-stream profile needs a utility, the mixed slate, no behaviour term"
                )
            if self.selector_coef < 0:
                raise ValueError(f"{self.name}: selector_coef must be >= 0")
        elif self.utility is not None or self.selector_coef != 0.0:
            raise ValueError(f"{self.name}: a plain-clipped profile has no utility and lambda = 0")
        if (self.behaviour == "hybrid_slate") != (self.slate == "paired"):
            raise ValueError(f"{self.name}: hybrid_slate goes with the paired slate and only with it")
        if self.behaviour == "mixed_separated" and self.slate != "mixed":
            raise ValueError(f"{self.name}: mixed_separated needs the mixed slate")

    @property
    def uses_reads(self) -> bool:
        """True when credit depends on the episodes' read actions, so span detection must pass."""
        return self.loss == "two_stream" or self.behaviour != "none"

    @property
    def checks_spans(self) -> bool:
        """True for every profile that shows a slate: its groups pass the same fail-closed span checks
        (docs/method.md 4), whether or not its credit reads the spans, so every arm is filtered by one rule."""
        return self.slate != "none"

    @property
    def forces_acceptance(self) -> bool:
        """True for the plain-GRPO profiles (no_skill, mixed_task_reward): after 64 rejected groups or
        300 rejected samples in one rollout step, zero-variance groups are accepted anyway (docs/method.md 5).
        Every profile applies the dynamic filter; only these two ever waive it."""
        return self.loss == "plain_clipped" and self.behaviour == "none"


_ALL = (
    Profile(
        "no_skill", slate="none", behaviour="none", utility=None, selector_coef=0.0, loss="plain_clipped"
    ),
    Profile(
        "mixed_task_reward",
        slate="mixed",
        behaviour="none",
        utility=None,
        selector_coef=0.0,
        loss="plain_clipped",
    ),
    Profile(
        "mixed_separated",
        slate="mixed",
        behaviour="mixed_separated",
        utility=None,
        selector_coef=0.0,
        loss="plain_clipped",
    ),
    Profile(
        "hybrid_slate",
        slate="paired",
        behaviour="hybrid_slate",
        utility=None,
        selector_coef=0.0,
        loss="plain_clipped",
    ),
    Profile(
        "selector_action_credit",
        slate="mixed",
        behaviour="none",
        utility="first_oracle",
        selector_coef=0.2,
        loss="two_stream",
    ),
    Profile(
        "selector_clean_oracle_masked_task_only",
        slate="mixed",
        behaviour="none",
        utility="clean_oracle",
        selector_coef=0.0,
        loss="two_stream",
    ),
    Profile(
        "selector_clean_oracle_action_credit",
        slate="mixed",
        behaviour="none",
        utility="clean_oracle",
        selector_coef=0.2,
        loss="two_stream",
    ),
)

PROFILES: Mapping[str, Profile] = MappingProxyType({p.name: p for p in _ALL})
"""name -> Profile, read-only, in docs/method.md 7 table order."""


def profile_names() -> tuple[str, ...]:
    """The valid profile names, in docs/method.md 7 table order."""
    return tuple(PROFILES)


def get_profile(name: str) -> Profile:
    """The profile called `name`; raises UnknownProfileError listing the valid names."""
    try:
        return PROFILES[name]
    except KeyError:
        raise UnknownProfileError(
            f"unknown RL profile {name!r}; valid profiles: {', '.join(profile_names())}"
        ) from None

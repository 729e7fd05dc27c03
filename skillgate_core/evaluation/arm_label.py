"""A trained arm's `method` label, read back: PROFILE[+VARIANT...][@sN] (docs/method.md 9).

The learning-result driver (benchmarks/gpu/learning_result.py, `Arm.label`) labels each arm's eval
rows by its profile, its labelled variants (docs/method.md 7, Labelled variants) and its seed: seed 0
is the bare name, seed N > 0 the name with `@sN`:

    parse_arm_label("mixed_task_reward")                                        # ArmLabel('mixed_task_reward', (), 0)
    parse_arm_label("mixed_task_reward@s1")                                     # ArmLabel('mixed_task_reward', (), 1)
    parse_arm_label("selector_clean_oracle_action_credit+identity_first_mention@s2").variants
    # ('identity_first_mention',)

A label of another shape (`sft`, anything with capitals, digits, `-`, or `@s0`, which the driver never
writes since seed 0 is the bare name) is kept whole as its arm, at seed 0. The paper build pairs an arm
with the baseline at the same seed (`seed_label`) and pools an arm's seeds by `ArmLabel.arm`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ArmLabel", "parse_arm_label", "seed_label"]

_LABEL = re.compile(r"(?P<profile>[a-z_]+)(?P<variants>(?:\+[a-z_]+)*)(?:@s(?P<seed>[1-9][0-9]*))?")
"""The driver's label grammar (its _ARM_TEXT), less `@s0`: the driver writes seed 0 as the bare name."""


@dataclass(frozen=True)
class ArmLabel:
    """One `method` label split into what it names."""

    profile: str
    """The GRPO profile or baseline (or the whole label, when it has no arm shape)."""
    variants: tuple[str, ...]
    """Labelled variants, in the label's order (empty for most arms)."""
    seed: int
    """The arm's training seed (0 for a bare label)."""

    @property
    def arm(self) -> str:
        """The label without its seed: PROFILE[+VARIANT...], what the arm's seeds have in common (and its
        seed-0 label)."""
        return "+".join((self.profile, *self.variants))

    @property
    def label(self) -> str:
        """The `method` label this was read from: `arm`, with @sN when the seed is not 0."""
        return seed_label(self.arm, self.seed)


def parse_arm_label(label: str) -> ArmLabel:
    """`label` -> (profile, variants, seed); a label without the PROFILE[+VARIANT...][@sN] shape is its own
    profile at seed 0 (never an error: eval rows may carry any method label)."""
    if not isinstance(label, str) or not label:
        raise ValueError(f"method label must be a non-empty string, got {label!r}")
    m = _LABEL.fullmatch(label)
    if m is None:
        return ArmLabel(label, (), 0)
    return ArmLabel(m["profile"], tuple(v for v in m["variants"].split("+") if v), int(m["seed"] or 0))


def seed_label(arm: str, seed: int) -> str:
    """The `method` label of `arm` (PROFILE[+VARIANT...]) at `seed`: `arm` itself at 0, `arm@sN` otherwise."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    return arm if seed == 0 else f"{arm}@s{seed}"

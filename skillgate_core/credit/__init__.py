"""Credit assignment: who gets which advantage, on which tokens (docs/method.md 4-7).

- `actions`: `SelectionAction`, one attributed skill read with its call and identity token spans.
- `advantages`: GRPO task advantages; clean-oracle / first-oracle utilities (the clean test counts
  consultation of other skills, docs/reads.md); selector advantages, per read and per action.
- `behaviour`: the episode-level behaviour terms of the mixed_separated and hybrid_slate ablations.
- `groups`: fail-closed group validation and the dynamic filter, each rejection with a reason.
- `spans`: selection-span detection: read calls -> actions with call and identity tokens.
- `weights`: task and selector token weights over a conversion chunk.
- `premise`: the premise checks over any set of episodes (docs/method.md 8b).

Pure functions over plain Python / numpy values; the torch loss lives in `skillgate_core.rl.loss`.
"""

# Names, not logic, below: the public surface, one name a line.
from skillgate_core.credit.actions import CATEGORIES, Category, SelectionAction
from skillgate_core.credit.advantages import (
    UTILITIES,
    Utility,
    action_selector_advantages,
    clean_oracle_utility,
    first_oracle_utility,
    selector_advantages,
    selector_advantages_from_utilities,
    task_advantages,
    validate_reads,
)
from skillgate_core.credit.behaviour import (
    EpisodeLabel,
    episode_label,
    hybrid_regret_shift,
    hybrid_slate_advantages,
    hybrid_strata_term,
    mixed_separated_advantages,
    mixed_separated_term,
)
from skillgate_core.credit.groups import (
    EpisodeEvidence,
    GroupVerdict,
    RejectReason,
    RolloutStepFilter,
    count_rejections,
    dynamic_filter,
    kept_reward,
    validate_group,
)
from skillgate_core.credit.spans import (
    AssistantTurn,
    SpanReport,
    decode_with_offsets,
    detect_selection_spans,
    normalise_tool_name,
)
from skillgate_core.credit.weights import (
    TokenWeightError,
    TokenWeights,
    episode_credit_problem,
    per_token_advantages,
    token_weights,
)

__all__ = [
    "action_selector_advantages",
    "AssistantTurn",
    "SpanReport",
    "decode_with_offsets",
    "detect_selection_spans",
    "normalise_tool_name",
    "CATEGORIES",
    "UTILITIES",
    "Category",
    "EpisodeEvidence",
    "EpisodeLabel",
    "GroupVerdict",
    "RejectReason",
    "RolloutStepFilter",
    "SelectionAction",
    "TokenWeightError",
    "TokenWeights",
    "Utility",
    "clean_oracle_utility",
    "count_rejections",
    "dynamic_filter",
    "episode_credit_problem",
    "episode_label",
    "first_oracle_utility",
    "hybrid_regret_shift",
    "hybrid_slate_advantages",
    "hybrid_strata_term",
    "kept_reward",
    "mixed_separated_advantages",
    "mixed_separated_term",
    "per_token_advantages",
    "selector_advantages",
    "selector_advantages_from_utilities",
    "task_advantages",
    "token_weights",
    "validate_group",
    "validate_reads",
]

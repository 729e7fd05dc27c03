"""The profile registry (docs/method.md 7) and pass@k (docs/method.md 8)."""

from __future__ import annotations

import dataclasses
from itertools import combinations

import pytest

from skillgate_core.evaluation.metrics import pass_at_k
from skillgate_core.rl import PROFILES, Profile, UnknownProfileError, get_profile, profile_names

EXPECTED = {
    # name: (slate, behaviour, utility, lambda, loss)
    "no_skill": ("none", "none", None, 0.0, "plain_clipped"),
    "mixed_task_reward": ("mixed", "none", None, 0.0, "plain_clipped"),
    "mixed_separated": ("mixed", "mixed_separated", None, 0.0, "plain_clipped"),
    "hybrid_slate": ("paired", "hybrid_slate", None, 0.0, "plain_clipped"),
    "selector_action_credit": ("mixed", "none", "first_oracle", 0.2, "two_stream"),
    "selector_clean_oracle_masked_task_only": ("mixed", "none", "clean_oracle", 0.0, "two_stream"),
    "selector_clean_oracle_action_credit": ("mixed", "none", "clean_oracle", 0.2, "two_stream"),
}


def test_the_seven_profiles():
    assert profile_names() == tuple(EXPECTED)
    for name, (slate, behaviour, utility, coef, loss) in EXPECTED.items():
        p = get_profile(name)
        assert (p.slate, p.behaviour, p.utility, p.selector_coef, p.loss) == (
            slate,
            behaviour,
            utility,
            coef,
            loss,
        )
        assert p.forces_acceptance == (name in ("no_skill", "mixed_task_reward"))
        assert p.uses_reads == (loss == "two_stream" or behaviour != "none")
        assert p.checks_spans == (slate != "none")  # one fail-closed span rule for every arm that shows a slate


def test_the_safety_cap_lies_above_the_forcing_point_of_a_forcing_profile():
    """The give-up cap (max_rejected_groups) is the same for every arm; a forcing profile must reach the
    method's forced acceptance before it, else it would give up where the method says a step completes."""
    from skillgate_core.rl.grpo_config import GRPOConfig

    seed = GRPOConfig(profile="mixed_task_reward", group_size=8)
    assert (seed.force_after_groups, seed.force_after_samples, seed.max_rejected_groups) == (64, 300, 128)
    with pytest.raises(ValueError, match=r"max_rejected_groups \(38\) must exceed the forcing point"):
        GRPOConfig(profile="mixed_task_reward", group_size=8, max_rejected_groups=38)  # 300 / 8 -> 38 groups
    GRPOConfig(profile="mixed_task_reward", group_size=8, max_rejected_groups=39)
    GRPOConfig(profile="selector_clean_oracle_action_credit", group_size=8, max_rejected_groups=8)  # never forces


def test_unknown_profile_lists_valid_names():
    with pytest.raises(UnknownProfileError) as info:
        get_profile("skillgate")
    message = str(info.value)
    assert "'skillgate'" in message and all(name in message for name in EXPECTED)


def test_profiles_are_frozen_and_the_registry_read_only():
    with pytest.raises(dataclasses.FrozenInstanceError):
        get_profile("no_skill").selector_coef = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        PROFILES["x"] = get_profile("no_skill")  # type: ignore[index]


@pytest.mark.parametrize(
    "fields",
    [
        {"slate": "mixed", "behaviour": "none", "utility": None, "selector_coef": 0.2, "loss": "two_stream"},
        {
            "slate": "mixed",
            "behaviour": "none",
            "utility": "clean_oracle",
            "selector_coef": 0.0,
            "loss": "plain_clipped",
        },
        {
            "slate": "mixed",
            "behaviour": "hybrid_slate",
            "utility": None,
            "selector_coef": 0.0,
            "loss": "plain_clipped",
        },
        {
            "slate": "none",
            "behaviour": "mixed_separated",
            "utility": None,
            "selector_coef": 0.0,
            "loss": "plain_clipped",
        },
    ],
)
def test_incoherent_profiles_are_refused(fields):
    with pytest.raises(ValueError):
        Profile("bad", **fields)


def brute_force_pass_at_k(n: int, c: int, k: int) -> float:
    outcomes = [True] * c + [False] * (n - c)
    draws = list(combinations(range(n), k))
    return sum(any(outcomes[i] for i in d) for d in draws) / len(draws)


@pytest.mark.parametrize("n", [1, 2, 4, 7])
def test_pass_at_k_matches_enumeration(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(brute_force_pass_at_k(n, c, k), abs=1e-12)


def test_pass_at_k_edges_and_checks():
    assert pass_at_k(4, 0, 4) == 0.0
    assert pass_at_k(280, 70, 1) == pytest.approx(0.25)
    assert 0.0 < pass_at_k(10_000, 1, 1) < 1e-3
    for bad in [(0, 0, 1), (4, 5, 1), (4, 1, 0), (4, 1, 5), (4, -1, 1)]:
        with pytest.raises(ValueError):
            pass_at_k(*bad)
    with pytest.raises(TypeError):
        pass_at_k(4, 1.0, 1)  # type: ignore[arg-type]

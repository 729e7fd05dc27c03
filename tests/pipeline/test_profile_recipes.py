"""Each profile of the registry has a named recipe in the catalog, and every recipe names a real profile."""

from __future__ import annotations

from deployments import RECIPES_DIR
from skillgate_core.pipeline.recipes import list_recipes
from skillgate_core.rl.profiles import get_profile, profile_names


def test_every_profile_has_a_recipe_and_every_recipe_profile_exists():
    by_profile = {}
    for recipe in list_recipes(RECIPES_DIR):
        grpo = recipe.tables.get("grpo")
        if grpo and "profile" in grpo:
            get_profile(grpo["profile"])  # raises on an unknown name
            by_profile.setdefault(grpo["profile"], []).append(recipe.name)
    assert set(by_profile) == set(profile_names())
    for name in profile_names():
        assert f"rl.{name.replace('_', '-')}" in by_profile[name]
    assert "rl-train" in by_profile["selector_clean_oracle_action_credit"]

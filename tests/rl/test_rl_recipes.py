"""Recipe wiring of rl-data-prep and the supervised baselines: every RL recipe prepares its data for the
profile it trains, and bc / dpo feed eval70 like any policy export."""

from __future__ import annotations

from deployments import RECIPES_DIR
from skillgate_core.recipes import find_recipe, list_recipes, plan_recipe, resolve_recipe
from skillgate_core.rl.data_prep import RLDataPrepConfig
from skillgate_core.sft.baselines import BCStageConfig, DPOStageConfig
from skillgate_core.stages import get_stage


def test_every_rl_recipe_prepares_data_for_the_profile_it_trains():
    checked = 0
    for recipe in list_recipes(RECIPES_DIR):
        if "grpo" not in recipe.stages:
            continue
        resolved = resolve_recipe(recipe)
        prep = resolved.configs["rl-data-prep"]
        assert isinstance(prep, RLDataPrepConfig), recipe.name
        assert prep.profile == recipe.tables.get("grpo", {}).get("profile", prep.profile), recipe.name
        rows = {r.stage: r for r in plan_recipe(resolved)}
        assert rows["grpo"].inputs["rl_data"] == "stage:rl-data-prep"
        checked += 1
    assert checked >= 8  # rl-train, the seven rl.<profile> recipes (and demo)


def test_baseline_recipes_feed_eval_like_any_policy(tmp_path):
    bench, model = tmp_path / "b", tmp_path / "m"
    bench.mkdir()
    model.mkdir()
    for name, stage, cls in (("bc", "bc", BCStageConfig), ("dpo", "dpo", DPOStageConfig)):
        spec = get_stage(stage)
        assert spec.built and spec.inputs == ("sft_model", "rl_data") and spec.outputs == ("policy_export",)
        resolved = resolve_recipe(find_recipe(name, RECIPES_DIR), [f"inputs.bench={bench}", f"inputs.sft_model={model}"])
        assert isinstance(resolved.configs[stage], cls)
        rows = {r.stage: r for r in plan_recipe(resolved)}
        assert rows[stage].inputs == {"sft_model": str(model), "rl_data": "stage:rl-data-prep"}
        assert rows["eval70"].inputs["policy_export"] == f"stage:{stage}"
    dpo = resolve_recipe(find_recipe("dpo", RECIPES_DIR)).configs["dpo"]
    assert (dpo.beta, dpo.loss_type, dpo.pairs_per_task) == (0.1, "sigmoid", 5)  # METHOD.md 7

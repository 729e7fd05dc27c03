"""Recipe wiring of rl-data-prep and the supervised baselines: every RL recipe prepares its data for the
profile it trains, and bc / dpo feed eval70 like any policy export."""

from __future__ import annotations

from deployments import RECIPES_DIR
from skillgate_core.pipeline.recipes import find_recipe, list_recipes, plan_recipe, resolve_recipe
from skillgate_core.pipeline.stages import get_stage
from skillgate_core.rl.data_prep import RLDataPrepConfig
from skillgate_core.rl.profiles import profile_names
from skillgate_core.sft.baselines import BCStageConfig, DPOStageConfig


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
    assert checked >= len(profile_names()) + 1  # rl-train and one rl.<profile> recipe per profile (and demo)


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
    assert (dpo.beta, dpo.loss_type, dpo.pairs_per_task) == (0.1, "sigmoid", 5)  # docs/method.md 7


def test_every_recipe_has_a_deployment_and_training_ones_take_resume():
    """prefect.yaml: every recipe of the catalog is a deployment of the entry flow (tagged with it); the
    training ones (rl-train, each rl.<profile>, pipeline, demo) take a `resume` parameter (an experiment
    id), which the flow accepts and turns into grpo.resume_experiment."""
    import inspect
    from pathlib import Path

    import pytest
    import yaml

    from flows.skillgate import skillgate
    from skillgate_core.base.config import ConfigError
    from skillgate_core.pipeline.recipes import resume_overrides

    spec = yaml.safe_load((Path(RECIPES_DIR).parents[1] / "prefect.yaml").read_text())
    # The entry flow's deployments (the nightly is its own flow: flows/eval_nightly.py).
    deployments = {d["name"]: d for d in spec["deployments"] if d["entrypoint"] == "flows/skillgate.py:skillgate"}
    accepted = set(inspect.signature(skillgate.fn).parameters)
    for d in deployments.values():
        assert set(d["parameters"]) <= accepted, d["name"]
        find_recipe(d["parameters"]["recipe"], RECIPES_DIR)  # every deployment names a recipe
        assert d["name"] == d["parameters"]["recipe"] and f"recipe:{d['name']}" in d["tags"]
    assert set(deployments) == {r.name for r in list_recipes(RECIPES_DIR)}
    grpo = [r.name for r in list_recipes(RECIPES_DIR) if "grpo" in r.stages]
    # rl-train, one rl.<profile> per profile of the registry, pipeline, demo, learning-result
    assert set(grpo) == {"rl-train", "pipeline", "demo", "learning-result",
                         *(f"rl.{name.replace('_', '-')}" for name in profile_names())}
    for name, arms in (("demo", 2), ("learning-result", 3)):  # several arms: no single id to resume
        grpo.remove(name)
        assert deployments[name]["parameters"] == {"recipe": name, "trigger": "ui", "overrides": []}
        with pytest.raises(ConfigError, match=f"recipe '{name}' trains {arms} arms"):
            resume_overrides(find_recipe(name, RECIPES_DIR), "grpo-x-1")
    for name in grpo:
        assert deployments[name]["parameters"] == {"recipe": name, "trigger": "ui", "overrides": [], "resume": ""}, name
        assert resume_overrides(find_recipe(name, RECIPES_DIR), "grpo-x-1") == ['grpo.resume_experiment="grpo-x-1"']
        resolved = resolve_recipe(find_recipe(name, RECIPES_DIR), resume_overrides(find_recipe(name, RECIPES_DIR), "7"))
        assert resolved.configs["grpo"].resume_experiment == "7" and not resolved.configs["grpo"].reusable


def test_resume_needs_an_experiment_id_and_a_training_stage():
    import pytest

    from skillgate_core.base.config import ConfigError
    from skillgate_core.pipeline.recipes import resume_overrides

    with pytest.raises(ConfigError, match="is not an experiment id"):
        resume_overrides(find_recipe("rl-train", RECIPES_DIR), "../other")
    with pytest.raises(ConfigError, match="recipe 'init-model' has no training stage that resumes"):
        resume_overrides(find_recipe("init-model", RECIPES_DIR), "grpo-x-1")

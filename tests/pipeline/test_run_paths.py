"""A run parameter (a recipe, a deployment's overrides or `recipe` parameter, the nightly's `bench`) may
name paths inside the state dir, the recipe / protocol catalog and the folders the worker lists in
SKILLGATE_INPUT_DIRS only: `eval70.protocol=/etc/passwd`, `inputs.policy_export=/etc`, a recipe file
elsewhere are refused when the run is planned, naming the parameter. The SGLang servers and where the
trainer writes weights for them are the worker's configuration, not run parameters."""

from __future__ import annotations

import pytest

from deployments import RECIPES_DIR
from skillgate_core.base.config import ConfigError
from skillgate_core.pipeline.recipe_plan import Selection
from skillgate_core.pipeline.recipes import find_recipe, load_recipe, resolve_recipe

SOURCE = "flow parameter 'overrides'"


@pytest.fixture(autouse=True)
def only_the_state_dir(skillgate_home, monkeypatch):
    monkeypatch.delenv("SKILLGATE_INPUT_DIRS", raising=False)
    skillgate_home.mkdir(parents=True)
    return skillgate_home


def _eval70(overrides: list[str]):
    return resolve_recipe(find_recipe("eval70", RECIPES_DIR), overrides, source=SOURCE,
                          selection=Selection(only=("eval70",)))


def test_a_protocol_outside_the_state_dir_and_the_catalog_is_refused(skillgate_home):
    for value in ("/etc/passwd", str(skillgate_home / ".." / "spec.toml")):
        with pytest.raises(ConfigError) as err:
            _eval70([f"eval70.protocol='{value}'"])
        assert SOURCE in str(err.value) and "eval70" in str(err.value) and "protocol" in str(err.value)
        assert "SKILLGATE_INPUT_DIRS" in str(err.value)
    spec = skillgate_home / "specs" / "mine.toml"
    spec.parent.mkdir()
    spec.write_text("")
    assert _eval70([f"eval70.protocol='{spec}'"]).configs["eval70"].protocol == str(spec)
    assert _eval70(["eval70.protocol='eval70_v1_ctx8k'"]).configs["eval70"].protocol == "eval70_v1_ctx8k"


def test_an_input_outside_the_state_dir_is_refused_naming_it(skillgate_home, tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match=rf"{SOURCE}: inputs\.policy_export: /etc is outside"):
        _eval70(["inputs.policy_export=/etc"])
    # a link inside the state dir to a folder outside it is outside too
    (skillgate_home / "escape").symlink_to("/etc")
    with pytest.raises(ConfigError, match=r"inputs\.policy_export: .*escape \(/etc\) is outside"):
        _eval70([f"inputs.policy_export={skillgate_home / 'escape'}"])
    inside = skillgate_home / "models" / "mine"
    inside.mkdir(parents=True)
    assert _eval70([f"inputs.policy_export={inside}"]).recipe.inputs["policy_export"] == str(inside)
    # the worker may list more folders
    outside = tmp_path / "data" / "model"
    outside.mkdir(parents=True)
    with pytest.raises(ConfigError, match="inputs.policy_export"):
        _eval70([f"inputs.policy_export={outside}"])
    monkeypatch.setenv("SKILLGATE_INPUT_DIRS", str(tmp_path / "data"))
    assert _eval70([f"inputs.policy_export={outside}"]).recipe.inputs["policy_export"] == str(outside)


def test_a_recipe_files_inputs_are_held_to_the_same_rule(tmp_path, skillgate_home):
    recipe = skillgate_home / "recipes" / "r.toml"
    recipe.parent.mkdir()
    recipe.write_text('[recipe]\nname = "r"\nstages = ["eval70"]\n[inputs]\nbench = "/etc"\n')
    with pytest.raises(ConfigError, match=rf"{recipe}: inputs\.bench: /etc is outside"):
        resolve_recipe(load_recipe(recipe))


def test_a_recipe_path_outside_the_catalog_and_the_state_dir_is_refused(tmp_path, skillgate_home):
    outside = tmp_path / "elsewhere" / "r.toml"
    outside.parent.mkdir()
    outside.write_text('[recipe]\nname = "r"\nstages = ["eval70"]\n')
    with pytest.raises(ConfigError, match=rf"recipe: {outside} is outside"):
        find_recipe(str(outside), RECIPES_DIR)
    assert find_recipe(str(RECIPES_DIR / "eval70.toml"), RECIPES_DIR).name == "eval70"
    inside = skillgate_home / "r.toml"
    inside.write_text(outside.read_text())
    assert find_recipe(str(inside), RECIPES_DIR).name == "r"


@pytest.mark.parametrize("override", ["grpo.sglang_urls='http://attacker.example:30000'",
                                      "grpo.sglang_weights_dir='/etc/cron.d'"])
def test_sglang_servers_and_their_weights_dir_are_not_run_parameters(override: str):
    with pytest.raises(ConfigError, match=r"unknown key 'grpo\.sglang_"):
        resolve_recipe(find_recipe("rl-train", RECIPES_DIR), [override], source=SOURCE,
                       selection=Selection(only=("grpo",)))


def test_server_mode_needs_the_workers_sglang_urls(monkeypatch):
    monkeypatch.delenv("SKILLGATE_SGLANG_URLS", raising=False)
    with pytest.raises(ConfigError, match=r"grpo: .*SKILLGATE_SGLANG_URLS"):
        resolve_recipe(find_recipe("rl-train", RECIPES_DIR), ["grpo.rollout_source=sglang"], source=SOURCE,
                       selection=Selection(only=("grpo",)))
    monkeypatch.setenv("SKILLGATE_SGLANG_URLS", "localhost:30000")
    with pytest.raises(ConfigError, match=r"SKILLGATE_SGLANG_URLS: SGLang server URL 'localhost:30000' must start"):
        resolve_recipe(find_recipe("rl-train", RECIPES_DIR), ["grpo.rollout_source=sglang"], source=SOURCE,
                       selection=Selection(only=("grpo",)))
    monkeypatch.setenv("SKILLGATE_SGLANG_URLS", "http://127.0.0.1:30000")
    resolved = resolve_recipe(find_recipe("rl-train", RECIPES_DIR), ["grpo.rollout_source=sglang"], source=SOURCE,
                              selection=Selection(only=("grpo",)))
    assert resolved.configs["grpo"].rollout_source == "sglang"


def test_the_nightly_bench_parameter_is_held_to_the_same_rule():
    from flows.eval_nightly import eval70_nightly

    with pytest.raises(ValueError, match=r"bench: /etc is outside"):
        eval70_nightly.fn(bench="/etc", experiments=["x"])

"""An override that makes a recipe file's values unused drops them, and says so: docs/training.md's
`skillgate run init-model --execute init-model.source=smollm2-135m-instruct` on the tiny init-model
recipe (whose max_position_embeddings shapes the tiny model only) builds SmolLM2; a tiny field the
command line itself sets with that source is still refused."""

from __future__ import annotations

import os
import subprocess

import pytest

from deployments import RECIPES_DIR
from skillgate_core.base.config import ConfigError, config_digest
from skillgate_core.pipeline.recipes import find_recipe, resolve_recipe
from skillgate_core.policy.init_model import InitModelConfig
from tests.orchestration.test_cli import SKILLGATE

SMOLLM2 = "init-model.source=smollm2-135m-instruct"


def test_the_source_override_leaves_the_tiny_recipe_values_out():
    recipe = find_recipe("init-model", RECIPES_DIR)
    assert "max_position_embeddings" in recipe.tables["init-model"]  # the premise: the file sets a tiny field
    resolved = resolve_recipe(recipe, [SMOLLM2])
    config = resolved.configs["init-model"]
    assert config == InitModelConfig(source="smollm2-135m-instruct")
    assert set(resolved.left_out["init-model"]) == set(recipe.tables["init-model"])
    # the same policy as the learning result's init-model: the same config, so the same run on record
    learning = resolve_recipe(find_recipe("learning-result", RECIPES_DIR)).configs["init-model"]
    assert config_digest(config) == config_digest(learning)
    assert resolve_recipe(recipe).left_out == {}  # no override: nothing dropped


def test_a_tiny_field_given_with_the_pretrained_source_is_still_refused():
    with pytest.raises(ConfigError, match="hidden_size shape the tiny model only"):
        resolve_recipe(find_recipe("init-model", RECIPES_DIR), [SMOLLM2, "init-model.hidden_size=128"])


def test_the_documented_command_plans_smollm2(tmp_path):
    env = {**os.environ, "SKILLGATE_HOME": str(tmp_path / "home"), "COLUMNS": "400"}
    proc = subprocess.run([SKILLGATE, "run", "init-model", SMOLLM2], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "init-model: the recipe's vocab_size, max_position_embeddings left out" in proc.stdout

"""Config loading, overrides and digests, through the public API."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from skillgate_core.base.config import (
    ConfigError,
    config_digest,
    config_from_mapping,
    field_docs,
    parse_override,
)
from skillgate_core.pipeline.recipes import load_recipe, plan_recipe, resolve_recipe
from skillgate_core.policy.tiny_model import TinyModelConfig


@dataclass(frozen=True)
class Inner:
    """A nested table."""

    lr: float = 1e-6
    """Learning rate."""


@dataclass(frozen=True)
class Sample:
    """A config using every supported field type."""

    name: str = "x"
    """A name."""
    steps: int = 3
    """Steps."""
    mode: Literal["a", "b"] = "a"
    """Mode."""
    tags: tuple[str, ...] = ("t1", "t2")
    """Tags."""
    inner: Inner = Inner()
    """Nested."""
    limit: float | None = None
    """Optional."""


DIGEST_SCRIPT = (
    "from skillgate_core.policy.tiny_model import TinyModelConfig;"
    "from skillgate_core.base.config import config_digest;"
    "print(config_digest(TinyModelConfig(vocab_size=4096, seed=7)))"
)


def test_digest_is_stable_across_processes_and_hash_seeds():
    digests = set()
    for seed in ("0", "1", "12345", "random"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", DIGEST_SCRIPT], env=env, capture_output=True, text=True, check=True)
        digests.add(out.stdout.strip())
    assert digests == {config_digest(TinyModelConfig(vocab_size=4096, seed=7))}
    assert len(next(iter(digests))) == 64


def test_digest_changes_with_any_value():
    base = config_digest(TinyModelConfig())
    assert config_digest(TinyModelConfig()) == base
    assert config_digest(TinyModelConfig(seed=1)) != base
    assert config_digest(TinyModelConfig(hidden_size=128)) != base


def test_mapping_builds_nested_and_typed_values():
    cfg = config_from_mapping(
        Sample, {"steps": 5, "mode": "b", "tags": ["q"], "inner": {"lr": 1}, "limit": 2}, "here.toml"
    )
    assert cfg == Sample(steps=5, mode="b", tags=("q",), inner=Inner(lr=1.0), limit=2.0)
    assert isinstance(cfg.inner.lr, float)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"stepz": 1}, "here.toml: unknown key 'sft.stepz' for Sample (did you mean 'sft.steps'?); valid keys: "
                       "inner, limit, mode, name, steps, tags"),
        ({"qqqq": 1}, "here.toml: unknown key 'sft.qqqq' for Sample; valid keys: inner, limit, mode, name, steps, tags"),
        ({"steps": "many"}, "here.toml: sft.steps: expected int, got str 'many'"),
        ({"steps": True}, "here.toml: sft.steps: expected int, got bool True"),
        ({"mode": "c"}, "here.toml: sft.mode: expected 'a' | 'b', got str 'c'"),
        ({"tags": "one"}, "here.toml: sft.tags: expected tuple of str, got str 'one'"),
        ({"tags": ["a", 2]}, "here.toml: sft.tags[1]: expected str, got int 2"),
        ({"inner": {"lr": "x"}}, "here.toml: sft.inner.lr: expected float, got str 'x'"),
        ({"inner": {"lrr": 1.0}}, "here.toml: unknown key 'sft.inner.lrr' for Inner (did you mean 'sft.inner.lr'?)"),
    ],
)
def test_bad_values_name_key_source_and_expected_type(values, expected):
    with pytest.raises(ConfigError) as err:
        config_from_mapping(Sample, values, "here.toml", prefix="sft.")
    assert str(err.value).startswith(expected)


def test_overrides_parse_toml_literals():
    assert parse_override("a.b=3") == ("a.b", 3)
    assert parse_override("a.b=1e-6") == ("a.b", 1e-6)
    assert parse_override("a.b=true") == ("a.b", True)
    assert parse_override('a.b=["x", "y"]') == ("a.b", ["x", "y"])
    assert parse_override("a.b=plain words") == ("a.b", "plain words")
    with pytest.raises(ConfigError, match="not of the form key=value"):
        parse_override("novalue")


def test_field_docs_are_read_from_attribute_docstrings():
    docs = field_docs(TinyModelConfig)
    assert docs["vocab_size"].startswith("BPE vocabulary size")
    assert set(docs) == set(TinyModelConfig.__dataclass_fields__)


def test_field_docs_of_a_subclass_include_its_bases_and_its_own_overrides():
    from skillgate_core.sft.baselines import DPOStageConfig
    from skillgate_core.sft.trainer import LoRATrainingConfig, SFTStageConfig

    docs = field_docs(DPOStageConfig)
    assert set(docs) == set(DPOStageConfig.__dataclass_fields__)
    assert docs["max_steps"] == field_docs(LoRATrainingConfig)["max_steps"]  # re-declared default, base doc
    assert field_docs(SFTStageConfig)["max_length"].startswith("Longest training sequence in tokens (longer rows")


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_recipe_errors_name_the_file_and_key(tmp_path):
    ok = '[recipe]\nname = "r"\nstages = ["init-model"]\n'
    cases = {
        "[init-model]\nvocab_size = \"big\"\n": "init-model.vocab_size: expected int, got str 'big'",
        "[init-model]\nwidth = 3\n": "unknown key 'init-model.width' for InitModelConfig",
        "[sft]\nlr = 1\n": "table [sft] configures a stage that recipe.stages does not list",
        "[trainer]\nlr = 1\n": "unknown table [trainer]",
    }
    for i, (body, message) in enumerate(cases.items()):
        path = _write(tmp_path / f"r{i}.toml", ok + body)
        with pytest.raises(ConfigError) as err:
            resolve_recipe(load_recipe(path))
        assert str(path) in str(err.value) and message in str(err.value)
    bad_order = _write(tmp_path / "order.toml", '[recipe]\nname = "r"\nstages = ["sft", "init-model"]\n')
    with pytest.raises(ConfigError, match="pipeline order"):
        load_recipe(bad_order)
    unknown_stage = _write(tmp_path / "unk.toml", '[recipe]\nname = "r"\nstages = ["train"]\n')
    with pytest.raises(ConfigError, match="unknown stage 'train'"):
        load_recipe(unknown_stage)


def test_command_line_override_errors_name_the_command_line(tmp_path):
    path = _write(tmp_path / "r.toml", '[recipe]\nname = "r"\nstages = ["init-model"]\n')
    recipe = load_recipe(path)
    assert resolve_recipe(recipe, ["init-model.seed=4"]).configs["init-model"].seed == 4
    with pytest.raises(ConfigError, match=r"^command line: init-model.seed: expected int, got float 0.5"):
        resolve_recipe(recipe, ["init-model.seed=0.5"])
    with pytest.raises(ConfigError, match="key must be STAGE.KEY"):
        resolve_recipe(recipe, ["seed=1"])


def test_plan_reports_missing_inputs_and_unbuilt_stages(tmp_path):
    path = _write(tmp_path / "r.toml", '[recipe]\nname = "r"\nstages = ["sft", "paper-tables"]\n'
                  f'[inputs]\nbase_model = "{tmp_path / "nonexistent"}"\n')
    sft, tables = plan_recipe(resolve_recipe(load_recipe(path)))
    assert sft.built and set(sft.missing) == {"base_model", "trajectories"}
    assert sft.note == "missing inputs: base_model, trajectories"
    assert tables.built and tables.missing == ("eval_rows",) and tables.note == "missing inputs: eval_rows"


def test_a_mistyped_name_gets_the_close_one(tmp_path):
    # Each place a user types a name: a key, a stage (in a recipe, an override, --only), a table, a recipe,
    # an input role. The error names the close match; a name close to nothing gets no guess.
    from deployments import RECIPES_DIR
    from skillgate_core.pipeline.recipe_plan import Selection, select_entries
    from skillgate_core.pipeline.recipes import find_recipe

    demo = load_recipe(RECIPES_DIR / "demo.toml")
    cases = [
        (lambda: resolve_recipe(demo, ["sft.max_step=3"]), "unknown key 'sft.max_step' for SFTStageConfig "
                                                            "(did you mean 'sft.max_steps'?)"),
        (lambda: resolve_recipe(demo, ["sff.max_steps=3"]), "stage 'sff' is not in this run's plan (did you mean 'sft'?)"),
        (lambda: resolve_recipe(demo, [f"inputs.bnch={tmp_path}"]), "takes role 'bnch'"),
        (lambda: find_recipe("demoo", RECIPES_DIR), "no recipe named 'demoo' (did you mean 'demo'?)"),
        (lambda: select_entries(demo.stages, Selection(only=("eval7",))), "'eval7' is not a stage of this recipe "
                                                                   "(did you mean 'eval70'?)"),
        (lambda: load_recipe(_write(tmp_path / "s.toml", '[recipe]\nname = "r"\nstages = ["sftt"]\n')),
         "unknown stage 'sftt' (did you mean 'sft'?)"),
        (lambda: load_recipe(_write(tmp_path / "t.toml", '[recipe]\nname = "r"\nstages = ["sft"]\n[sfft]\nx = 1\n')),
         "unknown table [sfft] (did you mean [sft]?)"),
        (lambda: load_recipe(_write(tmp_path / "k.toml", '[recipe]\nname = "r"\nstage = ["sft"]\n')),
         "unknown key 'recipe.stage' (did you mean 'recipe.stages'?)"),
    ]
    for call, message in cases:
        with pytest.raises(ConfigError) as err:
            call()
        assert message in str(err.value), str(err.value)
    with pytest.raises(ConfigError) as err:
        resolve_recipe(demo, ["sft.zzzzzzzz=3"])
    assert "did you mean" not in str(err.value)

"""Value ranges of config fields and recipe inputs: refused at once, naming key, source and range."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest
from support.skillgate_cli import run_skillgate

from skillgate_core.agent.episode import EpisodeConfig
from skillgate_core.agent.policies import TeacherConfig
from skillgate_core.base.config import ConfigError
from skillgate_core.base.config_ranges import Range, field_ranges
from skillgate_core.benchgen.skillgym.loop import SkillGymConfig
from skillgate_core.envs.sandbox_config import SandboxConfig
from skillgate_core.pipeline.recipes import find_recipe, load_recipe, resolve_recipe
from skillgate_core.pipeline.stages import STAGES
from skillgate_core.policy.local_sampler import SamplingConfig

RECIPES = Path(__file__).resolve().parents[2] / "deployments" / "recipes"


def _nested(cls: type, seen: set[type]) -> None:
    if cls in seen:
        return
    seen.add(cls)
    for tp in typing.get_type_hints(cls).values():
        for candidate in (tp, *typing.get_args(tp)):
            if dataclasses.is_dataclass(candidate):
                _nested(candidate, seen)


def _all_configs() -> list[type]:
    """Every stage's config, the configs nested in them, and the configs stages build from them."""
    seen: set[type] = set()
    for spec in STAGES:
        if spec.built:
            _nested(spec.config_class(), seen)
    for cls in (EpisodeConfig, SamplingConfig, TeacherConfig, SandboxConfig, SkillGymConfig):
        _nested(cls, seen)
    return sorted(seen, key=lambda c: c.__name__)


def _numeric(tp: object) -> bool:
    return tp in (int, float) or any(a in (int, float) for a in typing.get_args(tp))


def _outside(r: Range, kind: type) -> object:
    """A value just outside the range."""
    step = 1 if kind is int else 0.5
    if r.ge is not None:
        return kind(r.ge - step)
    if r.gt is not None:
        return kind(r.gt)
    if r.le is not None:
        return kind(r.le + step)
    return kind(r.lt)


@pytest.mark.parametrize("cls", _all_configs(), ids=lambda c: c.__name__)
def test_every_numeric_field_of_every_config_declares_and_enforces_a_range(cls):
    hints = typing.get_type_hints(cls)
    ranges = field_ranges(cls)
    unbounded = [f.name for f in dataclasses.fields(cls) if _numeric(hints[f.name]) and f.name not in ranges]
    assert not unbounded, f"{cls.__name__}: numeric fields without a declared range: {unbounded}"
    for name, r in ranges.items():
        kind = int if hints[name] is int else float
        bad = _outside(r, kind)
        with pytest.raises(ValueError) as err:
            cls(**{name: bad})
        assert str(err.value).startswith(f"{name}: expected") and r.describe() in str(err.value), str(err.value)


def test_range_descriptions():
    assert Range(ge=1).describe() == ">= 1"
    assert Range(gt=0).describe() == "> 0"
    assert Range(ge=0, le=1).describe() == "in [0, 1]"
    assert Range(gt=0, le=1).describe() == "in (0, 1]"
    assert Range(ge=0.5).contains(0.5) and not Range(gt=0.5).contains(0.5)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("init-model.hidden_size=0", "command line: init-model.hidden_size: expected int >= 1, got 0"),
        ("init-model.num_attention_heads=0", "command line: init-model.num_attention_heads: expected int >= 1, got 0"),
        ("init-model.vocab_size=100", "command line: init-model.vocab_size: expected int >= 512, got 100"),
        ("collect.max_turns=-1", "command line: collect.max_turns: expected int >= 1, got -1"),
        ("collect.misleading_rate=1.5", "command line: collect.misleading_rate: expected float in [0, 1], got 1.5"),
        ("collect.backend=podman", "command line: collect.backend: expected 'auto' | 'docker' | 'bwrap'"),
        ("sft.learning_rate=0", "command line: sft.learning_rate: expected float > 0, got 0.0"),
        ("bench-build.eval_tasks=-3", "command line: bench-build.eval_tasks: expected int >= 0, got -3"),
    ],
)
def test_out_of_range_overrides_name_key_source_and_range(override, message):
    with pytest.raises(ConfigError) as err:
        resolve_recipe(find_recipe("demo", RECIPES), [override])
    assert str(err.value).startswith(message), str(err.value)


def test_out_of_range_file_values_name_the_file(tmp_path):
    path = tmp_path / "r.toml"
    path.write_text('[recipe]\nname = "r"\nstages = ["init-model"]\n[init-model]\nnum_attention_heads = 0\n')
    with pytest.raises(ConfigError) as err:
        resolve_recipe(load_recipe(path))
    assert str(err.value).startswith(f"{path}: init-model.num_attention_heads: expected int >= 1, got 0")


def test_input_overrides_must_name_a_consumed_role_and_an_existing_path(tmp_path):
    path = tmp_path / "r.toml"
    path.write_text('[recipe]\nname = "r"\nstages = ["collect", "sft"]\n')
    recipe = load_recipe(path)
    bench = tmp_path / "bench"
    bench.mkdir()
    assert resolve_recipe(recipe, [f"inputs.bench={bench}"]).recipe.inputs["bench"] == str(bench)
    with pytest.raises(ConfigError) as err:
        resolve_recipe(recipe, [f"inputs.benhc={bench}"])
    assert str(err.value).startswith("command line: inputs.benhc: no stage of recipe 'r' takes role 'benhc'")
    assert "base_model, bench" in str(err.value)  # the roles it does take from outside
    with pytest.raises(ConfigError) as err:
        resolve_recipe(recipe, [f"inputs.trajectories={bench}"])
    assert str(err.value).startswith("command line: inputs.trajectories: role 'trajectories' is produced by "
                                     "stage 'collect' of recipe 'r'")
    with pytest.raises(ConfigError) as err:
        resolve_recipe(recipe, [f"inputs.bench={tmp_path / 'nope'}"])
    assert str(err.value) == f"command line: inputs.bench: path {tmp_path / 'nope'} does not exist"


def test_file_inputs_must_name_a_consumed_role(tmp_path):
    path = tmp_path / "r.toml"
    path.write_text('[recipe]\nname = "r"\nstages = ["sft"]\n[inputs]\nbase_model = "/x"\nmodel = "/y"\n')
    with pytest.raises(ConfigError) as err:
        load_recipe(path)
    assert str(err.value).startswith(f"{path}: inputs.model: no stage of recipe 'r' takes role 'model'")


def test_cli_reports_a_zero_head_count_without_a_traceback(tmp_path):
    proc = run_skillgate("show", "demo", "init-model.num_attention_heads=0", home=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "command line: init-model.num_attention_heads: expected int >= 1, got 0" in proc.stderr
    proc = run_skillgate("run", "demo", f"inputs.nothing={tmp_path}", home=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "inputs.nothing: no stage of recipe 'demo' takes role 'nothing'" in proc.stderr


@pytest.mark.parametrize("cls", _all_configs(), ids=lambda c: c.__name__)
def test_nan_and_inf_are_refused_by_every_float_range(cls):
    hints = typing.get_type_hints(cls)
    for name in field_ranges(cls):
        if hints[name] is int:
            continue
        for bad in (float("nan"), float("inf"), float("-inf")):
            with pytest.raises(ValueError, match=rf"^{name}: expected a finite float .*, got {bad!r}"):
                cls(**{name: bad})


@pytest.mark.parametrize("literal", ["nan", "inf", "-inf"])
def test_a_non_finite_override_is_refused_before_execute(literal):
    with pytest.raises(ConfigError, match=r"^command line: collect.misleading_rate: expected a finite float"):
        resolve_recipe(find_recipe("demo", RECIPES), [f"collect.misleading_rate={literal}"])
    with pytest.raises(ConfigError, match=r"^command line: sft.learning_rate: expected a finite float"):
        resolve_recipe(find_recipe("demo", RECIPES), [f"sft.learning_rate={literal}"])

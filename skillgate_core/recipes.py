"""Recipes: named, versioned parameter presets (TOML) that the CLI, the entry flow and prefect.yaml share.

A recipe file looks like

    [recipe]
    name = "demo"
    description = "the whole pipeline on the embedded default"
    stages = ["init-model", "bench-build", ...]

    [inputs]              # optional: roles supplied from outside instead of by an earlier stage
    bench = "/data/my-bench"

    [init-model]          # one table per stage: that stage's config values
    vocab_size = 2048

Resolution checks every key, type and range against the stage's frozen config dataclass and applies
`stage.key=value` overrides from the command line on top. A stage that is not built yet keeps its
table unvalidated (and the plan says so). An input (`[inputs]` or `inputs.ROLE=PATH`) must name a
role some stage of the recipe takes from outside (a typo would otherwise be silently ignored), and a
path given on the command line must exist; a path in the file may be absent (the plan reports it).
`resume_overrides(recipe, EXPERIMENT_ID)` is what `skillgate run --resume` and a deployment's
`resume` parameter add: the override that makes each training stage of the recipe resume that
experiment.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillgate_core.config import (
    ConfigError,
    canonical_json,
    config_digest,
    config_from_mapping,
    config_to_dict,
    parse_override,
)
from skillgate_core.stages import UnknownStageError, get_stage, stage_names

__all__ = [
    "PlannedStage",
    "Recipe",
    "ResolvedRecipe",
    "find_recipe",
    "list_recipes",
    "load_recipe",
    "plan_recipe",
    "resolve_recipe",
    "resume_overrides",
]


@dataclass(frozen=True)
class Recipe:
    """A recipe file as written (values not yet checked against stage configs)."""

    name: str
    """Recipe name (unique in the catalog); `skillgate run NAME`."""
    description: str
    """One line for the catalog."""
    stages: tuple[str, ...]
    """Stages to run, in pipeline order."""
    tables: Mapping[str, Mapping[str, Any]]
    """Stage name -> that stage's raw config values."""
    inputs: Mapping[str, str]
    """Role -> path for inputs that no stage of this recipe produces."""
    source: Path
    """The TOML file it was read from."""


@dataclass(frozen=True)
class ResolvedRecipe:
    """A recipe with overrides applied and every built stage's config checked and frozen."""

    recipe: Recipe
    """The recipe as written."""
    configs: Mapping[str, Any]
    """Stage name -> frozen config (built stages) or the raw table (stages not built yet)."""
    overrides: tuple[str, ...] = field(default=())
    """The `key=value` overrides applied, in order."""

    @property
    def name(self) -> str:
        return self.recipe.name

    def config_json(self, stage: str) -> dict[str, Any]:
        cfg = self.configs[stage]
        return config_to_dict(cfg) if not isinstance(cfg, Mapping) else dict(cfg)

    def digest(self) -> str:
        """Digest of the whole resolved recipe: stage list, inputs, and each stage's config digest."""
        payload = {
            "stages": list(self.recipe.stages),
            "inputs": dict(self.recipe.inputs),
            "configs": {
                s: (config_digest(c) if not isinstance(c, Mapping) else canonical_json(c))
                for s, c in self.configs.items()
            },
        }
        return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


@dataclass(frozen=True)
class PlannedStage:
    """One row of a recipe's plan."""

    stage: str
    """Stage name."""
    built: bool
    """Whether the stage's code exists (False: it is declared for a later step)."""
    inputs: Mapping[str, str]
    """Input role -> where it comes from ("stage:NAME" or a path)."""
    missing: tuple[str, ...]
    """Input roles nobody provides (no earlier stage, no [inputs] entry, or the path is absent)."""
    note: str
    """Why it cannot run, when it cannot."""


def load_recipe(path: str | Path) -> Recipe:
    """Read and shape-check one recipe file; errors name the file and the offending key."""
    source = Path(path)
    try:
        data = tomllib.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{source}: recipe file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    head = data.pop("recipe", None)
    if not isinstance(head, dict):
        raise ConfigError(f"{source}: missing [recipe] table (name, description, stages)")
    unknown = sorted(set(head) - {"name", "description", "stages"})
    if unknown:
        raise ConfigError(f"{source}: unknown key 'recipe.{unknown[0]}'; valid keys: description, name, stages")
    name, description, stages = head.get("name"), head.get("description", ""), head.get("stages")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{source}: recipe.name: expected a non-empty str, got {name!r}")
    if not isinstance(description, str):
        raise ConfigError(f"{source}: recipe.description: expected str, got {type(description).__name__}")
    if not isinstance(stages, list) or not stages or not all(isinstance(s, str) for s in stages):
        raise ConfigError(f"{source}: recipe.stages: expected a non-empty list of stage names, got {stages!r}")
    for s in stages:
        try:
            get_stage(s)
        except UnknownStageError as exc:
            raise ConfigError(f"{source}: recipe.stages: {exc}") from None
    order = {s: i for i, s in enumerate(stage_names())}
    if [order[s] for s in stages] != sorted(order[s] for s in stages) or len(set(stages)) != len(stages):
        raise ConfigError(
            f"{source}: recipe.stages: stages must be unique and in pipeline order ({', '.join(stage_names())})"
        )
    inputs = data.pop("inputs", {})
    if not isinstance(inputs, dict) or not all(isinstance(v, str) for v in inputs.values()):
        raise ConfigError(f"{source}: [inputs]: expected a table of role = \"path\" strings")
    for role in inputs:
        _check_input_role(role, stages, name, str(source))
    tables: dict[str, dict[str, Any]] = {}
    for key, table in data.items():
        if key not in stage_names():
            raise ConfigError(
                f"{source}: unknown table [{key}]; expected [recipe], [inputs] or a stage: {', '.join(stage_names())}"
            )
        if key not in stages:
            raise ConfigError(f"{source}: table [{key}] configures a stage that recipe.stages does not list")
        if not isinstance(table, dict):
            raise ConfigError(f"{source}: {key}: expected a table of config values")
        tables[key] = table
    return Recipe(name, description, tuple(stages), tables, inputs, source)


def list_recipes(directory: str | Path) -> list[Recipe]:
    """Every recipe in `directory` (sorted by name); duplicate names are an error."""
    recipes = [load_recipe(p) for p in sorted(Path(directory).glob("*.toml"))]
    seen: dict[str, Path] = {}
    for r in recipes:
        if r.name in seen:
            raise ConfigError(f"{r.source}: recipe name '{r.name}' is already used by {seen[r.name]}")
        seen[r.name] = r.source
    return sorted(recipes, key=lambda r: r.name)


def find_recipe(name_or_path: str, directory: str | Path) -> Recipe:
    """A recipe by catalog name, or by path to a .toml file."""
    if name_or_path.endswith(".toml") or Path(name_or_path).is_file():
        return load_recipe(name_or_path)
    recipes = list_recipes(directory)
    for r in recipes:
        if r.name == name_or_path:
            return r
    raise ConfigError(
        f"no recipe named '{name_or_path}' in {directory}; known: {', '.join(r.name for r in recipes)}"
    )


def _check_input_role(role: str, stages: Sequence[str], recipe: str, source: str) -> None:
    """Refuse an input role that no stage of the recipe would read from outside."""
    outside: list[str] = []  # consumed before any stage of the recipe produces it
    produced_by: dict[str, str] = {}
    consumed: set[str] = set()
    for stage in stages:
        spec = get_stage(stage)
        outside += [r for r in spec.inputs if r not in produced_by and r not in outside]
        consumed.update(spec.inputs)
        for r in spec.outputs:
            produced_by.setdefault(r, stage)
    if role in outside:
        return
    if role in consumed:
        raise ConfigError(
            f"{source}: inputs.{role}: role '{role}' is produced by stage '{produced_by[role]}' of recipe "
            f"'{recipe}', so an input for it would be ignored; remove it, or drop that stage from the recipe"
        )
    raise ConfigError(
        f"{source}: inputs.{role}: no stage of recipe '{recipe}' takes role '{role}'; roles it takes "
        f"from outside: {', '.join(sorted(outside)) or 'none'}"
    )


def _nest(flat: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for dotted, value in flat:
        node = out
        *parents, leaf = dotted.split(".")
        for p in parents:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"command line: '{dotted}' sets a key inside a non-table value")
        node[leaf] = value
    return out


def _merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(merged.get(k), dict):
            merged[k] = _merge(merged[k], v)
        else:
            merged[k] = v
    return merged


def resolve_recipe(recipe: Recipe, overrides: Sequence[str] = ()) -> ResolvedRecipe:
    """Apply `stage.key=value` overrides and check every built stage's table against its config class."""
    by_stage: dict[str, list[tuple[str, Any]]] = {}
    inputs = dict(recipe.inputs)
    for text in overrides:
        key, value = parse_override(text)
        stage, _, rest = key.partition(".")
        if stage == "inputs" and rest:
            if not isinstance(value, str):
                raise ConfigError(f"command line: {key}: expected a path string")
            _check_input_role(rest, recipe.stages, recipe.name, "command line")
            if not Path(value).expanduser().exists():
                raise ConfigError(f"command line: {key}: path {value} does not exist")
            inputs[rest] = value
            continue
        if stage not in recipe.stages or not rest:
            raise ConfigError(
                f"command line: override '{text}': key must be STAGE.KEY with STAGE one of "
                f"{', '.join(recipe.stages)} (or inputs.ROLE)"
            )
        by_stage.setdefault(stage, []).append((rest, value))
    configs: dict[str, Any] = {}
    for stage in recipe.stages:
        table = dict(recipe.tables.get(stage, {}))
        extra = _nest(by_stage.get(stage, []))
        spec = get_stage(stage)
        if not spec.built:
            configs[stage] = _merge(table, extra)
            continue
        cls = spec.config_class()
        # File values are checked with the file named, overrides with the command line named.
        checked = config_from_mapping(cls, table, str(recipe.source), prefix=f"{stage}.")
        if extra:
            checked = config_from_mapping(cls, _merge(table, extra), "command line", prefix=f"{stage}.")
        configs[stage] = checked
    shaped = Recipe(recipe.name, recipe.description, recipe.stages, recipe.tables, inputs, recipe.source)
    return ResolvedRecipe(shaped, configs, tuple(overrides))


def plan_recipe(resolved: ResolvedRecipe) -> list[PlannedStage]:
    """Which stage feeds which, what is missing, and which stages are not built yet."""
    provided: dict[str, str] = {}
    for role, path in resolved.recipe.inputs.items():
        provided[role] = path
    rows: list[PlannedStage] = []
    for stage in resolved.recipe.stages:
        spec = get_stage(stage)
        wiring: dict[str, str] = {}
        missing: list[str] = []
        for role in spec.inputs:
            src = provided.get(role)
            if src is None:
                missing.append(role)
            elif not src.startswith("stage:") and not Path(src).exists():
                missing.append(role)
                wiring[role] = f"{src} (does not exist)"
            else:
                wiring[role] = src
        note = "" if spec.built else f"not built yet ({spec.planned_in})"
        if missing and not note:
            note = f"missing inputs: {', '.join(missing)}"
        rows.append(PlannedStage(stage, spec.built, wiring, tuple(missing), note))
        for role in spec.outputs:
            provided[role] = f"stage:{stage}"
    return rows


RESUME_FIELD = "resume_experiment"
"""The config field of a training stage that names the experiment to resume (GRPOConfig)."""
_EXPERIMENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def resume_overrides(recipe: Recipe, experiment_id: str) -> list[str]:
    """`STAGE.resume_experiment="ID"` for every built stage of `recipe` that can resume an experiment.

    ConfigError when the id is not a valid experiment id or the recipe trains nothing resumable.
    """
    if not _EXPERIMENT_ID.fullmatch(experiment_id or ""):
        raise ConfigError(f"resume: {experiment_id!r} is not an experiment id (1-128 characters of "
                          "[A-Za-z0-9._-]); `skillgate experiments` lists them")
    stages = [s for s in recipe.stages if get_stage(s).built
              and RESUME_FIELD in {f.name for f in dataclasses.fields(get_stage(s).config_class())}]
    if not stages:
        raise ConfigError(f"resume: recipe '{recipe.name}' has no training stage that resumes an experiment "
                          f"(stages: {', '.join(recipe.stages)})")
    return [f'{s}.{RESUME_FIELD}="{experiment_id}"' for s in stages]

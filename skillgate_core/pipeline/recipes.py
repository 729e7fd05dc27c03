"""Recipes: named, versioned parameter presets (TOML) that the CLI, the entry flow and prefect.yaml share.

A recipe file looks like

    [recipe]
    name = "demo"
    description = "the whole pipeline on the embedded default"
    stages = ["init-model", "bench-build", ...]

    [inputs]              # optional: roles supplied from outside instead of by an earlier stage
    bench = "/data/my-bench"      # inside the state dir or a folder of SKILLGATE_INPUT_DIRS (base.run_paths)

    [init-model]          # one table per stage: that stage's config values
    vocab_size = 2048

    ["grpo:mixed-task-reward"]   # a labelled second instance of a stage has its own table

`[recipe] upstream = "demo"` names the recipe whose tables configure the stages a run adds to build
an input it lacks (recipe_plan.py: which inputs come from where, and when a stage is added).

Resolution plans the run (recipe_plan.py: the selected entries, the wiring of every input, the
stages added to build missing ones), then checks every key, type and range against each planned
stage's frozen config dataclass and applies `stage.key=value` overrides on top (a recipe file's value
that an override leaves unused is dropped, and the resolved recipe says so: `left_out`, from the
config class's `fields_unused_by`); an error names where
the value came from (the recipe file, the command line, a deployment parameter), and an override of
a stage that is not in the plan is refused. A stage that is not built yet keeps its
table unvalidated (and the plan says so). An input (`[inputs]` or `inputs.ROLE=PATH`) must name a
role some stage of the recipe takes from outside (a typo would otherwise be silently ignored), and a
path given on the command line must exist; a path in the file may be absent (the plan reports it).
Every input path, and a recipe named by its path, must lie where a run may read (base.run_paths:
the state dir, SKILLGATE_INPUT_DIRS, the catalog), or the run is refused naming it.
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

from skillgate_core.base.config import (
    ConfigError,
    canonical_json,
    config_digest,
    config_from_mapping,
    config_to_dict,
    parse_override,
)
from skillgate_core.base.run_paths import OutsidePath, check_run_path
from skillgate_core.base.suggestions import did_you_mean
from skillgate_core.pipeline.recipe_plan import (
    InputFinder,
    PlannedStage,
    Selection,
    check_wiring,
    entry_stage,
    plan_entries,
    validate_entries,
)
from skillgate_core.pipeline.stages import get_stage, stage_names

__all__ = [
    "PlannedStage",
    "Recipe",
    "Selection",
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
    upstream: str = ""
    """Recipe whose tables configure stages a run adds to build missing inputs ("" = stage defaults)."""
    wiring: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Entry -> {input role: "ENTRY.ROLE"}: an input taken from an earlier entry's output of another role."""


@dataclass(frozen=True)
class ResolvedRecipe:
    """A recipe with overrides applied and every built stage's config checked and frozen."""

    recipe: Recipe
    """The recipe as written."""
    configs: Mapping[str, Any]
    """Entry -> frozen config (built stages) or the raw table (stages not built yet), in run order."""
    overrides: tuple[str, ...] = field(default=())
    """The `key=value` overrides applied, in order."""
    plan: tuple[PlannedStage, ...] = field(default=())
    """The run's plan: entries in run order with the source of every input (recipe_plan.py)."""
    selection: Selection = field(default_factory=Selection)
    """The part of the recipe this run executes."""
    left_out: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Entry -> the recipe file's keys its overrides leave unused, dropped (e.g. the tiny model's shape
    once `init-model.source=smollm2-135m-instruct`)."""

    @property
    def name(self) -> str:
        return self.recipe.name

    @property
    def entries(self) -> tuple[str, ...]:
        """The entries this run executes, in order (selected + added)."""
        return tuple(p.entry for p in self.plan)

    def config_json(self, stage: str) -> dict[str, Any]:
        cfg = self.configs[stage]
        return config_to_dict(cfg) if not isinstance(cfg, Mapping) else dict(cfg)

    def digest(self) -> str:
        """Digest of the whole resolved recipe: stage list, inputs, and each stage's config digest."""
        payload = {
            "stages": list(self.entries),
            "inputs": dict(self.recipe.inputs),
            "configs": {
                s: (config_digest(c) if not isinstance(c, Mapping) else canonical_json(c))
                for s, c in self.configs.items()
            },
        }
        if self.recipe.wiring:  # only then: the digests of recipes without wiring stay what they were
            payload["wiring"] = {e: dict(r) for e, r in self.recipe.wiring.items()}
        return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


# Alike in shape to slate_manifest.load_slate_manifest: read, parse, name the file in every error.
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
    unknown = sorted(set(head) - {"name", "description", "stages", "upstream"})
    if unknown:
        keys = ("description", "name", "stages", "upstream")
        raise ConfigError(f"{source}: unknown key 'recipe.{unknown[0]}'"
                          f"{did_you_mean(unknown[0], keys, prefix='recipe.')}; valid keys: {', '.join(keys)}")
    name, description, stages = head.get("name"), head.get("description", ""), head.get("stages")
    upstream = head.get("upstream", "")
    if not isinstance(upstream, str):
        raise ConfigError(f"{source}: recipe.upstream: expected a recipe name, got {upstream!r}")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{source}: recipe.name: expected a non-empty str, got {name!r}")
    if not isinstance(description, str):
        raise ConfigError(f"{source}: recipe.description: expected str, got {type(description).__name__}")
    if not isinstance(stages, list) or not stages or not all(isinstance(s, str) for s in stages):
        raise ConfigError(f"{source}: recipe.stages: expected a non-empty list of stage names, got {stages!r}")
    validate_entries(stages, str(source))
    inputs = data.pop("inputs", {})
    if not isinstance(inputs, dict) or not all(isinstance(v, str) for v in inputs.values()):
        raise ConfigError(f"{source}: [inputs]: expected a table of role = \"path\" strings")
    for role in inputs:
        _check_input_role(role, stages, name, str(source))
    wiring = data.pop("wiring", {})
    if not isinstance(wiring, dict):
        raise ConfigError(f"{source}: [wiring]: expected a table of \"ENTRY\" = {{ROLE = \"ENTRY.ROLE\"}}")
    check_wiring(wiring, stages, str(source))
    tables: dict[str, dict[str, Any]] = {}
    for key, table in data.items():
        if entry_stage(key) not in stage_names():
            raise ConfigError(
                f"{source}: unknown table [{key}]"
                + did_you_mean(key, ("recipe", "inputs", "wiring", *stage_names()), form="[{}]")
                + f"; expected [recipe], [inputs], [wiring] or a stage: {', '.join(stage_names())}"
            )
        if key not in stages:
            raise ConfigError(f"{source}: table [{key}] configures a stage that recipe.stages does not list")
        if not isinstance(table, dict):
            raise ConfigError(f"{source}: {key}: expected a table of config values")
        tables[key] = table
    return Recipe(name, description, tuple(stages), tables, inputs, source, upstream, wiring)


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
    """A recipe by catalog name, or by path to a .toml file inside the catalog `directory` or a folder a
    run may read (base.run_paths: a deployment's `recipe` parameter names it)."""
    if name_or_path.endswith(".toml") or Path(name_or_path).is_file():
        try:
            return load_recipe(check_run_path(name_or_path, "recipe", catalog=(directory,)))
        except OutsidePath as exc:
            raise ConfigError(str(exc)) from None
    recipes = list_recipes(directory)
    for r in recipes:
        if r.name == name_or_path:
            return r
    raise ConfigError(
        f"no recipe named '{name_or_path}'{did_you_mean(name_or_path, [r.name for r in recipes])} in {directory}; "
        f"known: {', '.join(r.name for r in recipes)}"
    )


def _check_input_role(role: str, stages: Sequence[str], recipe: str, source: str) -> None:
    """Refuse an input role that no stage of the recipe would read from outside."""
    outside: list[str] = []  # consumed before any stage of the recipe produces it
    produced_by: dict[str, str] = {}
    consumed: set[str] = set()
    for stage in stages:
        spec = get_stage(entry_stage(stage))
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
        f"{source}: inputs.{role}: no stage of recipe '{recipe}' takes role '{role}'"
        f"{did_you_mean(role, outside, prefix='inputs.')}; roles it takes "
        f"from outside: {', '.join(sorted(outside)) or 'none'}"
    )


def _check_input_path(key: str, path: str, source: str) -> None:
    """An input path must lie where a run may read (base.run_paths); ConfigError naming key and source."""
    try:
        check_run_path(path, key)
    except OutsidePath as exc:
        raise ConfigError(f"{source}: {exc}") from None


def _nest(flat: Iterable[tuple[str, Any]], source: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for dotted, value in flat:
        node = out
        *parents, leaf = dotted.split(".")
        for p in parents:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{source}: '{dotted}' sets a key inside a non-table value")
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


def resolve_recipe(
    recipe: Recipe,
    overrides: Sequence[str] = (),
    *,
    source: str = "command line",
    selection: Selection = Selection(),
    finder: InputFinder | None = None,
    build_missing: bool = False,
) -> ResolvedRecipe:
    """Plan the run (recipe_plan.py) and check every planned stage's config with the overrides applied.

    `source` names where the overrides came from ("command line", "deployment parameter 'overrides'"):
    every error about them says so. `finder` looks up inputs on record (None: only the recipe and the
    overrides provide inputs); `build_missing` adds the stages that build inputs nothing provides
    (what `skillgate run` and the entry flow do; off, the plan lists them as missing).
    """
    by_entry: dict[str, list[tuple[str, Any]]] = {}
    for role, path in recipe.inputs.items():  # a recipe outside the catalog is a run parameter too
        _check_input_path(f"inputs.{role}", path, str(recipe.source))
    inputs = dict(recipe.inputs)
    given_inputs: list[tuple[str, str]] = []
    for text in overrides:
        key, value = parse_override(text, source)
        entry, _, rest = key.partition(".")
        if entry == "inputs" and rest:
            if not isinstance(value, str):
                raise ConfigError(f"{source}: {key}: expected a path or an id/digest string")
            if Path(value).expanduser().exists():
                _check_input_path(key, value, source)
            else:
                if finder is None:
                    raise ConfigError(f"{source}: {key}: path {value} does not exist")
                try:  # a run id, export id, digest (or unique prefix) that the record knows
                    value = finder.lookup(rest, value).path
                except LookupError as exc:
                    raise ConfigError(f"{source}: {key}: {value!r} is neither an existing path nor a "
                                      f"reference to a {rest}: {exc}") from None
            inputs[rest] = value
            given_inputs.append((rest, value))
            continue
        if not rest:
            raise ConfigError(f"{source}: override '{text}': key must be STAGE.KEY (or inputs.ROLE)")
        by_entry.setdefault(entry, []).append((rest, value))
    upstream = find_recipe(recipe.upstream, recipe.source.parent) if recipe.upstream else None
    plan = plan_entries(recipe.stages, selection, inputs, finder=finder,
                        upstream_entries=upstream.stages if upstream else (), build_missing=build_missing,
                        where=source, wiring=recipe.wiring)
    entries = [p.entry for p in plan]
    for role, _ in given_inputs:
        _check_input_role(role, entries, recipe.name, source)
    for entry, values in by_entry.items():
        if entry not in entries:
            key, value = values[0]
            raise ConfigError(
                f"{source}: override '{entry}.{key}': stage '{entry}' is not in this run's plan"
                f"{did_you_mean(entry, entries)} ({', '.join(entries)})" + (f" ({selection.describe()})" if selection else "")
            )
    configs: dict[str, Any] = {}
    left_out_by_entry: dict[str, tuple[str, ...]] = {}
    for row in plan:
        entry, spec = row.entry, get_stage(row.stage)
        table_source = recipe if entry in recipe.stages or upstream is None else upstream
        table = dict(table_source.tables.get(entry, {}))
        extra = _nest(by_entry.get(entry, []), source)
        if not spec.built:
            configs[entry] = _merge(table, extra)
            continue
        cls = spec.config_class()
        # File values are checked with the file named, overrides with their source named.
        checked = config_from_mapping(cls, table, str(table_source.source), prefix=f"{entry}.")
        if extra:
            table, left_out = _without_fields_unused_by(cls, table, extra)
            if left_out:
                left_out_by_entry[entry] = left_out
            checked = config_from_mapping(cls, _merge(table, extra), source, prefix=f"{entry}.")
        configs[entry] = checked
    shaped = dataclasses.replace(recipe, inputs=inputs)
    return ResolvedRecipe(shaped, configs, tuple(overrides), tuple(plan), selection, left_out_by_entry)


def _without_fields_unused_by(cls: type, table: Mapping[str, Any], extra: Mapping[str, Any]
                              ) -> tuple[dict[str, Any], tuple[str, ...]]:
    """(the file's table without the values the overrides leave unused, the keys left out). A config
    class names them with `fields_unused_by(values)` (init-model: the tiny model's shape once the source
    is SmolLM2); a value the overrides themselves set is kept, so the config still refuses it."""
    unused_by = getattr(cls, "fields_unused_by", None)
    if unused_by is None:
        return dict(table), ()
    unused = set(unused_by(_merge(table, extra))) - set(extra)
    left_out = tuple(k for k in table if k in unused)
    return {k: v for k, v in table.items() if k not in unused}, left_out


def plan_recipe(resolved: ResolvedRecipe) -> list[PlannedStage]:
    """The run's plan: which entry feeds which input, what is found on record, added or missing."""
    return list(resolved.plan)


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
    stages = [s for s in recipe.stages if get_stage(entry_stage(s)).built
              and RESUME_FIELD in {f.name for f in dataclasses.fields(get_stage(entry_stage(s)).config_class())}]
    if not stages:
        raise ConfigError(f"resume: recipe '{recipe.name}' has no training stage that resumes an experiment "
                          f"(stages: {', '.join(recipe.stages)})")
    if len(stages) > 1:  # each arm is its own experiment: one id cannot continue both
        raise ConfigError(f"resume: recipe '{recipe.name}' trains {len(stages)} arms ({', '.join(stages)}); resume one "
                          f"with its own recipe (e.g. rl-train), or pass {stages[0]}.{RESUME_FIELD}=ID as an override")
    return [f'{s}.{RESUME_FIELD}="{experiment_id}"' for s in stages]

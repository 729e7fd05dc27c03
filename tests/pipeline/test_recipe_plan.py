"""Run plans: labelled stage instances, --only/--from/--until, inputs found on record, stages added
to build missing inputs, and errors that name where a bad value came from (orchestration 4 and 7)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from deployments import RECIPES_DIR
from skillgate_core.base.config import ConfigError
from skillgate_core.base.paths import state_layout
from skillgate_core.pipeline.gathered import gather_outputs, stage_inputs
from skillgate_core.pipeline.recipe_plan import FoundInput, Selection
from skillgate_core.pipeline.recipes import find_recipe, load_recipe, resolve_recipe


class DictFinder:
    """An InputFinder over a fixed mapping (the warehouse one is exercised in test_entry_flow)."""

    def __init__(self, found: dict[str, str]) -> None:
        self.found, self.asked = found, []

    def newest(self, role: str) -> FoundInput | None:
        self.asked.append(role)
        return FoundInput(self.found[role], f"run of {role}") if role in self.found else None


def _rows(resolved):
    return {r.entry: r for r in resolved.plan}


def test_demo_trains_two_arms_evaluates_both_and_gathers_the_rows():
    resolved = resolve_recipe(find_recipe("demo", RECIPES_DIR))
    rows = _rows(resolved)
    assert resolved.configs["grpo"].profile == "selector_clean_oracle_action_credit"
    assert resolved.configs["grpo:mixed-task-reward"].profile == "mixed_task_reward"
    assert rows["grpo:mixed-task-reward"].sources["rl_data"] == ("stage:rl-data-prep",)  # same data
    assert rows["eval70"].sources["policy_export"] == ("stage:grpo",)
    assert rows["eval70:mixed-task-reward"].sources["policy_export"] == ("stage:grpo:mixed-task-reward",)
    assert rows["paper-tables"].sources["eval_rows"] == ("stage:eval70", "stage:eval70:mixed-task-reward")
    assert not any(r.missing for r in resolved.plan)


@pytest.mark.parametrize(("stages", "message"), [
    ('["grpo:Mixed"]', "a label after ':' must be 1-48 characters"),
    ('["grpo:a", "grpo:a"]', "entries must be unique and in pipeline order"),
    ('["eval70", "grpo"]', "entries must be unique and in pipeline order"),
    ('["grpo:"]', "a label after ':'"),
    ('["nope:a"]', "unknown stage 'nope'"),
])
def test_bad_entries_are_refused_naming_the_file(tmp_path, stages, message):
    path = tmp_path / "r.toml"
    path.write_text(f'[recipe]\nname = "r"\nstages = {stages}\n')
    with pytest.raises(ConfigError, match=message) as err:
        load_recipe(path)
    assert str(err.value).startswith(f"{path}: recipe.stages")


def test_selection_keeps_part_of_the_recipe_and_names_bad_stage_names():
    demo = find_recipe("demo", RECIPES_DIR)
    until = resolve_recipe(demo, selection=Selection(until="sft"))
    assert until.entries == ("init-model", "bench-build", "collect", "sft")
    start = resolve_recipe(demo, selection=Selection(start="eval70"), finder=DictFinder({"bench": "/b"}))
    assert start.entries == ("eval70", "eval70:mixed-task-reward", "paper-tables")
    only = resolve_recipe(demo, selection=Selection(only=("grpo",)))
    assert only.entries == ("grpo", "grpo:mixed-task-reward")  # a stage name selects all its instances
    with pytest.raises(ConfigError, match=r"^command line: --until: 'sfft' is not a stage of this recipe"):
        resolve_recipe(demo, selection=Selection(until="sfft"))
    with pytest.raises(ConfigError, match=r"^flow parameter 'overrides': --from: 'x'"):
        resolve_recipe(demo, source="flow parameter 'overrides'", selection=Selection(start="x"))


def test_a_skipped_stage_output_comes_from_the_record_or_the_command_line(tmp_path):
    demo = find_recipe("demo", RECIPES_DIR)
    bench, model = tmp_path / "bench", tmp_path / "sft"
    bench.mkdir()
    model.mkdir()
    finder = DictFinder({"bench": str(bench), "sft_model": str(model)})
    rows = _rows(resolve_recipe(demo, selection=Selection(only=("rl-data-prep",)), finder=finder))
    assert list(rows) == ["rl-data-prep"]
    assert rows["rl-data-prep"].sources == {"bench": (str(bench),), "sft_model": (str(model),)}
    assert rows["rl-data-prep"].found == {"bench": "run of bench", "sft_model": "run of sft_model"}
    # named on the command line: it wins over the record
    other = tmp_path / "other-sft"
    other.mkdir()
    rows = _rows(resolve_recipe(demo, [f"inputs.sft_model={other}"], selection=Selection(only=("rl-data-prep",)),
                                finder=finder))
    assert rows["rl-data-prep"].sources["sft_model"] == (str(other),) and "sft_model" not in rows["rl-data-prep"].found
    # nothing on record, --only: missing (never built behind the user's back), with what to do
    rows = _rows(resolve_recipe(demo, selection=Selection(only=("rl-data-prep",)), finder=DictFinder({}),
                                build_missing=True))
    assert rows["rl-data-prep"].missing == ("bench", "sft_model")
    assert "give inputs.bench=PATH|ID" in rows["rl-data-prep"].note


def test_a_stage_of_the_run_wins_over_the_record():
    finder = DictFinder({"bench": "/old/bench", "sft_model": "/old/sft"})
    rows = _rows(resolve_recipe(find_recipe("demo", RECIPES_DIR), finder=finder))
    assert rows["rl-data-prep"].sources == {"bench": ("stage:bench-build",), "sft_model": ("stage:sft",)}
    assert finder.asked == []


def test_missing_inputs_are_built_by_the_upstream_recipes_stages():
    """rl-train on a fresh state: bench, base model, trajectories and SFT model are built first, each
    configured as the demo recipe configures it, and overrides of those added stages are accepted."""
    recipe = find_recipe("rl-train", RECIPES_DIR)
    resolved = resolve_recipe(recipe, ["collect.max_tasks=3"], finder=DictFinder({}), build_missing=True)
    rows = _rows(resolved)
    assert resolved.entries == ("bench-build", "init-model", "collect", "sft", "rl-data-prep", "grpo")
    assert rows["sft"].added_for == "sft_model for rl-data-prep" and not rows["grpo"].added_for
    demo = resolve_recipe(find_recipe("demo", RECIPES_DIR))
    assert resolved.configs["bench-build"] == demo.configs["bench-build"]
    assert resolved.configs["collect"].max_tasks == 3 and resolved.configs["collect"].repeats == 2
    # found on record: nothing added
    found = resolve_recipe(recipe, finder=DictFinder({"bench": "/b", "sft_model": "/s"}), build_missing=True)
    assert found.entries == ("rl-data-prep", "grpo")
    # an override for a stage the run does not have is refused, naming where it came from
    with pytest.raises(ConfigError, match=r"^flow parameter 'overrides': override 'collect.max_tasks': stage "
                                          r"'collect' is not in this run's plan \(rl-data-prep, grpo\)"):
        resolve_recipe(recipe, ["collect.max_tasks=3"], source="flow parameter 'overrides'",
                       finder=DictFinder({"bench": "/b", "sft_model": "/s"}), build_missing=True)


def test_gathered_outputs_are_one_content_addressed_folder(tmp_path, monkeypatch):
    layout = state_layout(tmp_path / "home")
    a, b = tmp_path / "a", tmp_path / "b"
    for folder, text in ((a, "one"), (b, "two")):
        (folder / "sub").mkdir(parents=True)
        (folder / "sub" / "eval_trials.parquet").write_text(text)
    outputs = {"eval70": {"eval_rows": str(a)}, "eval70:x": {"eval_rows": str(b)}}
    sources = {"eval_rows": ("stage:eval70", "stage:eval70:x")}
    first = Path(stage_inputs(sources, outputs, layout)["eval_rows"])
    assert (first / "eval70" / "sub" / "eval_trials.parquet").read_text() == "one"
    assert (first / "eval70-x" / "sub" / "eval_trials.parquet").read_text() == "two"
    assert Path(stage_inputs(sources, outputs, layout)["eval_rows"]) == first  # same content, same folder
    (b / "sub" / "eval_trials.parquet").write_text("changed")
    assert gather_outputs({"eval70": a, "eval70:x": b}, layout) != first
    # one source: passed through, nothing gathered
    assert stage_inputs({"eval_rows": ("stage:eval70",)}, outputs, layout) == {"eval_rows": str(a)}


def test_learning_result_evaluates_the_sft_policy_itself_through_its_wiring(tmp_path):
    resolved = resolve_recipe(find_recipe("learning-result", RECIPES_DIR))
    rows = _rows(resolved)
    assert rows["eval70:sft"].sources["policy_export"] == ("stage:sft#sft_model",)
    assert rows["eval70:sft"].inputs["policy_export"] == "stage:sft#sft_model"
    # bc, dpo and grpo all produce a policy_export: each evaluation is wired to its own
    assert rows["eval70"].sources["policy_export"] == ("stage:grpo#policy_export",)
    assert rows["eval70:bc"].sources["policy_export"] == ("stage:bc#policy_export",)
    assert rows["eval70:dpo"].sources["policy_export"] == ("stage:dpo#policy_export",)
    assert rows["eval70:mixed-task-reward"].sources["policy_export"] == ("stage:grpo:mixed-task-reward",)
    assert rows["bc"].sources == rows["dpo"].sources == {"sft_model": ("stage:sft",), "rl_data": ("stage:rl-data-prep",)}
    assert rows["paper-tables"].sources["eval_rows"] == (
        "stage:eval70:sft", "stage:eval70:bc", "stage:eval70:dpo", "stage:eval70:mixed-task-reward", "stage:eval70",
        "stage:eval70:masked-task-only")
    arms = {e: resolved.configs[e] for e in ("grpo:mixed-task-reward", "grpo", "grpo:masked-task-only")}
    assert [c.profile for c in arms.values()] == ["mixed_task_reward", "selector_clean_oracle_action_credit",
                                                  "selector_clean_oracle_masked_task_only"]
    plain = [{k: v for k, v in dataclasses.asdict(c).items() if k != "profile"} for c in arms.values()]
    assert plain[0] == plain[1] == plain[2]  # the arms differ in their profile only
    assert not any(r.missing for r in resolved.plan)
    sft_out = tmp_path / "sft-model"
    outputs = {"sft": {"sft_model": str(sft_out)}, "bench-build": {"bench": "/b"}}
    assert stage_inputs(rows["eval70:sft"].sources, outputs, state_layout()) == {
        "policy_export": str(sft_out), "bench": "/b"}
    skipping = resolve_recipe(find_recipe("learning-result", RECIPES_DIR), selection=Selection(only=("eval70:sft",)),
                              finder=DictFinder({"bench": "/b"}))
    (row,) = skipping.plan
    assert row.missing == ("policy_export",) and "wired to sft.sft_model" in row.note


@pytest.mark.parametrize(("wiring", "message"), [
    ('"eval70:x" = { policy_export = "sft.sft_model" }', "wiring.eval70:x: not an entry"),
    ('eval70 = { model = "sft.sft_model" }', "stage 'eval70' takes policy_export, bench, not 'model'"),
    ('eval70 = { policy_export = "sft" }', "expected .ENTRY.ROLE. naming an entry listed before"),
    ('sft = { base_model = "eval70.eval_rows" }', "naming an entry listed before 'sft'"),
    ('eval70 = { policy_export = "sft.trajectories" }', "'sft' produces sft_model, not 'trajectories'"),
])
def test_bad_wiring_is_refused_naming_the_key(tmp_path, wiring, message):
    path = tmp_path / "r.toml"
    path.write_text('[recipe]\nname = "r"\nstages = ["sft", "eval70"]\n[wiring]\n' + wiring + "\n")
    with pytest.raises(ConfigError, match=message) as err:
        load_recipe(path)
    assert str(err.value).startswith(f"{path}: wiring.")

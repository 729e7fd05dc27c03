"""The entry flow under a real Prefect test server, running the real init-model stage."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("prefect_server")

SMALL = ["init-model.corpus_lines=300", "init-model.vocab_size=600", "init-model.hidden_size=32"]
# No validity gate (its own tests: tests/benchgen): the recipe's chain is the subject here, not the sandboxes.
DEMO_SMALL = ["bench-build.eval_tasks=4", "bench-build.slate_tasks=4", "bench-build.train_tasks_per_skill=1",
              'bench-build.gate="none"', "collect.max_tasks=2", "collect.repeats=1", "collect.misleading_rate=0.0", "sft.max_steps=1",
              "sft.per_device_batch_size=1", "sft.max_length=100000"]


def test_entry_flow_runs_a_real_stage_and_reuses_it(skillgate_home: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from flows.skillgate import skillgate

    result = skillgate(recipe="init-model", overrides=SMALL, trigger="test")
    record = result["stages"]["init-model"]
    assert record["status"] == "completed"
    model_dir = Path(record["outputs"]["base_model"])
    assert model_dir.is_relative_to(skillgate_home), "stage outputs must live under SKILLGATE_HOME"
    assert len(record["output_digests"]["base_model"]) == 64

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tok = AutoTokenizer.from_pretrained(model_dir)
    assert model.config.model_type == "qwen2" and model.config.hidden_size == 32
    text = tok.apply_chat_template([{"role": "user", "content": "list /skills"}], tokenize=False,
                                   add_generation_prompt=True)
    assert text.endswith("<|im_start|>assistant\n")
    assert tok.decode(tok(text)["input_ids"]) == text  # byte-level BPE round-trips

    again = skillgate(recipe="init-model", overrides=SMALL, trigger="test")["stages"]["init-model"]
    assert again["status"] == "reused" and again["out_dir"] == record["out_dir"]


def test_flow_runs_are_named_after_recipe_and_stage_and_tagged(skillgate_home: Path):
    """Orchestration 10: the entry run reads `RECIPE (trigger)`, each stage run `RECIPE/ENTRY`, and the
    stage runs carry the recipe and trigger tags; every stage publishes a summary and its metrics."""
    from prefect import get_client, tags
    from prefect.artifacts import Artifact
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId
    from prefect.utilities.asyncutils import run_coro_as_sync

    from flows.skillgate import skillgate

    with tags("recipe:init-model"):
        state = skillgate(recipe="init-model", overrides=SMALL, trigger="test", return_state=True)
    assert state.is_completed()

    async def runs():
        async with get_client() as client:
            parent = await client.read_flow_run(state.state_details.flow_run_id)
            children = await client.read_flow_runs(flow_run_filter=FlowRunFilter(
                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[parent.id])))
            return parent, children

    parent, children = run_coro_as_sync(runs())
    assert parent.name == "init-model (test)" and "recipe:init-model" in parent.tags
    assert [c.name for c in children] == ["init-model/init-model"]
    assert {"recipe:init-model", "trigger:test"} <= set(children[0].tags)
    assert "completed" in str(Artifact.get("init-model-summary").data)
    summary = Artifact.get("skillgate-run-summary")
    assert summary is not None and "base_model: `SKILLGATE_HOME/artifacts/init-model/" in str(summary.data)
    assert str(skillgate_home) not in str(summary.data)  # paths as the state dir names them, not this machine's


def test_entry_flow_runs_part_of_a_recipe_then_one_stage_from_the_warehouse(skillgate_home: Path):
    """--until runs the head of the demo; --only then runs one stage with its inputs found on record."""
    from flows.skillgate import skillgate

    result = skillgate(recipe="demo", overrides=SMALL + DEMO_SMALL, trigger="test", until="rl-data-prep")
    stages = result["stages"]
    assert list(stages) == ["init-model", "bench-build", "collect", "sft", "rl-data-prep"]
    for built in ("bench-build", "collect", "sft", "rl-data-prep"):
        assert stages[built]["status"] == "completed", (built, stages[built])
    assert stages["collect"]["metrics"]["episodes"] == 2
    # rl-data-prep renders its prompts with the SFT model the sft stage just wrote (lineage by role).
    assert stages["rl-data-prep"]["inputs"]["sft_model"] == stages["sft"]["outputs"]["sft_model"]
    assert stages["rl-data-prep"]["metrics"]["tasks"] == 16
    assert not (skillgate_home / "artifacts" / "grpo").exists()

    # --only rl-data-prep with another profile: bench and sft_model are the newest on record.
    again = skillgate(recipe="demo", overrides=["rl-data-prep.profile=mixed_task_reward"], trigger="test",
                      only=["rl-data-prep"])["stages"]
    assert list(again) == ["rl-data-prep"] and again["rl-data-prep"]["status"] == "completed"
    assert again["rl-data-prep"]["inputs"] == stages["rl-data-prep"]["inputs"]
    assert again["rl-data-prep"]["out_dir"] != stages["rl-data-prep"]["out_dir"]

    # inputs named by what `skillgate run` printed: a run id, a digest prefix (orchestration 5)
    named = skillgate(recipe="demo", trigger="test", only=["rl-data-prep"], overrides=[
        f"inputs.sft_model={stages['sft']['run_id']}",
        f"inputs.bench={stages['bench-build']['output_digests']['bench'][:10]}"])["stages"]["rl-data-prep"]
    assert named["inputs"] == stages["rl-data-prep"]["inputs"] and named["status"] == "reused"
    from skillgate_core.base.config import ConfigError

    with pytest.raises(ConfigError, match=r"inputs.bench: 'zz-nothing' is neither an existing path nor a reference"):
        skillgate(recipe="demo", trigger="test", only=["rl-data-prep"], overrides=["inputs.bench=zz-nothing"])


def test_a_run_that_cannot_do_its_job_fails_before_starting(skillgate_home: Path):
    """An input nothing provides (--only on a fresh state) ends the flow run Failed, reason in the state."""
    from flows.skillgate import PlanNotRunnable, skillgate

    state = skillgate(recipe="rl-train", trigger="test", only=["grpo"], return_state=True)
    assert state.is_failed()
    with pytest.raises(PlanNotRunnable) as err:
        state.result()
    message = str(err.value)
    assert "cannot run; nothing was started" in message
    for role in ("sft_model", "bench"):
        assert f"{role}: none on record: give inputs.{role}=PATH|ID" in message
    assert "rl_data: produced by 'rl-data-prep', which this run skips (--only grpo)" in message
    assert not (skillgate_home / "artifacts").exists()


def test_errors_name_where_a_bad_value_came_from(skillgate_home: Path):
    from flows.skillgate import skillgate
    from skillgate_core.base.config import ConfigError

    state = skillgate(recipe="init-model", overrides=["init-model.hidden_size=fast"], trigger="ui",
                      return_state=True)
    with pytest.raises(ConfigError, match=r"^flow parameter 'overrides': init-model.hidden_size: expected int"):
        state.result()
    state = skillgate(recipe="init-model", overrides=["sft.max_steps=3"], trigger="ui", return_state=True)
    with pytest.raises(ConfigError, match=r"^flow parameter 'overrides': override 'sft.max_steps': stage 'sft' "
                                          r"is not in this run's plan \(init-model\)"):
        state.result()

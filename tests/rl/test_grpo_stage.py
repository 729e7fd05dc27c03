"""The grpo stage end to end: Ray Train workers, DeepSpeed ZeRO-3, real sandboxes, ownership, export.

Rollouts come from the noisy teacher (`rollout_source = "teacher"`): a tiny random model solves no
task, so every group it plays has zero variance and the dynamic filter rejects it; the teacher's
selection noise gives groups that vary, which is what these tests need to see the update. The
replica path (`rollout_source = "policy"`) has its own test below.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from skillgate_core.base.paths import state_layout
from skillgate_core.ownership import experiment_dir, experiments_root, list_checkpoints, list_segments
from skillgate_core.rl.data_prep import RLDataPrepConfig, prepare_rl_data
from skillgate_core.rl.grpo_config import GRPOConfig
from skillgate_core.rl.grpo_stage import train_grpo
from skillgate_core.rl.profiles import profile_names

TINY = dict(steps=2, prompts_per_step=2, group_size=4, num_workers=2, rollout_source="teacher", max_turns=4,
            teacher_misleading_rate=0.5, teacher_no_read_rate=0.0, learning_rate=1e-3, max_rejected_groups=8,
            force_after_groups=2, force_after_samples=8, backend="bwrap", sandbox_workers=2)


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory, bench, policy) -> dict[str, Path]:
    return {"sft_model": policy, "bench": bench, "root": tmp_path_factory.mktemp("grpo")}


def _rl_data(pipeline, profile: str) -> Path:
    out = pipeline["root"] / f"rl-{profile}"
    if not out.exists():
        prepare_rl_data(RLDataPrepConfig(profile=profile, max_tasks=8), {"bench": pipeline["bench"],
                                                                         "sft_model": pipeline["sft_model"]}, out)
    return out


def _run(pipeline, profile: str, tmp_path: Path, **changes):
    config = GRPOConfig(profile=profile, **{**TINY, **changes})
    inputs = {"sft_model": pipeline["sft_model"], "rl_data": _rl_data(pipeline, profile), "bench": pipeline["bench"]}
    out = tmp_path / f"out-{profile}"
    out.mkdir()
    return config, train_grpo(config, inputs, out)


def _weights(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(next(path.glob("*.safetensors"))))


def _check_run(pipeline, profile: str, tmp_path: Path, **changes) -> None:
    from transformers import AutoModelForCausalLM

    config, result = _run(pipeline, profile, tmp_path, **changes)
    rows = [json.loads(line) for line in Path(result.metrics["metrics_file"]).read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1]
    trained = [r for r in rows if r["trained"]]
    assert trained, rows
    for r in trained:
        assert all(torch.isfinite(torch.tensor(r[k])) for k in ("loss", "policy_task", "kl"))
    # the optimizer steps each arm really took, in the rows and the stage output
    for r in rows:
        assert r["optimizer_step_taken"] == (r["grad_norm"] is not None) == (r["learning_rate"] is not None)
        assert r["learning_rate"] in (None, config.learning_rate) and r["variant"] == ""
    taken = sum(r["optimizer_step_taken"] for r in rows)
    assert result.metrics["optimizer_steps"] == rows[-1]["optimizer_steps"] == taken > 0
    assert result.metrics["variant"] == ""
    # the premise (docs/method.md 8b) of every step, over the slate episodes of every group drawn on both ranks
    for r in rows:
        assert {"premise/p1_disagreement_share", "premise/name_token_share", "premise/recovery_rate"} <= set(r)
        slate_episodes = {"no_skill": 0, "hybrid_slate": r["episodes_played"] // 2}.get(profile, r["episodes_played"])
        assert r["premise/episodes"] + r["premise/episodes_aborted"] == slate_episodes
    # grpo.zero_stage auto (the default) resolves on the ranks and the run says to what and why
    assert config.zero_stage == "auto" and result.metrics["zero_stage_resolved"] == 3
    assert "CPU" in result.metrics["zero_stage_reason"]
    export = result.outputs["policy_export"]
    model = AutoModelForCausalLM.from_pretrained(export)
    assert model.num_parameters() > 0
    before, after = _weights(Path(pipeline["sft_model"])), _weights(export)
    assert any(not torch.equal(before[k], after[k]) for k in before if k in after), "no parameter changed"
    # ownership: one experiment, one completed segment, a checkpoint per step, the export
    exp = experiment_dir(experiments_root(state_layout()), result.metrics["experiment_id"])
    (segment,) = list_segments(exp)
    assert segment.exit_reason == "completed"
    assert [c.step for c in list_checkpoints(exp)] == [1, 2]
    assert json.loads((export / "export.json").read_text())["step"] == 2
    assert Path(result.metrics["curves"]).stat().st_size > 0


def test_skillgate_two_workers(pipeline, tmp_path, skillgate_home):
    # groups of two: each worker trains 2 episodes a step instead of 4 (the workers, not the group size, are
    # the subject here; groups of 4: every profile's slow test below)
    _check_run(pipeline, "selector_clean_oracle_action_credit", tmp_path, group_size=2)


@pytest.mark.slow
@pytest.mark.parametrize("profile", [p for p in profile_names() if p != "selector_clean_oracle_action_credit"])
def test_every_profile_two_workers(pipeline, tmp_path, skillgate_home, profile):
    _check_run(pipeline, profile, tmp_path)


def test_a_labelled_variant_carries_its_label(pipeline, tmp_path, skillgate_home):
    """A variant run (never the default) says so in its experiment id, every metrics row, the stage output
    and the export's lineage, so no table can take it for the method."""
    # One step of one group of two in this process: the labels are the subject, not the update (the variant's
    # filter: tests/rl/test_selector_credit_update.py); 2 episodes to play and train instead of 8.
    config, result = _run(pipeline, "selector_clean_oracle_action_credit", tmp_path, steps=1, num_workers=1,
                          prompts_per_step=1, group_size=2, launcher="process", selector_on_zero_variance=True)
    assert result.metrics["experiment_id"].startswith("grpo-selector-clean-oracle-action-credit-"
                                                      "selector-on-zero-variance-")
    assert result.metrics["variant"] == "selector_on_zero_variance"
    assert result.metrics["zero_stage_resolved"] == 3  # auto on CPU, one process: recorded as well
    state = json.loads(next(Path(c["path"]) for c in result.metrics["checkpoints"]).joinpath(
        "trainer_state.json").read_text())
    assert state["zero_stage"] == 3 and state["config"]["zero_stage"] == "auto"  # what a resume keeps
    rows = [json.loads(line) for line in Path(result.metrics["metrics_file"]).read_text().splitlines()]
    assert [r["variant"] for r in rows] == ["selector_on_zero_variance"]
    assert "selector_only_groups" in rows[0]
    lineage = (Path(result.metrics["export_path"]) / "lineage.json").read_text()
    assert '"variant": "selector_on_zero_variance"' in lineage


@pytest.mark.slow  # two GRPO runs (~50 s); rollout_step's own test covers the rule in the default suite
def test_drawing_ahead_trains_on_the_groups_one_draw_at_a_time_would(pipeline, tmp_path, skillgate_home):
    """grpo.draw_ahead through the stage: the teacher plays each task the same whatever the weights, so over
    two steps the run draws, accepts and rejects exactly what draw_ahead 1 does; the groups it played ahead
    and did not judge are counted apart, and the next step draws them again (the stream got them back)."""
    rows = {}
    for ahead in (1.0, 3.0):
        (tmp_path / str(ahead)).mkdir()
        _, result = _run(pipeline, "selector_clean_oracle_action_credit", tmp_path / str(ahead), num_workers=1,
                         launcher="process", group_size=2, draw_ahead=ahead)
        rows[ahead] = [json.loads(line) for line in Path(result.metrics["metrics_file"]).read_text().splitlines()]
    for one, ahead in zip(rows[1.0], rows[3.0], strict=True):
        for key in ("drawn_task_ids", "groups_drawn", "groups_accepted", "rejected", "episodes_played"):
            assert ahead[key] == one[key], key
        assert one["groups_discarded"] == one["episodes_discarded"] == 0
        assert ahead["episodes_discarded"] == 2 * ahead["groups_discarded"]
    assert sum(r["groups_discarded"] for r in rows[3.0]) > 0, "no round played ahead: the test shows nothing"


@pytest.mark.slow  # ~2 min on the 2-core machine: a Ray Train run of its own
def test_the_held_in_probe_curve_is_logged_from_the_start(pipeline, tmp_path, skillgate_home):
    # the replica plays (rollout_source "policy"): the probe scores that replica, before step 0 and after every
    # probe_every steps, on the same held-in sample
    from skillgate_core.agent.selection_scores import probe_training_rows
    from skillgate_core.base.parquet_rows import read_rows
    from skillgate_core.evaluation.probe import ProbeConfig, load_probe_model
    from skillgate_core.rl.heldin_probe import heldin_sample

    config, result = _run(pipeline, "mixed_task_reward", tmp_path, rollout_source="policy", num_workers=1,
                          group_size=2, max_turns=2, max_new_tokens=8, probe_every=1, probe_tasks=3)
    rows = [json.loads(line) for line in Path(result.metrics["metrics_file"]).read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1]
    for r in rows:
        assert r["probe/heldin_tasks"] == 3
        assert 0.0 < r["probe/heldin_oracle_given_cluster"] < 1.0
        assert r["probe/heldin_cluster_rank1_rate"] in (0.0, 1 / 3, 2 / 3, 1.0)
    start = rows[0]["probe/start_heldin_oracle_given_cluster"]
    assert "probe/start_heldin_oracle_given_cluster" not in rows[1]
    rl_data = _rl_data(pipeline, "mixed_task_reward")
    sample = heldin_sample(rl_data, config.seed, config.probe_tasks)
    assert [r["task_id"] for r in sample] == [r["task_id"] for r in heldin_sample(rl_data, config.seed, 3)], "a fixed sample"
    assert len(read_rows(Path(rl_data) / "rl_train.parquet")) >= len(sample) == 3
    model, tok = load_probe_model(Path(pipeline["sft_model"]), ProbeConfig(device="cpu"))
    probed = probe_training_rows(model, tok, sample, "reasoning")
    assert abs(start - sum(r["oracle_given_cluster"] for r in probed) / 3) < 1e-4, "the start is the SFT policy"

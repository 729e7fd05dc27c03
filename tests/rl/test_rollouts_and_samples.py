"""A worker's rollout step and the conversion to training samples, on real tasks and sandboxes."""

from __future__ import annotations

import numpy as np
import pytest

from skillgate_core.agent.policies import TeacherConfig, TeacherPolicy
from skillgate_core.agent.prompts import DEFAULT_PROFILE, build_messages, render_prompt_ids
from skillgate_core.envs.bench_index import load_bench_rows
from skillgate_core.envs.task_package import load_task_package
from skillgate_core.rl.grpo_config import GRPOConfig
from skillgate_core.rl.profiles import get_profile
from skillgate_core.rl.prompt_stream import PromptStream
from skillgate_core.rl.rollouts import REJECTION_DETAILS_CAP, RLTask, rollout_step, step_filter_for
from skillgate_core.rl.samples import build_samples
from skillgate_core.rl.step_metrics import rank_summary, step_metrics
from skillgate_core.skills import Slate, read_slate, slate_skills_dir


@pytest.fixture(scope="module")
def tokenizer(policy):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(policy)


@pytest.fixture(scope="module")
def tasks(tmp_path_factory, bench, tokenizer) -> list[RLTask]:
    skills_root = tmp_path_factory.mktemp("skills")
    out = []
    for row in load_bench_rows(bench, "train")[::4][:4]:
        slate = read_slate(bench / row["path"] / "skills.json")
        task = load_task_package(bench / row["path"])

        def ids(s: Slate | None, _task=task) -> tuple[int, ...]:
            return tuple(render_prompt_ids(tokenizer, build_messages(DEFAULT_PROFILE, _task.instruction, s)))

        out.append(RLTask(row["task_id"], row["family"], task, slate,
                          slate_skills_dir(bench / "skills", slate.names, skills_root / row["task_id"]),
                          ids(slate), ids(None)))
    return out


TEACHER_TURNS = 3
"""The reference teacher's episode: read the skill, act, answer (agent.policies.TeacherPolicy)."""


def _run(tasks, tokenizer, profile_name: str, *, target: int = 2, seed: int = 0, misleading: float = 0.5, **config_kw):
    # the forcing point (4 rejected groups) below the safety cap (6), as GRPOConfig requires of a forcing profile
    config = GRPOConfig(profile=profile_name, group_size=4, prompts_per_step=target, num_workers=1, max_turns=4,
                        backend="bwrap", max_rejected_groups=6, force_after_groups=4, force_after_samples=16,
                        **config_kw)
    profile = get_profile(profile_name)
    teacher = TeacherPolicy(tokenizer, TeacherConfig(misleading_rate=misleading, no_read_rate=0.0, seed=seed))
    step_filter = step_filter_for(profile, config)
    stream = PromptStream(len(tasks), seed=seed)
    groups, stats = rollout_step(tasks, stream, teacher, tokenizer, profile, config, step_filter, target_groups=target)
    return groups, stats, step_filter, stream


def test_skillgate_groups_carry_selector_credit_on_identity_tokens_only(tasks, tokenizer):
    groups, stats, step_filter, stream = _run(tasks, tokenizer, "selector_clean_oracle_action_credit")
    assert stats.episodes == 4 * len(stats.drawn) and stats.generated_tokens > 0
    assert stream.cursor == len(stats.drawn)
    assert len(groups) + step_filter.rejected_groups == len(stats.drawn)
    for group in groups:
        scores = [e.score for e in group.episodes]
        assert max(scores) > min(scores)  # the dynamic filter kept only informative groups
    samples, facts = build_samples(groups, get_profile("selector_clean_oracle_action_credit"), chunk_groups=4)
    assert len(samples) == 4 * len(groups)
    b = sum(s.mask.sum() for s in samples)
    assert facts.total_mask == b and sum(s.w_task.sum() for s in samples) == pytest.approx(b)
    assert sum(s.w_sel.sum() for s in samples) == pytest.approx(b if facts.selector_active_groups else 0.0)
    for s, e in zip(samples, [e for g in groups for e in g.episodes], strict=True):
        assert not np.any((s.w_task > 0) & (s.w_sel > 0))
        for a in e.spans.actions:
            assert all(s.w_task[i] == 0 for i in a.call_token_indices)
            name = tokenizer.decode([s.response_ids[i] for i in a.identity_token_indices])
            assert a.skill_name.startswith(name.strip()) or name.strip() in a.skill_name
        off_identity = np.ones_like(s.w_sel, dtype=bool)
        for a in e.spans.actions:
            off_identity[list(a.identity_token_indices)] = False
        assert not s.w_sel[off_identity].any()


def test_plain_profile_trains_every_masked_token_with_the_episode_advantage(tasks, tokenizer):
    groups, _, _, _ = _run(tasks, tokenizer, "mixed_task_reward")
    samples, facts = build_samples(groups, get_profile("mixed_task_reward"), chunk_groups=4)
    for s in samples:
        assert np.array_equal(s.w_task, s.mask) and not s.w_sel.any() and not s.a_sel.any()
        assert len(set(s.a_task.tolist())) == 1
    assert facts.selector_mass == 0.0
    # the credit-starvation facts: the read calls are trained with the episode's advantage
    episodes = [e for g in groups for e in g.episodes]
    advantage = {id(e): s.a_task[0] for e, s in zip(episodes, samples, strict=True)}
    actions = [(e, a) for e in episodes for a in e.spans.actions]
    assert actions and facts.read_call_tokens == sum(len(a.call_token_indices) for _, a in actions) > 0
    assert facts.identity_tokens == sum(len(a.identity_token_indices) for e, a in actions if advantage[id(e)] != 0)
    assert facts.oracle_actions == sum(a.category == "oracle" for _, a in actions) > 0
    assert facts.oracle_negative_actions == sum(a.category == "oracle" and advantage[id(e)] < 0 for e, a in actions)
    assert [r["read_call_tokens"] for r in facts.episodes] == [
        sum(len(a.call_token_indices) for a in e.spans.actions) for e in episodes]


def test_hybrid_pairs_hold_both_groups(tasks, tokenizer):
    groups, stats, _, _ = _run(tasks, tokenizer, "hybrid_slate", target=1)
    assert stats.episodes == 8 * len(stats.drawn)
    (group,) = groups  # the teacher without skills always fails: the pair still varies, so it is kept
    assert len(group.episodes) == len(group.partner) == 4
    assert all(e.with_slate for e in group.episodes) and not any(e.with_slate for e in group.partner)
    assert all(e.trajectory.slate_names == () for e in group.partner)
    samples, _ = build_samples(groups, get_profile("hybrid_slate"), chunk_groups=4)
    assert len(samples) == 8 and all(np.array_equal(s.w_task, s.mask) for s in samples)


def test_the_draw_sequence_is_a_function_of_the_seed(tasks, tokenizer):
    _, first, _, _ = _run(tasks, tokenizer, "selector_clean_oracle_action_credit", seed=3)
    _, second, _, _ = _run(tasks, tokenizer, "selector_clean_oracle_action_credit", seed=3)
    assert first.drawn == second.drawn


def _row(groups, stats, step_filter, profile_name, ranks=1):
    profile = get_profile(profile_name)
    _, facts = build_samples(groups, profile, chunk_groups=4)
    summary = rank_summary(groups=groups, rollout=stats, facts=facts, filter_counts=step_filter.counts(), losses=[],
                           timer={})
    return step_metrics(step=0, summaries=[summary] * ranks, normaliser=facts.total_mask, profile=profile)


def test_a_step_that_cannot_fill_gives_up_after_its_budget_and_says_what_the_policy_did(tasks, tokenizer):
    # No noise: the teacher always reads the oracle and always succeeds -> every group has zero
    # variance; a two-stream profile never forces, so the worker gives up after its budget.
    groups, stats, step_filter, _ = _run(tasks, tokenizer, "selector_clean_oracle_action_credit", misleading=0.0)
    assert groups == [] and stats.gave_up
    assert step_filter.counts()["zero_variance"] == 6
    # the row: the policy succeeded and read the oracle cleanly in every episode it played, though nothing
    # was accepted (the accepted-only rates have no episode: None, not 0), and why each group went
    row = _row(groups, stats, step_filter, "selector_clean_oracle_action_credit")
    assert row["episodes_played"] == 24 and row["episodes"] == 0 and row["metrics_schema"] == 2
    assert row["success_rate"] == row["reward"] == row["oracle_read_rate"] == row["clean_oracle_rate"] == 1.0
    assert row["misleading_read_rate"] == 0.0
    # the teacher's episodes: read the skill, act, answer (no turn cut at max_new_tokens)
    assert (row["turns_mean"], row["final_answer_rate"], row["length_cut_rate"]) == (TEACHER_TURNS, 1.0, 0.0)
    assert row["accepted_success_rate"] is None and row["accepted_clean_oracle_rate"] is None
    assert (row["groups_drawn"], row["groups_accepted"], row["groups_rejected"]) == (6, 0, 6)
    assert (row["zero_variance_all_pass"], row["zero_variance_all_fail"]) == (6, 0)
    assert row["rejected"]["zero_variance"] == 6 and row["workers_gave_up"] == 1
    assert [d["task_id"] for d in row["rejection_details"]] == stats.drawn
    assert {(d["reason"], d["detail"]) for d in row["rejection_details"]} == {
        ("zero_variance", "all scores equal: [1.0, 1.0, 1.0, 1.0]")}
    assert not row["optimizer_step_taken"] and row["grad_norm"] is None and row["learning_rate"] is None
    # env split by phase: every phase took time (24 sandboxes started, 3 turns of tool calls, 24 verified), and
    # the phases lie inside env_s (the rest is the episode loop's bookkeeping)
    phases = [row[f"time_env_{p}_s"] for p in ("start", "tools", "verify")]
    assert all(p > 0 for p in phases) and sum(phases) <= row["time_env_s"] + 1e-6
    assert sorted(stats.env_phases) == ["start", "tools", "verify"]
    # over several ranks the details stay bounded; the counts keep every rejection
    row3 = _row(groups, stats, step_filter, "selector_clean_oracle_action_credit", ranks=3)
    assert len(row3["rejection_details"]) == REJECTION_DETAILS_CAP < 18 == row3["groups_rejected"]
    # the premise (docs/method.md 8b) of the 24 episodes nothing was trained on: every oracle read clean and
    # resolved, so outcome and selection never disagree; each rank's tallies add up, the shares stay
    assert (row["premise/episodes"], row["premise/oracle_read_episodes"], row["premise/p1_disagreement"]) == (24, 24, 0)
    assert (row["premise/multi_read_rate"], row["premise/recovery_candidates"]) == (0.0, 0)
    assert row["premise/turns_mean"] == TEACHER_TURNS and 0 < row["premise/name_token_share"] < 1
    assert row3["premise/episodes"] == 72 and row3["premise/name_token_share"] == row["premise/name_token_share"]


def test_behaviour_is_reported_over_every_group_drawn_and_over_the_accepted_ones_apart(tasks, tokenizer):
    groups, stats, step_filter, _ = _run(tasks, tokenizer, "selector_clean_oracle_action_credit", seed=1)
    row = _row(groups, stats, step_filter, "selector_clean_oracle_action_credit")
    assert step_filter.rejected_groups > 0  # this seed draws rejected groups: the two figures differ in what they cover
    assert row["episodes_played"] == 4 * len(stats.drawn) == 4 * row["groups_drawn"] == stats.played["episodes"]
    assert (row["groups_accepted"], row["episodes"]) == (len(groups), 4 * len(groups))
    accepted = [e for g in groups for e in g.episodes]
    assert row["accepted_success_rate"] == pytest.approx(sum(e.trajectory.score >= 1 for e in accepted) / len(accepted))
    assert row["success_rate"] == pytest.approx(stats.played["successes"] / row["episodes_played"])
    assert stats.played["successes"] >= sum(e.trajectory.score >= 1 for e in accepted)
    assert row["zero_variance_all_pass"] + row["zero_variance_all_fail"] == row["rejected"]["zero_variance"]


def test_the_premise_is_measured_over_every_group_drawn_whatever_the_credit_design(tasks, tokenizer):
    groups, stats, step_filter, _ = _run(tasks, tokenizer, "selector_clean_oracle_action_credit", seed=1)
    row = _row(groups, stats, step_filter, "selector_clean_oracle_action_credit")
    assert step_filter.rejected_groups > 0 and row["premise/episodes"] == row["episodes_played"] > row["episodes"]
    # the noisy teacher reads one skill: the oracle (clean, resolves) or a lookalike (fails, never recovers)
    readers = row["premise/oracle_read_episodes"]
    assert readers == round(row["oracle_read_rate"] * row["episodes_played"]) > 0
    assert (row["premise/p1_disagreement"], row["premise/multi_read_episodes"], row["premise/recovered"]) == (0, 0, 0)
    assert row["premise/recovery_candidates"] == row["episodes_played"] - readers and row["premise/recovery_rate"] == 0
    # the same draws under the labelled first-mention variant: its credit moves, the premise does not
    g2, s2, f2, _ = _run(tasks, tokenizer, "selector_clean_oracle_action_credit", seed=1, identity_first_mention=True)
    moved = _row(g2, s2, f2, "selector_clean_oracle_action_credit")
    assert {k: v for k, v in moved.items() if k.startswith("premise/")} == {
        k: v for k, v in row.items() if k.startswith("premise/")}


def test_rl_tasks_refuse_a_table_rendered_with_another_tokenizer(tmp_path, bench, policy, tiny_model_dir):
    from skillgate_core.rl.data_prep import RLDataPrepConfig, prepare_rl_data
    from skillgate_core.rl.rl_tasks import RLTasksError, load_rl_tasks

    prepare_rl_data(RLDataPrepConfig(max_tasks=2), {"bench": bench, "sft_model": policy}, tmp_path / "rl")
    tasks = load_rl_tasks(tmp_path / "rl", bench, tmp_path / "scratch", policy_dir=policy)
    assert len(tasks) == 2 and tasks[0].prompt_ids
    with pytest.raises(RLTasksError, match="tokenizer"):
        load_rl_tasks(tmp_path / "rl", bench, tmp_path / "scratch2", policy_dir=tiny_model_dir)


def test_a_local_policy_step_reports_what_its_turn_cache_prefilled_and_reused(tasks, tokenizer, policy):
    """The static sampler with the turn cache (SamplingConfig.reuse_kv, the default): each group's 4 episodes
    share their prompt, so it is prefilled once and copied 3 times; the step's row says so. The teacher's
    row has no turn cache (None)."""
    from skillgate_core.agent.policies import LocalPolicy
    from skillgate_core.policy.local_sampler import SamplingConfig, load_policy

    model, tok = load_policy(policy)
    config = GRPOConfig(profile="mixed_task_reward", group_size=4, prompts_per_step=1, num_workers=1, max_turns=2,
                        max_new_tokens=8, backend="bwrap", max_rejected_groups=2, force_after_groups=1,
                        force_after_samples=4)
    profile = get_profile("mixed_task_reward")
    local = LocalPolicy(model, tok, SamplingConfig(max_new_tokens=8, seed=1, sampler="static"))
    step_filter = step_filter_for(profile, config)
    groups, stats = rollout_step(tasks, PromptStream(len(tasks), seed=0), local, tokenizer, profile, config,
                                 step_filter, target_groups=1)
    prompts = [len(next(t for t in tasks if t.task_id == drawn).prompt_ids) for drawn in stats.drawn]
    assert stats.prefill["shared_tokens"] == 3 * sum(prompts) and stats.prefill["fallbacks"] == 0
    assert stats.prefill["prefilled_tokens"] >= sum(prompts)
    assert stats.prefill["reused_tokens"] == local.cache_counters()["reused_tokens"]  # the sampler's first step
    row = _row(groups, stats, step_filter, "mixed_task_reward")
    assert row["prefill_shared_tokens"] == 3 * sum(prompts) and row["prefill_tokens"] == stats.prefill["prefilled_tokens"]
    _, teacher_stats, teacher_filter, _ = _run(tasks, tokenizer, "mixed_task_reward")
    assert teacher_stats.prefill == {}
    assert _row([], teacher_stats, teacher_filter, "mixed_task_reward")["prefill_tokens"] is None


@pytest.mark.parametrize("profile_name", ["selector_clean_oracle_action_credit", "mixed_task_reward"])
def test_drawing_ahead_accepts_and_rejects_what_one_group_a_draw_would(tasks, tokenizer, profile_name):
    """draw_ahead plays more groups a round; judged in draw order, the step accepts and rejects the same
    groups as draw_ahead 1 (the teacher's episodes depend only on task and repeat), discards the rest unjudged
    and hands their prompts back, so the next draws continue where the judged ones stopped."""
    outcomes = {}
    for ahead in (1.0, 3.0):
        config = GRPOConfig(profile=profile_name, group_size=4, prompts_per_step=2, num_workers=1, max_turns=4,
                            backend="bwrap", max_rejected_groups=6, force_after_groups=4, force_after_samples=16,
                            draw_ahead=ahead)
        profile = get_profile(profile_name)
        teacher = TeacherPolicy(tokenizer, TeacherConfig(misleading_rate=0.5, no_read_rate=0.0, seed=1))
        step_filter = step_filter_for(profile, config)
        stream = PromptStream(len(tasks), seed=1)
        groups, stats = rollout_step(tasks, stream, teacher, tokenizer, profile, config, step_filter, target_groups=2)
        row = _row(groups, stats, step_filter, profile_name)
        outcomes[ahead] = (groups, stats, step_filter.counts(), stream, row)
    (one, one_stats, one_counts, one_stream, one_row), (many, stats, counts, stream, row) = outcomes[1.0], outcomes[3.0]
    assert [g.task.task_id for g in many] == [g.task.task_id for g in one] and len(many) == 2
    assert stats.drawn == one_stats.drawn and counts == one_counts
    assert stats.episodes == one_stats.episodes == 4 * len(stats.drawn)
    assert stream.cursor == one_stream.cursor == len(stats.drawn)  # the unjudged prompts went back
    assert stream.next() == one_stream.next()  # the next step draws what the sequential rule would
    # the first round played 3 x 2 groups: whatever was not judged is counted as discarded, never as drawn
    assert stats.discarded_groups == 6 - len(stats.drawn) > 0 and one_stats.discarded_groups == 0
    assert one_counts.get("zero_variance", 0) > 0  # this seed rejects groups: draw_ahead 1 needed more rounds
    assert stats.discarded_episodes == 4 * stats.discarded_groups
    assert (row["groups_drawn"], row["groups_discarded"], row["episodes_discarded"]) == (
        len(stats.drawn), stats.discarded_groups, stats.discarded_episodes)
    assert row["episodes_played"] == one_row["episodes_played"]


def test_a_stream_gives_back_its_last_draws_in_order():
    stream = PromptStream(5, seed=2)
    first = [stream.next() for _ in range(7)]
    stream.give_back(3)
    assert [stream.next() for _ in range(3)] == first[4:] and stream.cursor == 7
    with pytest.raises(ValueError, match="give_back"):
        stream.give_back(8)


def test_the_sandbox_overlap_switch_reaches_the_episodes_and_changes_no_episode(tasks, tokenizer, monkeypatch):
    """grpo.overlap_sandbox (docs/gpu.md 5's A/B) is the episode loop's overlap_sandbox: on, sandboxes start
    during the first turn and ended episodes are verified while others play; off, the lockstep loop. The same
    groups, turns, scores and verdicts either way (the teacher's episodes depend only on task and repeat)."""
    from skillgate_core.rl import rollouts

    seen: list[bool] = []
    real = rollouts.run_episodes

    def spy(*args, **kwargs):  # the real episode loop, recording the switch it was given
        seen.append(args[3].overlap_sandbox)
        return real(*args, **kwargs)

    monkeypatch.setattr(rollouts, "run_episodes", spy)
    played = {}
    for overlap in (True, False):
        config = GRPOConfig(profile="selector_clean_oracle_action_credit", group_size=4, prompts_per_step=2,
                            num_workers=1, max_turns=4, backend="bwrap", max_rejected_groups=6,
                            force_after_groups=4, force_after_samples=16, overlap_sandbox=overlap)
        profile = get_profile(config.profile)
        teacher = TeacherPolicy(tokenizer, TeacherConfig(misleading_rate=0.5, no_read_rate=0.0, seed=2))
        groups, stats = rollout_step(tasks, PromptStream(len(tasks), seed=2), teacher, tokenizer, profile, config,
                                     step_filter_for(profile, config), target_groups=2)
        played[overlap] = ([g.task.task_id for g in groups], stats.drawn,
                           [[(e.trajectory.status, e.score, len(e.trajectory.turns)) for e in g.episodes]
                            for g in groups], [g.verdict for g in groups])
        assert seen and set(seen) == {overlap}
        seen.clear()
    assert played[True] == played[False]
    assert GRPOConfig().overlap_sandbox is True

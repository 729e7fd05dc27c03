"""The episode loop and the collect stage on real bench tasks, sandboxes and verifiers."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from skillgate_core.agent.collect import CollectConfig
from skillgate_core.agent.episode import EpisodeConfig, EpisodeSpec, run_episodes
from skillgate_core.agent.policies import LocalPolicy, TeacherConfig, TeacherPolicy
from skillgate_core.base.paths import state_layout
from skillgate_core.envs.bench_index import load_bench_rows
from skillgate_core.envs.task_package import load_task_package
from skillgate_core.pipeline.run import run_stage
from skillgate_core.policy.local_sampler import SamplingConfig, load_policy
from skillgate_core.skills import read_slate, slate_skills_dir


@pytest.fixture(scope="module")
def model_dir(tiny_model_dir) -> Path:
    return tiny_model_dir


@pytest.fixture(scope="module")
def specs(bench, tmp_path_factory):
    skills_root = tmp_path_factory.mktemp("skills")
    out = []
    for row in load_bench_rows(bench, "train")[::4][:4]:  # one task per family
        slate = read_slate(bench / row["path"] / "skills.json")
        out.append(EpisodeSpec(load_task_package(bench / row["path"]), slate,
                               slate_skills_dir(bench / "skills", slate.names, skills_root / row["task_id"]), bench=row["family"]))
    return out


def test_teacher_reading_the_oracle_resolves_with_exact_token_streams(specs, model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    trajs = run_episodes(specs, TeacherPolicy(tok), tok, EpisodeConfig(max_turns=6, backend="bwrap"))
    assert {t.bench for t in trajs} == {"procedural", "diagnosis", "constraints", "planning"}
    for t in trajs:
        assert (t.status, t.score) == ("completed", 1.0), (t.task_id, t.verifier_detail)
        assert len(t.response_ids) == len(t.loss_mask) == len(t.logprobs)
        assert [turn.calls[0][0] for turn in t.turns if turn.calls] == ["read", "exec"]
        # Nothing re-tokenized: the id stream decodes to exactly the chat-template rendering.
        rendered = tok.apply_chat_template(list(t.messages), tokenize=False)
        assert tok.decode(list(t.prompt_ids) + list(t.response_ids)) + "\n" == rendered
        sampled = [i for i, m in zip(t.response_ids, t.loss_mask, strict=True) if m]
        assert tok.decode(sampled) == "<|im_end|>".join(turn.text for turn in t.turns) + "<|im_end|>"
        assert all(math.isnan(x) for x in t.logprobs)  # a teacher has no log-probs


def test_noisy_teacher_reading_a_lookalike_fails_and_spans_say_so(specs, model_dir):
    from transformers import AutoTokenizer

    from skillgate_core.agent.trajectory import span_report

    tok = AutoTokenizer.from_pretrained(model_dir)
    trajs = run_episodes(specs[:2], TeacherPolicy(tok, TeacherConfig(misleading_rate=1.0)), tok,
                         EpisodeConfig(max_turns=6, backend="bwrap"))
    for t in trajs:
        assert t.score == 0.0 and t.status == "completed"
        spans = span_report(t, tok)
        assert spans["reads"] == ["misleading"] and spans["span_mismatch"] == 0
        (action,) = spans["actions"]
        ident = tok.decode([t.response_ids[i] for i in action["identity_token_indices"]])
        assert action["skill_name"] in {n for n, c in zip(t.slate_names, t.slate_categories, strict=True)
                                       if c == "misleading"} and ident.strip() in action["skill_name"] + "/"


def test_turn_limit_truncates_but_still_grades_and_bad_sandbox_aborts(specs, model_dir, tmp_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    broken = EpisodeSpec(specs[0].task, specs[0].slate, tmp_path / "no-such-skills-dir")
    cut, aborted = run_episodes([specs[0], broken], TeacherPolicy(tok), tok, EpisodeConfig(max_turns=1, backend="bwrap"))
    assert cut.status == "truncated" and cut.score == 0.0 and cut.verifier_detail.startswith("reward.txt")
    assert aborted.status == "aborted" and "skills_dir" in aborted.verifier_detail and not aborted.turns


def test_local_policy_keeps_sampled_logprobs(specs, model_dir):
    model, tok = load_policy(model_dir)
    policy = LocalPolicy(model, tok, SamplingConfig(max_new_tokens=12, seed=4))
    (t,) = run_episodes(specs[:1], policy, tok, EpisodeConfig(max_turns=2, max_new_tokens=12, backend="bwrap"))
    assert t.status in {"completed", "truncated"} and t.policy == "local"
    for m, lp in zip(t.loss_mask, t.logprobs, strict=True):
        assert (m == 1 and math.isfinite(lp) and lp <= 0) or (m == 0 and math.isnan(lp))


def test_collect_stage_writes_trajectories_with_spans(bench, model_dir, skillgate_home):
    import polars as pl

    record = run_stage("collect", CollectConfig(max_tasks=4, repeats=2, misleading_rate=0.5),
                       {"bench": bench, "base_model": model_dir}, state_layout())
    df = pl.read_parquet(Path(record.outputs["trajectories"]) / "trajectories.parquet")
    assert df.height == 8 and record.metrics["episodes"] == 8
    assert set(df["status"]) == {"completed"} and record.metrics["span_mismatches"] == 0
    for row in df.iter_rows(named=True):
        expected = 1.0 if row["reads"] == ["oracle"] else 0.0
        assert row["score"] == expected, (row["task_id"], row["reads"])
    assert {"prompt_ids", "response_ids", "loss_mask", "logprobs", "spans", "turns"} <= set(df.columns)

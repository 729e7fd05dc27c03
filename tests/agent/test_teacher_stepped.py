"""The reference teacher on stepped procedures (bench-build procedure_steps): it states the evidence
before naming the skill, carries out every step with the work order and the printed tickets, and, at
its recovery rate, reads a lookalike, says what in it contradicts the instruction and reads the oracle; and the
premise numbers of those episodes (docs/method.md 8b), through collect too. Real bubblewrap sandboxes, the task's
own verifier, exact token streams."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillgate_core.agent.episode import EpisodeConfig, EpisodeSpec, run_episodes
from skillgate_core.agent.policies import (
    TeacherConfig,
    TeacherPolicy,
    contradiction,
    first_read_turn,
    selection_reasoning,
    task_cue,
)
from skillgate_core.agent.premise_facts import row_premise, trajectory_premise
from skillgate_core.agent.trajectory import span_report, trajectory_span_report
from skillgate_core.credit.premise import summarize_premise
from skillgate_core.envs.bench_index import load_bench_rows
from skillgate_core.envs.task_package import load_task_package
from skillgate_core.skills import read_slate, slate_skills_dir

pytestmark = pytest.mark.usefixtures("bwrap_ready")
STEPS = 3


@pytest.fixture(scope="module")
def stepped_bench(tmp_path_factory) -> Path:
    from skillgate_core.benchgen import BenchBuildConfig, build_suite

    out = tmp_path_factory.mktemp("stepped-bench") / "bench"
    build_suite(BenchBuildConfig(seed=3, domains=("scheduling",), train_skills_per_cell=1, train_tasks_per_skill=1,
                                 eval_tasks=0, slate_tasks=0, procedure_steps=STEPS), out)
    return out


@pytest.fixture(scope="module")
def specs(stepped_bench, tmp_path_factory):
    root = tmp_path_factory.mktemp("skills")
    out = []
    for row in load_bench_rows(stepped_bench, "train"):  # one task per family
        slate = read_slate(stepped_bench / row["path"] / "skills.json")
        out.append(EpisodeSpec(load_task_package(stepped_bench / row["path"]), slate,
                               slate_skills_dir(stepped_bench / "skills", slate.names, root / row["task_id"]),
                               bench=row["family"]))
    return out


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def test_the_teacher_states_the_evidence_and_carries_out_every_step(specs, tok):
    trajs = run_episodes(specs, TeacherPolicy(tok), tok, EpisodeConfig(max_turns=STEPS + 3, backend="bwrap"))
    assert len(trajs) == 4
    for t, spec in zip(trajs, specs, strict=True):
        assert (t.status, t.score) == ("completed", 1.0), (t.task_id, t.verifier_detail)
        assert [turn.calls[0][0] for turn in t.turns if turn.calls] == ["read"] + ["exec"] * STEPS
        cue = task_cue(spec.task)
        first = t.turns[0].text
        assert first.index(f"revision {cue['revision']}") < first.index(cue["output"]) < first.index(spec.slate.oracle)
        assert cue["consumer"] in first and cue["scope"] in first
        commands = [json.loads(turn.calls[0][1])["command"] for turn in t.turns[1:1 + STEPS]]
        assert "WO-" in commands[0] and all("TICKET" not in c and "WORK_ORDER" not in c for c in commands)
        spans = span_report(t, tok)
        assert spans["reads"] == ["oracle"] and spans["span_mismatch"] == 0


def test_the_recovering_teacher_names_the_contradiction_then_reads_the_oracle(specs, tok):
    trajs = run_episodes(specs, TeacherPolicy(tok, TeacherConfig(recovery_rate=1.0)), tok,
                         EpisodeConfig(max_turns=STEPS + 4, backend="bwrap"))
    for t, spec in zip(trajs, specs, strict=True):
        assert (t.status, t.score) == ("completed", 1.0), (t.task_id, t.verifier_detail)
        assert span_report(t, tok)["reads"] == ["misleading", "oracle"]
        recovery = t.turns[1].text
        wrong = json.loads(t.turns[0].calls[0][1])["path"].split("/")[2]
        assert recovery.startswith(f"<skill_reasoning>{wrong}'s SKILL.md ") and spec.slate.oracle in recovery
        body = (spec.skills_dir / wrong / "SKILL.md").read_text()
        assert contradiction(body, task_cue(spec.task)) in recovery
        assert "does not match the task's revision" not in recovery, "a bundled lookalike has a contradiction"


def test_a_misleading_read_followed_perfectly_still_fails(specs, tok):
    trajs = run_episodes(specs[:2], TeacherPolicy(tok, TeacherConfig(misleading_rate=1.0)), tok,
                         EpisodeConfig(max_turns=STEPS + 3, backend="bwrap"))
    for t in trajs:
        assert t.score == 0.0 and t.status == "completed"
        assert [turn.calls[0][0] for turn in t.turns if turn.calls] == ["read"] + ["exec"] * STEPS


def test_evidence_is_the_same_text_before_every_candidate_name():
    cue = {"revision": 7, "consumer": "month-end close", "scope": "the batches in data/incoming/",
           "output": "export/ledger.dat"}
    a, b = first_read_turn("kestrel-ledger-feed", cue=cue), first_read_turn("kestrel-ledger-export", cue=cue)
    cut = a.index("kestrel")
    assert a[:cut] == b[:cut] and "revision 7" in a[:cut]
    assert selection_reasoning("x", None) == "The skill x describes this exact procedure, so I read it first."
    assert first_read_turn("x", cue=None) == first_read_turn("x")
    with pytest.raises(ValueError, match="sum to at most 1"):
        TeacherConfig(misleading_rate=0.5, recovery_rate=0.6)


def test_the_premise_of_the_teacher_that_reads_the_oracle_and_resolves(specs, tok):
    """docs/method.md 8b on the stepped episodes: every oracle read is clean and resolves, so P1 is 0; nothing to
    recover; the choosing tokens are a small share of an episode of K + 2 turns."""
    trajs = run_episodes(specs, TeacherPolicy(tok), tok, EpisodeConfig(max_turns=STEPS + 3, backend="bwrap"))
    facts = [trajectory_premise(t, tok) for t in trajs]
    n = summarize_premise(facts)
    assert (n["episodes"], n["oracle_read_episodes"], n["p1_disagreement"], n["p1_disagreement_share"]) == (4, 4, 0, 0)
    assert (n["multi_read_rate"], n["recovery_candidates"], n["recovery_rate"]) == (0, 0, None)
    assert n["turns_mean"] == STEPS + 2 and n["token_episodes"] == 4
    assert n["sampled_tokens"] == sum(sum(t.loss_mask) for t in trajs)
    for t, f in zip(trajs, facts, strict=True):
        # the name and call tokens are the span detection's; the reasoning tokens decode to the whole reasoning
        (action,) = trajectory_span_report(t, tok).actions
        assert (f.name_tokens, f.call_tokens) == (len(action.identity_token_indices), len(action.call_token_indices))
        first = t.turns[0]
        ids = t.response_ids[first.token_start:first.token_start + f.reasoning_tokens]
        reasoning = first.text[:first.text.index("</skill_reasoning>") + len("</skill_reasoning>")]
        assert tok.decode(list(ids)) == reasoning  # only turn 0 reasons, and its reasoning opens the turn
    assert 0 < n["name_token_share"] < n["call_token_share"] < n["reasoning_token_share"] < 1


def test_collect_reports_the_premise_of_the_recovering_teacher(stepped_bench, tiny_model_dir, tmp_path):
    """recovery_rate 1: every episode reads a lookalike, then the oracle, and resolves without a clean read: P1 =
    1, multi-read 1, recovery 1 and every recovery resolved; in summary.json, the stage metrics and each row."""
    import polars as pl

    from skillgate_core.agent.collect import CollectConfig, collect_trajectories

    out = collect_trajectories(CollectConfig(max_tasks=0, misleading_rate=0.0, recovery_rate=1.0, max_turns=STEPS + 4),
                               {"bench": stepped_bench, "base_model": tiny_model_dir}, tmp_path / "collect")
    folder = out.outputs["trajectories"]
    premise = json.loads((folder / "summary.json").read_text())["premise"]
    assert (premise["episodes"], premise["oracle_read_episodes"], premise["p1_unclean_resolved"]) == (4, 4, 4)
    assert (premise["p1_disagreement_share"], premise["p1_clean_failed"], premise["multi_read_rate"]) == (1.0, 0, 1.0)
    assert (premise["recovery_candidates"], premise["recovery_rate"], premise["recovery_success_rate"]) == (4, 1.0, 1.0)
    assert premise["turns_mean"] == STEPS + 3 and premise["reasoning_tokens"] > premise["call_tokens"] > 0
    assert {k: out.metrics[f"premise/{k}"] for k in premise} == premise and "premise" not in out.metrics
    rows = pl.read_parquet(folder / "trajectories.parquet").to_dicts()
    assert summarize_premise(row_premise(r) for r in rows) == premise

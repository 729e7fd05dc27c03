"""One episode's premise facts (agent/premise_facts.py) from a hand-built Trajectory whose every count is known,
and from the trajectories row it becomes, with and without its `premise` column."""

from __future__ import annotations

import json

import pytest
from support.scripted_policy import tiny_tokenizer

from skillgate_core.agent.premise_facts import (
    PREMISE_COLUMN,
    row_premise,
    trajectory_premise,
    trajectory_token_counts,
)
from skillgate_core.agent.trajectory import Trajectory, TurnRecord, span_record, trajectory_span_report
from skillgate_core.credit.actions import SkillOpen

SLATE = (("oracle-x", "oracle"), ("misl-a", "misleading"), ("rel-b", "relevant"))
OBSERVATION = 7
"""Context tokens (loss mask 0) after each turn that called a tool."""


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


def _ids(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


def _read_turn(tok, reasoning: str, skill: str) -> tuple[str, list[int], tuple[str, str], dict[str, int]]:
    """(text, ids, dispatched call, token count per piece): sampled as pieces, so each piece boundary is a
    token boundary (tests/credit/test_premise.py says why)."""
    args = {"path": f"/skills/{skill}/SKILL.md"}
    call = "<tool_call>" + json.dumps({"name": "read", "arguments": args}) + "</tool_call>"
    head, tail = call.split(skill)
    pieces = [_ids(tok, reasoning), _ids(tok, "\n"), _ids(tok, head), _ids(tok, skill), _ids(tok, tail),
              _ids(tok, "<|im_end|>")]
    counts = dict(zip(("reasoning", "newline", "head", "name", "tail", "end"), map(len, pieces), strict=True))
    return reasoning + "\n" + call, [i for p in pieces for i in p], ("read", json.dumps(args)), counts


def _trajectory(tok, *, score: float, status: str = "completed") -> tuple[Trajectory, list[dict[str, int]]]:
    """Read a lookalike (with reasoning), read the oracle (with reasoning), answer: a recovery."""
    response: list[int] = []
    mask: list[int] = []
    turns, counts = [], []
    for reasoning, skill in (("<skill_reasoning>misl-a fits.</skill_reasoning>", "misl-a"),
                             ("<skill_reasoning>It contradicts; oracle-x fits.</skill_reasoning>", "oracle-x")):
        text, ids, call, c = _read_turn(tok, reasoning, skill)
        turns.append(TurnRecord(text, len(response), len(response) + len(ids), "stop", (call,)))
        response += ids + [0] * OBSERVATION
        mask += [1] * len(ids) + [0] * OBSERVATION
        counts.append(c)
    final = _ids(tok, "Done.<|im_end|>")
    turns.append(TurnRecord("Done.", len(response), len(response) + len(final), "stop", ()))
    response += final
    mask += [1] * len(final)
    traj = Trajectory(
        task_id="t0", bench="procedural", repeat=0, policy="hand", prompt_profile="openclaw-v1",
        slate_names=tuple(n for n, _ in SLATE), slate_categories=tuple(c for _, c in SLATE), gold="oracle-x",
        messages=(), prompt_ids=(1, 2, 3), response_ids=tuple(response), loss_mask=tuple(mask),
        logprobs=tuple(float("nan") for _ in response), turns=tuple(turns), status=status, score=score,
        raw_score=score, missing_reward=False, verifier_detail="", backend="bwrap", duration_s=1.0,
        skill_opens=(SkillOpen("misl-a", 0, 0), SkillOpen("oracle-x", 1, 0)))
    return traj, counts


def test_a_recovery_that_resolved_is_known_token_by_token(tok):
    traj, (a, b) = _trajectory(tok, score=1.0)
    facts = trajectory_premise(traj, tok)
    assert (facts.oracle_read, facts.clean, facts.resolved, facts.first_read, facts.distinct_reads, facts.turns) == (
        True, False, True, "misleading", 2, 3)
    assert facts.sampled_tokens == sum(traj.loss_mask)
    assert facts.name_tokens == a["name"] + b["name"]
    assert facts.call_tokens == sum(c["head"] + c["name"] + c["tail"] + c["end"] for c in (a, b))
    assert facts.reasoning_tokens == a["reasoning"] + b["reasoning"]
    assert trajectory_token_counts(traj, tok) == (facts.sampled_tokens, facts.name_tokens, facts.call_tokens,
                                                  facts.reasoning_tokens)
    # the caller's stricter cleanness is taken as given; an aborted episode is flagged for the summary to drop
    assert not trajectory_premise(traj, tok, clean=False).clean
    assert trajectory_premise(_trajectory(tok, score=0.0, status="aborted")[0], tok).aborted


def test_the_labelled_first_mention_variant_does_not_move_the_name_tokens(tok):
    traj, _ = _trajectory(tok, score=1.0)
    moved = trajectory_span_report(traj, tok, first_mention=True)
    # the variant's identity tokens lie in the reasoning; the premise takes the method's own rule when given none
    assert any(a.first_mention for a in moved.actions)
    assert trajectory_premise(traj, tok) == trajectory_premise(traj, tok, trajectory_span_report(traj, tok))


def test_a_trajectories_row_keeps_its_facts_and_an_older_row_gets_all_but_the_reasoning(tok):
    traj, _ = _trajectory(tok, score=1.0)
    facts = trajectory_premise(traj, tok)
    row = traj.to_row()
    row.update(spans=json.dumps(span_record(trajectory_span_report(traj, tok))),
               **{PREMISE_COLUMN: json.dumps(facts.as_record())})
    assert row_premise(row) == facts
    del row[PREMISE_COLUMN]  # a row collected before the column existed
    older = row_premise(row)
    assert older.reasoning_tokens is None and not older.tokens_measured
    assert (older.oracle_read, older.clean, older.first_read, older.sampled_tokens, older.name_tokens,
            older.call_tokens) == (True, False, "misleading", facts.sampled_tokens, facts.name_tokens,
                                   facts.call_tokens)


def test_ids_an_endpoint_counted_by_usage_are_not_measured(tok):
    from dataclasses import replace

    from skillgate_core.agent.openai_policy import USAGE_COUNTS, USAGE_ID

    traj, _ = _trajectory(tok, score=1.0)
    assert trajectory_token_counts(traj, USAGE_COUNTS) is None
    assert trajectory_token_counts(replace(traj, response_ids=(USAGE_ID,) * len(traj.response_ids)), tok) is None


def test_consulting_another_skills_files_makes_an_oracle_read_unclean(tok):
    """docs/reads.md, consultation: one oracle read, but a lookalike's script was run first: not clean, so a
    resolved episode disagrees with a clean read (P1), in the facts and in the row derived without them."""
    from dataclasses import replace

    traj, _ = _trajectory(tok, score=1.0)
    only_oracle = replace(traj, skill_opens=(SkillOpen("oracle-x", 1, 0),),
                          skill_consults=(SkillOpen("misl-a", 0, 0), SkillOpen("oracle-x", 1, 0)))
    facts = trajectory_premise(only_oracle, tok)
    assert (facts.oracle_read, facts.distinct_reads, facts.first_read, facts.clean) == (True, 1, "oracle", False)
    assert trajectory_premise(replace(only_oracle, skill_consults=None), tok).clean  # consultation not observed
    row = only_oracle.to_row()
    row["spans"] = json.dumps(span_record(trajectory_span_report(only_oracle, tok)))
    assert not row_premise(row).clean

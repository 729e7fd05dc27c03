"""The premise checks (docs/method.md 8b; skillgate_core/credit/premise.py): hand-built episodes whose every
number is known, and token counts on a real byte-level BPE tokenizer's offsets."""

from __future__ import annotations

import json

import pytest

from skillgate_core.credit.premise import (
    PremiseEpisode,
    prefixed,
    premise_episode,
    premise_numbers,
    premise_tally,
    reasoning_token_indices,
    summarize_premise,
    token_counts,
)
from skillgate_core.credit.spans import AssistantTurn, detect_selection_spans
from skillgate_core.policy.corpus import build_corpus
from skillgate_core.policy.tiny_model import TinyModelConfig, train_tokenizer

SLATE = {"oracle-x": "oracle", "misl-a": "misleading", "rel-b": "relevant"}
NAMES = {"oracle": "oracle-x", "misleading": "misl-a", "relevant": "rel-b"}


def ep(reads: list[str], resolved: bool, **kw) -> PremiseEpisode:
    return premise_episode(reads, [NAMES[c] for c in reads], resolved=resolved, turns=kw.pop("turns", 3), **kw)


# (reads, resolved, extra): what each episode is, and why it is here
EPISODES = [
    (["oracle"], True, {}),                       # clean and resolved: agrees
    (["oracle"], False, {}),                      # clean, failed: disagrees
    (["misleading", "oracle"], True, {}),         # resolved without a clean read: disagrees; a recovery that resolved
    (["misleading", "oracle"], False, {}),        # unclean and failed: agrees; a recovery that failed
    (["misleading"], False, {}),                  # first read not the oracle, never read it: no recovery
    ([], True, {}),                               # read nothing: neither an oracle reader nor a recovery candidate
    (["oracle", "oracle"], True, {}),             # one distinct skill, the oracle: clean, agrees, not multi-read
    (["oracle", "misleading"], True, {}),         # first read the oracle: no candidate; unclean resolved: disagrees
    (["oracle"], True, {"aborted": True}),        # an infrastructure failure: in no number
    (["relevant"], True, {}),                     # a recovery candidate that never read the oracle
    (["oracle"], True, {"clean": False}),         # the caller's stricter rule (another skill's files used): disagrees
]


def test_every_number_of_a_hand_built_set():
    facts = [ep(r, ok, **kw) for r, ok, kw in EPISODES]
    n = summarize_premise(facts)
    assert (n["episodes"], n["episodes_aborted"], n["oracle_read_episodes"]) == (10, 1, 7)
    # P1: resolved XOR clean among the 7 oracle readers, with its parts
    assert (n["p1_disagreement"], n["p1_clean_failed"], n["p1_unclean_resolved"], n["p1_oracle_read_failed"]) == (
        4, 1, 3, 2)
    assert n["p1_disagreement_share"] == pytest.approx(4 / 7)
    assert n["p1_clean_failed_share"] == pytest.approx(1 / 7)
    assert n["p1_unclean_resolved_share"] == pytest.approx(3 / 7)
    assert n["p1_oracle_read_failed_share"] == pytest.approx(2 / 7)
    # reads: multi-read over the 10 played episodes; recovery over the 4 whose first read is not the oracle
    assert (n["multi_read_episodes"], n["multi_read_rate"]) == (3, pytest.approx(0.3))
    assert (n["recovery_candidates"], n["recovered"], n["recovered_resolved"]) == (4, 2, 1)
    assert (n["recovery_rate"], n["recovery_success_rate"]) == (0.5, 0.5)
    assert n["turns_mean"] == 3.0
    # no token counts measured: P2 has no denominator, and says so with None
    assert (n["token_episodes"], n["sampled_tokens"], n["name_token_share"], n["sampled_tokens_mean"]) == (
        0, 0, None, None)
    json.dumps(n)  # JSON-able as it is


def test_token_shares_pool_the_measured_episodes_and_skip_the_rest():
    facts = [ep(["oracle"], True, sampled_tokens=100, name_tokens=2, call_tokens=20, reasoning_tokens=30, turns=2),
             ep(["misleading"], False, sampled_tokens=300, name_tokens=6, call_tokens=40, reasoning_tokens=10, turns=4),
             ep(["oracle"], True, turns=6)]  # unmeasured (an endpoint counted by its usage): out of P2 only
    n = summarize_premise(facts)
    assert (n["token_episodes"], n["sampled_tokens"], n["name_tokens"], n["call_tokens"], n["reasoning_tokens"]) == (
        2, 400, 8, 60, 40)
    assert (n["name_token_share"], n["call_token_share"], n["reasoning_token_share"]) == (0.02, 0.15, 0.1)
    assert (n["sampled_tokens_mean"], n["turns_mean"], n["episodes"]) == (200.0, 4.0, 3)


def test_tallies_add_up_across_groups_and_ranks():
    facts = [ep(r, ok, **kw) for r, ok, kw in EPISODES]
    a, b = premise_tally(facts[:5]), premise_tally(facts[5:])
    summed = {k: a[k] + b[k] for k in a}
    assert summed == premise_tally(facts)
    assert premise_numbers(summed) == summarize_premise(facts)
    assert premise_numbers({}) == summarize_premise([])  # an empty step: counts 0, shares None
    assert prefixed({"p1_disagreement_share": 0.5}) == {"premise/p1_disagreement_share": 0.5}


def test_the_clean_rule_and_its_override():
    assert ep(["oracle", "oracle"], True).clean and not ep(["oracle", "relevant"], True).clean
    assert not ep(["misleading"], True).clean and not ep([], True).clean
    assert not ep(["oracle"], True, clean=False).clean
    with pytest.raises(ValueError, match="read no oracle"):
        ep(["misleading"], True, clean=True)
    with pytest.raises(ValueError, match="aligned"):
        premise_episode(["oracle"], [], resolved=True, turns=1)
    record = ep(["misleading", "oracle"], True, sampled_tokens=9, name_tokens=1, call_tokens=4, reasoning_tokens=3)
    assert PremiseEpisode.from_record(json.loads(json.dumps(record.as_record()))) == record


# --- P2 token counts on a real tokenizer's offsets ------------------------------------------------------------

@pytest.fixture(scope="module")
def tok():
    cfg = TinyModelConfig(vocab_size=700, corpus_lines=400)
    return train_tokenizer(cfg, build_corpus(cfg.corpus_lines, 0))


def ids(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


def read_turn(tok, reasoning: str, skill: str, offset: int) -> tuple[AssistantTurn, dict[str, int]]:
    """A turn sampled as pieces whose token counts are known: the reasoning, a newline, the call up to the skill
    name, the name, the rest of the call, the terminator. The ids are what a sampler could have drawn (each
    piece tokenized alone), so every piece boundary is a token boundary: the answer is the pieces' lengths."""
    path = f"/skills/{skill}/SKILL.md"
    call = "<tool_call>" + json.dumps({"name": "read", "arguments": {"path": path}}) + "</tool_call>"
    head, tail = call.split(skill)
    pieces = {"reasoning": ids(tok, reasoning), "newline": ids(tok, "\n"), "head": ids(tok, head),
              "name": ids(tok, skill), "tail": ids(tok, tail), "end": ids(tok, "<|im_end|>")}
    assert len(pieces["end"]) == 1
    token_ids = [i for piece in pieces.values() for i in piece]
    turn = AssistantTurn(reasoning + "\n" + call, token_ids, offset, [("read", {"path": path})])
    return turn, {k: len(v) for k, v in pieces.items()}


def test_reasoning_name_and_call_tokens_are_the_pieces_the_turn_was_sampled_as(tok):
    first, a = read_turn(tok, "<skill_reasoning>The misl-a skill fits the revision.</skill_reasoning>", "misl-a", 0)
    gap = 5  # the observation between the turns: context, loss mask 0
    second_at = len(first.token_ids) + gap
    second, b = read_turn(tok, "<skill_reasoning>misl-a contradicts it; oracle-x matches.</skill_reasoning>",
                          "oracle-x", second_at)
    final_text = "Done."
    final = AssistantTurn(final_text, ids(tok, final_text + "<|im_end|>"), second_at + len(second.token_ids), [])
    turns = [first, second, final]
    mask = [1] * len(first.token_ids) + [0] * gap + [1] * (len(second.token_ids) + len(final.token_ids))
    report = detect_selection_spans(turns, tok, gold_name="oracle-x", slate=SLATE)
    assert report.reads() == ["misleading", "oracle"] and report.clean

    assert reasoning_token_indices(first, tok) == list(range(a["reasoning"]))
    assert reasoning_token_indices(second, tok) == list(range(second_at, second_at + b["reasoning"]))
    assert reasoning_token_indices(final, tok) == []
    sampled, name, call, reasoning = token_counts(report, turns, mask, tok)
    assert sampled == sum(mask)
    assert name == a["name"] + b["name"]
    # a read that ends its turn owns the terminator (docs/method.md 4.5)
    assert call == sum(p["head"] + p["name"] + p["tail"] + p["end"] for p in (a, b))
    assert reasoning == a["reasoning"] + b["reasoning"]


def test_an_unclosed_reasoning_runs_to_the_turn_end_and_only_sampled_tokens_count(tok):
    text = "<skill_reasoning>cut while it reason"
    turn = AssistantTurn(text, ids(tok, text), 10, [], finish="length")
    assert reasoning_token_indices(turn, tok) == list(range(10, 10 + len(turn.token_ids)))
    report = detect_selection_spans([turn], tok, gold_name="oracle-x", slate=SLATE)
    # a mask that (wrongly) left some of the turn unsampled: those tokens are not counted
    mask = [0] * 10 + [1] * 3 + [0] * (len(turn.token_ids) - 3)
    assert token_counts(report, [turn], mask, tok) == (3, 0, 0, 3)

"""Selection-span detection (docs/method.md 4) on a real byte-level BPE tokenizer."""

from __future__ import annotations

import json

import numpy as np
import pytest

from skillgate_core.credit import selector_advantages, token_weights
from skillgate_core.credit.spans import AssistantTurn, decode_with_offsets, detect_selection_spans
from skillgate_core.policy.corpus import build_corpus
from skillgate_core.policy.tiny_model import TinyModelConfig, train_tokenizer

SLATE = {"oracle-x": "oracle", "misl-a": "misleading", "rel-b": "relevant", "irr-c": "irrelevant"}


@pytest.fixture(scope="module")
def tok():
    cfg = TinyModelConfig(vocab_size=700, corpus_lines=400)
    return train_tokenizer(cfg, build_corpus(cfg.corpus_lines, 0))


def call(name: str, **args) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


def turn(tok, text: str, dispatched, offset: int = 0, finish: str = "stop", end: bool = True) -> AssistantTurn:
    ids = tok(text + ("<|im_end|>" if end else ""), add_special_tokens=False)["input_ids"]
    return AssistantTurn(text, ids, offset, dispatched, finish)


def decoded(tok, ids, indices, offset=0):
    return tok.decode([ids[i - offset] for i in indices])


def test_read_of_the_oracle_is_one_action_with_identity_inside_call(tok):
    text = "<skill_reasoning>one applies</skill_reasoning>\n" + call("read", path="/skills/oracle-x/SKILL.md")
    t = turn(tok, text, [("read", {"path": "/skills/oracle-x/SKILL.md"})], offset=40)
    report = detect_selection_spans([t], tok, gold_name="oracle-x", slate=SLATE)
    assert report.clean and report.turns_checked == 1
    (a,) = report.actions
    assert (a.category, a.skill_name, a.tool_name, a.turn_index, a.call_index) == ("oracle", "oracle-x", "read", 0, 0)
    assert min(a.call_token_indices) >= 40  # offsets into the episode's response sequence
    assert "oracle-x" in decoded(tok, t.token_ids, a.identity_token_indices, 40)
    call_text = decoded(tok, t.token_ids, a.call_token_indices, 40)
    assert call_text.startswith("<tool_call>") or "<tool_call>" in call_text
    assert "skill_reasoning" not in call_text
    assert set(a.identity_token_indices) < set(a.call_token_indices)


def test_exec_naming_two_skills_is_two_actions_sharing_a_call(tok):
    cmd = "cat /skills/misl-a/SKILL.md /skills/zz-unknown/README.md"
    text = call("exec", command=cmd)
    report = detect_selection_spans([turn(tok, text, [("exec", {"command": cmd})])], tok, gold_name="oracle-x", slate=SLATE)
    assert report.reads() == ["misleading", "unadvertised"]
    a, b = report.actions
    assert a.call_token_indices == b.call_token_indices and (a.path_index, b.path_index) == (0, 1)
    assert not set(a.identity_token_indices) & set(b.identity_token_indices)


def test_non_reading_exec_and_other_tools_are_not_actions(tok):
    cmd = "ls /skills/oracle-x/SKILL.md"
    text = call("exec", command=cmd) + call("ls", path="/skills")
    report = detect_selection_spans(
        [turn(tok, text, [("exec", {"command": cmd}), ("ls", {"path": "/skills"})])], tok, gold_name="oracle-x", slate=SLATE
    )
    assert report.actions == () and report.clean


def test_unlocatable_skill_mention_is_a_span_mismatch(tok):
    text = call("read", path="/skills/oracle-x/notes.txt")
    report = detect_selection_spans([turn(tok, text, [("read", {"path": "/skills/oracle-x/notes.txt"})])], tok,
                                    gold_name="oracle-x", slate=SLATE)
    assert report.span_mismatch == 1 and not report.actions


def test_dispatch_mismatch_skips_the_turn(tok):
    text = call("read", path="/skills/oracle-x/SKILL.md")
    report = detect_selection_spans([turn(tok, text, [("read", {"path": "/other"})])], tok, gold_name="oracle-x", slate=SLATE)
    assert report.parse_dispatch_mismatch == 1 and not report.actions
    report = detect_selection_spans([turn(tok, text, [])], tok, gold_name="oracle-x", slate=SLATE)
    assert report.parse_dispatch_mismatch == 1


def test_ids_that_do_not_reproduce_the_text_are_an_alignment_mismatch(tok):
    text = call("read", path="/skills/oracle-x/SKILL.md")
    good = turn(tok, text, [("read", {"path": "/skills/oracle-x/SKILL.md"})])
    bad = AssistantTurn(text, list(good.token_ids)[:-3], 0, good.dispatched)
    report = detect_selection_spans([bad], tok, gold_name="oracle-x", slate=SLATE)
    assert report.alignment_mismatch == 1 and not report.actions


def test_truncated_turns_are_not_scanned(tok):
    text = call("read", path="/skills/oracle-x/SKILL.md")
    t = turn(tok, text, [("read", {"path": "/skills/oracle-x/SKILL.md"})], finish="length", end=False)
    report = detect_selection_spans([t], tok, gold_name="oracle-x", slate=SLATE)
    assert report.turns_checked == 0 and not report.actions


def test_offsets_survive_multibyte_characters(tok):
    text = "Résumé ✓ 数据 → " + call("read", path="/skills/rel-b/SKILL.md")
    ids = tok(text, add_special_tokens=False)["input_ids"]
    decoded_text, offsets = decode_with_offsets(tok, ids)
    assert decoded_text == text and len(offsets) == len(ids)
    assert offsets[0][0] == 0 and offsets[-1][1] == len(text)
    assert all(lo <= hi for lo, hi in offsets)
    report = detect_selection_spans([turn(tok, text, [("read", {"path": "/skills/rel-b/SKILL.md"})])], tok,
                                    gold_name="oracle-x", slate=SLATE)
    (a,) = report.actions
    assert a.category == "relevant" and "rel-b" in decoded(tok, ids, a.identity_token_indices)


def test_spans_feed_selector_advantages_and_token_weights(tok):
    """Two episodes (clean oracle read vs misleading read) through advantages and weights."""
    episodes = []
    for skill in ("oracle-x", "misl-a"):
        # Some text before the call: a read that ends the turn takes the whole rest (call + terminator).
        text = "one applies\n" + call("read", path=f"/skills/{skill}/SKILL.md")
        t = turn(tok, text, [("read", {"path": f"/skills/{skill}/SKILL.md"})])
        episodes.append((t, detect_selection_spans([t], tok, gold_name="oracle-x", slate=SLATE)))
    reads = [r.reads() for _, r in episodes]
    assert reads == [["oracle"], ["misleading"]]
    adv = selector_advantages(reads, "clean_oracle")
    assert adv == [[0.5], [-0.5]]
    masks = [np.ones(len(t.token_ids)) for t, _ in episodes]
    weights = token_weights(masks, [r.actions for _, r in episodes], adv)
    total = sum(m.sum() for m in masks)
    assert sum(w.sum() for w in weights.w_task) == pytest.approx(total)
    assert sum(w.sum() for w in weights.w_sel) == pytest.approx(total)
    for (_, r), w_task, w_sel in zip(episodes, weights.w_task, weights.w_sel, strict=True):
        (a,) = r.actions
        assert all(w_task[i] == 0 for i in a.call_token_indices)
        assert all(w_sel[i] > 0 for i in a.identity_token_indices)


def test_tool_names_are_normalised_before_the_read_test(tok):
    # docs/method.md 4.2: `functions.Read` reads like `read`; `Tools.EXEC` running cat reads like `exec`.
    text = call("functions.Read", path="/skills/oracle-x/SKILL.md")
    t = turn(tok, text, [("functions.Read", {"path": "/skills/oracle-x/SKILL.md"})])
    report = detect_selection_spans([t], tok, gold_name="oracle-x", slate=SLATE)
    assert report.clean and report.reads() == ["oracle"]
    assert report.actions[0].tool_name == "read"
    cmd = "cat /skills/misl-a/SKILL.md"
    t2 = turn(tok, call("Tools.EXEC", command=cmd), [("Tools.EXEC", {"command": cmd})])
    assert detect_selection_spans([t2], tok, gold_name="oracle-x", slate=SLATE).reads() == ["misleading"]
    # A name that only ends in "read" after no dot is not a read.
    t3 = turn(tok, call("unread", path="/skills/oracle-x/SKILL.md"), [("unread", {"path": "/skills/oracle-x/SKILL.md"})])
    assert detect_selection_spans([t3], tok, gold_name="oracle-x", slate=SLATE).reads() == []


def test_a_read_that_ends_the_turn_owns_its_terminator(tok):
    path = "/skills/oracle-x/SKILL.md"
    text = "checking\n" + call("read", path=path) + "\n"
    t = turn(tok, text, [("read", {"path": path})], offset=7)
    (a,) = detect_selection_spans([t], tok, gold_name="oracle-x", slate=SLATE).actions
    end_id = tok.convert_tokens_to_ids("<|im_end|>")
    last = 7 + len(t.token_ids) - 1
    assert t.token_ids[-1] == end_id and last in a.call_token_indices
    # ...and so the terminator leaves the task stream with the rest of the call.
    mask = np.zeros(7 + len(t.token_ids))
    mask[7:] = 1
    w = token_weights([mask], [[a]], [[0.5]])
    assert w.w_task[0][last] == 0.0


def test_a_read_followed_by_more_text_does_not_take_the_terminator(tok):
    path = "/skills/oracle-x/SKILL.md"
    text = call("read", path=path) + "\nthen I will act"
    t = turn(tok, text, [("read", {"path": path})])
    (a,) = detect_selection_spans([t], tok, gold_name="oracle-x", slate=SLATE).actions
    assert len(t.token_ids) - 1 not in a.call_token_indices
    # Two calls in a turn: only the last one (the one that ends the text) owns the terminator.
    text2 = call("read", path=path) + call("read", path="/skills/misl-a/SKILL.md")
    t2 = turn(tok, text2, [("read", {"path": path}), ("read", {"path": "/skills/misl-a/SKILL.md"})])
    first, second = detect_selection_spans([t2], tok, gold_name="oracle-x", slate=SLATE).actions
    assert len(t2.token_ids) - 1 in second.call_token_indices
    assert len(t2.token_ids) - 1 not in first.call_token_indices


# -- reads the environment observed (opens), docs/reads.md -------------------------------------------


def _opened(turn_index: int, call_index: int | None, *names: str):
    from skillgate_core.credit.actions import SkillOpen

    return [SkillOpen(n, turn_index if call_index is not None else None, call_index) for n in names]


def test_an_open_named_after_shell_unquoting_is_an_action_on_the_name_tokens(tok):
    cmd = "cd /app\ncat \"/skills/oracle-x/SKILL.md\" /sk''ills/misl-a/README.md"
    t = turn(tok, call("exec", command=cmd), [("exec", {"command": cmd})])
    report = detect_selection_spans([t], tok, gold_name="oracle-x", slate=SLATE,
                                    opens=_opened(0, 0, "oracle-x", "misl-a"))
    assert report.clean and report.reads() == ["oracle", "misleading"] and report.attributed() == [True, True]
    o, m = report.actions
    assert "oracle-x" in decoded(tok, t.token_ids, o.identity_token_indices)
    assert "misl-a" in decoded(tok, t.token_ids, m.identity_token_indices) and (o.path_index, m.path_index) == (0, 1)


def test_opens_the_call_does_not_name_are_unattributed_reads_without_mismatch(tok):
    cmd = "cat /skills/*/SKILL.md; python3 /skills/rel-b/scripts/fit.py"
    t = turn(tok, call("exec", command=cmd), [("exec", {"command": cmd})])
    report = detect_selection_spans([t], tok, gold_name="oracle-x", slate=SLATE,
                                    opens=[*_opened(0, 0, "irr-c", "oracle-x"), *_opened(0, None, "misl-a")])
    assert report.clean and report.actions == ()
    assert report.reads() == ["irrelevant", "oracle", "misleading"] and report.attributed() == [False] * 3


def test_no_opens_no_reads_even_when_the_text_names_a_skill(tok):
    cmd = "ls /skills/oracle-x && cat /skills/oracle-x/scripts/run.py"
    t = turn(tok, call("exec", command=cmd), [("exec", {"command": cmd})])
    report = detect_selection_spans([t], tok, gold_name="oracle-x", slate=SLATE, opens=[])
    assert report.clean and report.reads() == [] and report.actions == ()


def test_an_open_recorded_for_a_call_that_does_not_exist_cannot_be_judged(tok):
    t = turn(tok, call("exec", command="true"), [("exec", {"command": "true"})])
    report = detect_selection_spans([t], tok, gold_name="oracle-x", slate=SLATE, opens=_opened(0, 3, "oracle-x"))
    assert report.span_mismatch == 1 and not report.clean


def test_an_unattributed_read_makes_the_episode_unclean_and_joins_the_baseline():
    reads, attributed = [["oracle"], ["oracle"], ["oracle", "oracle"]], [[True], [False], [False, True]]
    assert selector_advantages(reads, "clean_oracle", attributed) == [[0.75], [-0.25], [-0.25, -0.25]]
    # Without the flags every read is an action: the docs/method.md 11 vectors are unchanged.
    assert selector_advantages(reads, "clean_oracle") == [[0.5], [0.5], [-0.5, -0.5]]
    with pytest.raises(ValueError, match="align"):
        selector_advantages(reads, "clean_oracle", [[True]])

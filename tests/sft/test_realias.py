"""SFT copies under fresh skill names (sft.realias): renaming in the token ids is the same as renaming
the text and tokenizing it again, keeps the teacher's loss mask, and gives each copy its own names."""

from __future__ import annotations

import random
import re

import pytest
from transformers import AutoTokenizer

from skillgate_core.sft.realias import name_occurrences, renamed_copies

NAMES = ["wren-archive-fit", "wren-archive-policy", "merlin-archive-planner", "merlin-archive"]

PROMPT = ("Skills:\n- wren-archive-fit: fits archives\n- wren-archive-policy: a policy\n"
          "merlin-archive-planner plans; merlin-archive is older. Not skills: wrenfeather, xwren-archive-fit, "
          "merlin-archive-plannerx, wren-archive-fitting, a wren sang.\n")
RESPONSES = [  # (text, trained by the loss)
    ("<skill_reasoning>The skill wren-archive-fit matches.</skill_reasoning>"
     '<tool_call>{"name": "read", "arguments": {"path": "/skills/wren-archive-fit/SKILL.md"}}</tool_call>', 1),
    ("\n---\nname: wren-archive-fit\nSee merlin-archive-planner.\n", 0),
    ("Done with (merlin-archive).", 1),
]


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


def _rename_text(text: str, mapping: dict[str, str]) -> str:
    """The reference: every whole name (no letter, digit or '-' glued on) renamed, longest first."""
    pattern = "|".join(re.escape(n) for n in sorted(mapping, key=len, reverse=True))
    return re.sub(rf"(?<![A-Za-z0-9])({pattern})(?![A-Za-z0-9_-])", lambda m: mapping[m.group(1)], text)


def _found(pattern: str, text: str) -> re.Match[str]:
    match = re.search(pattern, text)
    assert match is not None, (pattern, text)
    return match


def _encode(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


@pytest.mark.parametrize("shuffle", [True, False])
def test_renaming_ids_equals_renaming_the_text_and_keeps_the_mask(tokenizer, shuffle):
    prompt = _encode(tokenizer, PROMPT)
    response, mask = [], []
    for text, trained in RESPONSES:
        ids = _encode(tokenizer, text)
        response += ids
        mask += [trained] * len(ids)
    copies = renamed_copies(prompt, response, mask, NAMES, tokenizer, 8, random.Random(0), shuffle_suffixes=shuffle)
    assert len(copies) == 8
    first_parts, fit_suffixes = set(), set()
    for new_prompt, new_response, new_mask in copies:
        # the copy's names: read back from where each name stood in the renamed prompt
        text = tokenizer.decode(new_prompt)
        fit, fit_suffix = _found(r"- (\w+)-archive-(\w+): fits archives", text).groups()
        policy = _found(r"- (\w+-archive-\w+): a policy", text).group(1)
        planner = _found(r"\n(\w+)-archive-planner plans", text).group(1)
        mapping = {"wren-archive-fit": f"{fit}-archive-{fit_suffix}", "wren-archive-policy": policy,
                   "merlin-archive-planner": f"{planner}-archive-planner", "merlin-archive": f"{planner}-archive"}
        assert fit != planner and {fit, planner}.isdisjoint({"wren", "merlin"})
        # the lookalike pair wren-archive-{fit,policy} keeps its suffixes, maybe swapped; the rest keep theirs
        assert fit_suffix in {"fit", "policy"} and policy == f"{fit}-archive-" + ({"fit", "policy"} - {fit_suffix}).pop()
        first_parts.add((fit, planner))
        fit_suffixes.add(fit_suffix)
        assert new_prompt == _encode(tokenizer, _rename_text(PROMPT, mapping))
        expected, expected_mask = [], []
        for segment, trained in RESPONSES:
            ids = _encode(tokenizer, _rename_text(segment, mapping))
            expected += ids
            expected_mask += [trained] * len(ids)
        assert new_response == expected and new_mask == expected_mask
        # the decoys stay: glued letters, a longer word, a bare first part
        assert "wrenfeather" in text and "xwren-archive-fit" in text and "merlin-archive-plannerx" in text
        assert "wren-archive-fitting" in text and "a wren sang" in text
    assert len(first_parts) == 8  # each copy under its own names
    assert fit_suffixes == ({"fit", "policy"} if shuffle else {"fit"})  # the shuffle moves suffixes in the pair


def test_occurrences_are_whole_names_longest_first(tokenizer):
    ids = _encode(tokenizer, "merlin-archive-planner merlin-archive merlin-archive-plannerx")
    found = name_occurrences(ids, NAMES, tokenizer)
    assert [NAMES[i] for _, _, i, _ in found] == ["merlin-archive-planner", "merlin-archive"]
    assert [spaced for *_, spaced in found] == [False, True]


def test_no_copies_without_names_or_with_a_broken_row(tokenizer):
    assert renamed_copies([1, 2], [3], [1], [], tokenizer, 2, random.Random(0)) == []
    with pytest.raises(ValueError, match="differ in length"):
        renamed_copies([1, 2], [3, 4], [1], NAMES, tokenizer, 1, random.Random(0))

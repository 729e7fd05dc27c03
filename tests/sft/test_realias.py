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


def _encode(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


def test_renaming_ids_equals_renaming_the_text_and_keeps_the_mask(tokenizer):
    prompt = _encode(tokenizer, PROMPT)
    response, mask = [], []
    for text, trained in RESPONSES:
        ids = _encode(tokenizer, text)
        response += ids
        mask += [trained] * len(ids)
    copies = renamed_copies(prompt, response, mask, NAMES, tokenizer, 3, random.Random(0))
    assert len(copies) == 3
    first_parts = set()
    for new_prompt, new_response, new_mask in copies:
        # the copy's first parts: read back from where wren-archive-fit stood in the renamed prompt
        text = tokenizer.decode(new_prompt)
        fit = re.search(r"- (\w+)-archive-fit:", text).group(1)
        planner = re.search(r"\n(\w+)-archive-planner plans", text).group(1)
        mapping = {n: (fit if n.startswith("wren") else planner) + n[n.index("-"):] for n in NAMES}
        assert fit != planner and {fit, planner}.isdisjoint({"wren", "merlin"})
        first_parts.add((fit, planner))
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
    assert len(first_parts) == 3  # each copy under its own names


def test_occurrences_are_whole_names_longest_first(tokenizer):
    ids = _encode(tokenizer, "merlin-archive-planner merlin-archive merlin-archive-plannerx")
    found = name_occurrences(ids, NAMES, tokenizer)
    assert [NAMES[i] for _, _, i, _ in found] == ["merlin-archive-planner", "merlin-archive"]
    assert [spaced for *_, spaced in found] == [False, True]


def test_no_copies_without_names_or_with_a_broken_row(tokenizer):
    assert renamed_copies([1, 2], [3], [1], [], tokenizer, 2, random.Random(0)) == []
    with pytest.raises(ValueError, match="differ in length"):
        renamed_copies([1, 2], [3, 4], [1], NAMES, tokenizer, 1, random.Random(0))

"""Prompt building (docs/method.md 2)."""

from __future__ import annotations

import json

from skillgate_core.agent.prompts import DEFAULT_PROFILE, PromptProfile, build_messages
from skillgate_core.agent.tool_schemas import TOOL_NAMES, tool_schema_digest, tool_schemas_json
from skillgate_core.skills import Slate, SlateEntry


def slate() -> Slate:
    cats = ["oracle"] + ["misleading"] * 5 + ["relevant"] * 5 + ["irrelevant"] * 5
    entries = tuple(SlateEntry(name=f"s{i:02d}", category=c, description=f"does thing {i} " + "x" * 400)
                    for i, c in enumerate(cats))
    return Slate(task_id="t1", bench="b", split="train", seed=1, entries=entries)


def test_nine_tools_in_the_schema_block():
    assert TOOL_NAMES == ("read", "write", "edit", "apply_patch", "grep", "find", "ls", "exec", "process")
    assert [json.loads(line)["function"]["name"] for line in tool_schemas_json().splitlines()] == list(TOOL_NAMES)
    assert len(tool_schema_digest()) == 64


def test_skill_episode_prompt_has_the_block_in_slate_order_and_cut_descriptions():
    s = slate()
    system, user = build_messages(DEFAULT_PROFILE, "Convert the ledger.", s)
    assert (system["role"], user) == ("system", {"role": "user", "content": "Convert the ledger."})
    text = system["content"]
    positions = [text.index(f"<name>{e.name}</name>") for e in s.entries]
    assert positions == sorted(positions)
    assert "<location>/skills/s00/SKILL.md</location>" in text
    assert "x" * 301 not in text and "x" * 280 in text
    assert "Never read more than one skill up front" in text


def test_no_skill_episode_has_no_skills_section_and_profiles_digest():
    system, _ = build_messages(DEFAULT_PROFILE, "Do it.", None)
    assert "<available_skills>" not in system["content"] and "# Skills" not in system["content"]
    assert DEFAULT_PROFILE.digest() == PromptProfile().digest()
    assert PromptProfile(description_chars=200).digest() != DEFAULT_PROFILE.digest()

"""The shared tool-call parser (docs/method.md 2)."""

from __future__ import annotations

import json

from skillgate_core.formats.tool_calls import MAX_CALLS_PER_TURN, parse_tool_calls


def call(name: str, **args) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


def test_json_call_with_span():
    text = "I will read it.\n" + call("read", path="/skills/a/SKILL.md") + "\n"
    turn = parse_tool_calls(text)
    (c,) = turn.calls
    assert (c.name, dict(c.arguments), c.form) == ("read", {"path": "/skills/a/SKILL.md"}, "json")
    assert c.raw(text).startswith("<tool_call>") and c.raw(text).endswith("</tool_call>")
    assert not turn.is_final


def test_qwen_xml_form_and_typed_values():
    text = (
        "<tool_call><function=edit><parameter=path>\n/app/x.txt\n</parameter>"
        '<parameter=edits>[{"oldText": "a", "newText": "b"}]</parameter></function></tool_call>'
    )
    (c,) = parse_tool_calls(text).calls
    assert c.form == "xml" and c.name == "edit"
    assert c.arguments == {"path": "/app/x.txt", "edits": [{"oldText": "a", "newText": "b"}]}


def test_json_calls_win_over_xml():
    text = "<tool_call><function=ls></function></tool_call>" + call("exec", command="pwd")
    turn = parse_tool_calls(text)
    assert [c.name for c in turn.calls] == ["exec"] and turn.dropped == 1


def test_at_most_five_calls_in_order():
    text = "".join(call("ls", path=f"/d{i}") for i in range(7))
    turn = parse_tool_calls(text)
    assert len(turn.calls) == MAX_CALLS_PER_TURN == 5
    assert [c.arguments["path"] for c in turn.calls] == [f"/d{i}" for i in range(5)]
    assert turn.dropped == 2


def test_malformed_blocks_are_reported_not_raised():
    turn = parse_tool_calls('<tool_call>{"name": "read", "arguments": </tool_call>')
    assert not turn.calls and len(turn.errors) == 1 and "not valid JSON" in turn.errors[0]
    assert not turn.is_final  # a broken attempt is not a final answer: the model gets the error back
    turn = parse_tool_calls('<tool_call>{"name": "read", "arguments": [1]}</tool_call>')
    assert "arguments must be a JSON object" in turn.errors[0]


def test_double_encoded_arguments_and_final_answer():
    text = '<tool_call>{"name": "ls", "arguments": "{\\"path\\": \\"/\\"}"}</tool_call>'
    assert parse_tool_calls(text).calls[0].arguments == {"path": "/"}
    assert parse_tool_calls("All done: the report is written.").is_final

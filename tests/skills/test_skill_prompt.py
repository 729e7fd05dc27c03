"""The <available_skills> block: order, location, 300-character cut, XML escaping."""

from __future__ import annotations

from skillgate_core.skills import Slate, SlateEntry, render_available_skills


def test_block_lists_skills_in_order() -> None:
    block = render_available_skills([SlateEntry("b-skill", "relevant", "Second."), SlateEntry("a-skill", "oracle", "First.")])
    assert block.splitlines() == [
        "<available_skills>",
        "<skill><name>b-skill</name><description>Second.</description><location>/skills/b-skill/SKILL.md</location></skill>",
        "<skill><name>a-skill</name><description>First.</description><location>/skills/a-skill/SKILL.md</location></skill>",
        "</available_skills>",
    ]


def test_description_cut_to_300_characters_then_escaped() -> None:
    text = "x" * 298 + "&<" + "tail that is cut"
    line = render_available_skills([SlateEntry("s", "oracle", text)]).splitlines()[1]
    description = line.split("<description>")[1].split("</description>")[0]
    assert description == "x" * 298 + "&amp;&lt;"
    assert "tail" not in line


def test_escaping_and_whitespace() -> None:
    entry = SlateEntry("s", "oracle", "Use <b> & 'it'\n  when\n\tasked > 1")
    line = render_available_skills([entry]).splitlines()[1]
    assert "<description>Use &lt;b&gt; &amp; 'it' when asked &gt; 1</description>" in line


def test_slate_object_is_accepted() -> None:
    entries = tuple(SlateEntry(f"s{i}", "relevant", "d") for i in range(3))
    slate = Slate("t", "b", "train", 1, entries)
    assert render_available_skills(slate) == render_available_skills(entries)

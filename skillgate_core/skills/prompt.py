"""The `<available_skills>` block of the system prompt (docs/method.md 2).

    block = render_available_skills(slate)
    # <available_skills>
    # <skill><name>pdf-merge</name><description>Merge PDFs ...</description><location>/skills/pdf-merge/SKILL.md</location></skill>
    # ...
    # </available_skills>

One `<skill>` line per entry, in slate order. A description's whitespace runs (YAML folded text
keeps newlines) become single spaces so each skill stays on one line, then it is cut to 300
characters, then XML-escaped (escaping after the cut never leaves half an `&amp;`).
"""

from __future__ import annotations

from collections.abc import Iterable
from xml.sax.saxutils import escape

from skillgate_core.skills.slates import Slate, SlateEntry

__all__ = ["DESCRIPTION_CHARS", "render_available_skills"]

DESCRIPTION_CHARS = 300
"""Description characters the prompt shows per skill."""


def render_available_skills(
    slate: Slate | Iterable[SlateEntry], description_chars: int = DESCRIPTION_CHARS
) -> str:
    """The `<available_skills>` block for `slate` (a Slate or its entries), in order."""
    entries = slate.entries if isinstance(slate, Slate) else tuple(slate)
    lines = ["<available_skills>"]
    for e in entries:
        description = " ".join(e.description.split())[:description_chars]
        lines.append(
            f"<skill><name>{escape(e.name)}</name><description>{escape(description)}</description>"
            f"<location>{escape(e.location)}</location></skill>"
        )
    lines.append("</available_skills>")
    return "\n".join(lines)

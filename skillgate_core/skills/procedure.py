"""A skill's procedure: the first ```bash (or ```sh) block of its SKILL.md body.

The scripted followers (benchgen criticality) and the reference teacher (agent) both run it; the
bundled skills put their whole procedure in that one block.
"""

from __future__ import annotations

import re

__all__ = ["extract_procedure"]

_BASH_BLOCK = re.compile(r"^```(?:bash|sh)[ \t]*\n(.*?)^```", re.MULTILINE | re.DOTALL)


def extract_procedure(skill_md: str) -> str | None:
    """The first ```bash (or ```sh) block of a SKILL.md, or None when it has none."""
    m = _BASH_BLOCK.search(skill_md)
    return m.group(1) if m else None

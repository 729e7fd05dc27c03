"""Stdlib-only engines of the four task families, and how they are pasted into task scripts.

Each engine module has `solve(params, files) -> {output path: text}` and
`check(params, inputs, files) -> [problems]`; `embed.script_text` turns one into a standalone
python3 script (a skill's tool, the reference solution or the verifier).
"""

from skillgate_core.benchgen.engines import constraints, diagnosis, planning, procedural
from skillgate_core.benchgen.engines.embed import ENGINES, check_script, tool_script

__all__ = ["ENGINES", "check_script", "constraints", "diagnosis", "planning", "procedural", "tool_script"]

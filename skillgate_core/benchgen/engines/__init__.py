"""Stdlib-only engines of the task families, and how they are pasted into task scripts.

Each engine module has `solve(params, files) -> {output path: text}` and
`check(params, inputs, files) -> [problems]`; `embed.script_text` turns one into a standalone
python3 script (a skill's tool, the reference solution or the verifier). `common` holds the helpers
every embedded script shares (pasted in with the engine). A family names its engine where it is declared
(benchgen/families/<name>.py); benchgen.families.FAMILIES is the one registry.
"""

from skillgate_core.benchgen.engines import constraints, diagnosis, planning, procedural, steps
from skillgate_core.benchgen.engines.embed import check_script, solution_script, tool_script

__all__ = ["check_script", "constraints", "diagnosis", "planning", "procedural", "solution_script",
           "steps", "tool_script"]

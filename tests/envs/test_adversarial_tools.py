"""Tool arguments built to exhaust the host: each is a tool error observation, fast, in bounded memory.

The agent's tools run their argument parsing and glob matching on the host (in the trainer's
process), outside every sandbox limit. A brace bomb (`{a,b}` x 24 = 16M alternatives) once took
115 s and 5 GB there and aborted the episode; a glob with many `**/` backtracks for ever. Each
attack must come back as ToolResult(ok=False) (or an honest answer) within a second or two, on
both backends, and the same ToolBox keeps working afterwards.
"""

from __future__ import annotations

import json
import resource
import time

import pytest

from skillgate_core.agent import tools as tools_module
from skillgate_core.agent.tools import ToolBox
from skillgate_core.envs.backends import start_sandbox
from skillgate_core.formats.tool_calls import parse_tool_calls

MAX_BRACE_EXPANSIONS = tools_module.MAX_BRACE_EXPANSIONS
MAX_GLOB_CHARS = tools_module.MAX_GLOB_CHARS


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.fixture
def tools(backend: str, hello_task):
    with start_sandbox(hello_task, backend=backend) as box:  # type: ignore[arg-type]
        # A deep path and a long name: what backtracking globs chew on.
        box.exec("mkdir -p /app/" + "/".join(["d"] * 30) + " && touch /app/" + "a" * 200 + " /app/x.py")
        yield ToolBox(box)


def _timed(tools: ToolBox, name: str, **args):
    """The call as a model writes it, through the parser the episode loop uses."""
    [call] = parse_tool_calls(f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>").calls
    start = time.monotonic()
    result = tools.run(call)
    return result, time.monotonic() - start


def test_brace_and_glob_bombs_are_tool_errors(tools: ToolBox):
    rss = _peak_rss_mb()
    bombs = {
        "find: {a,b} x 24": ("find", {"pattern": "{a,b}" * 24}),
        "find: nested": ("find", {"pattern": "{x," + "{a,b}" * 12 + "}"}),
        "find: deep": ("find", {"pattern": "{a," * 250 + "{a,b}" * 9 + "}" * 250}),
        "find: wide": ("find", {"pattern": "{" + ",".join(f"n{i}" for i in range(MAX_BRACE_EXPANSIONS + 1)) + "}"}),
        "find: long": ("find", {"pattern": "x" * (MAX_GLOB_CHARS + 1)}),
        "grep glob: {a,b} x 24": ("grep", {"pattern": "x", "glob": "{a,b}" * 24}),
        "grep glob: long": ("grep", {"pattern": "x", "glob": "*" * (MAX_GLOB_CHARS + 1)}),
    }
    for label, (name, args) in bombs.items():
        result, took = _timed(tools, name, **args)
        assert not result.ok and took < 2, (label, took, result)
        assert ("brace" in result.error and str(MAX_BRACE_EXPANSIONS) in result.error) or \
            f"at most {MAX_GLOB_CHARS} characters" in result.error, (label, result.error)
        assert "'pattern'" in result.error or "'glob'" in result.error, (label, result.error)
    assert _peak_rss_mb() - rss < 200
    assert tools.call("find", {"pattern": "*.py"}).payload["matches"] == "/app/x.py"  # still usable


def test_backtracking_globs_answer_quickly(tools: ToolBox):
    for pattern in ["**/" * 14 + "*z", "/app/" + "**/" * 14 + "*z", "*a" * 12 + "b", "*a*" * 20 + "[z-a]",
                    "d/" * 25 + "**/**/**/**/**/**/**/**/**/**/**/**/**/**/*q"]:
        result, took = _timed(tools, "find", pattern=pattern)
        assert took < 2, (pattern, took)
        assert (result.ok and result.payload["count"] == 0) or not result.ok, (pattern, result)
    result, _ = _timed(tools, "find", pattern="[z-a]*")  # an empty range: an answer or an error, not a crash
    assert (result.ok and result.payload["count"] == 0) or "'pattern'" in (result.error or ""), result
    assert tools.call("find", {"pattern": "**/d/*"}).ok

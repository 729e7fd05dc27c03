"""`skillgate traj show` prints what agents wrote as text: terminal control sequences (clear screen,
OSC 8 links, C1 CSI, carriage returns that fake lines) are shown as \\xNN, and rich markup in agent
text prints literally."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deployments.cli import app

runner = CliRunner()

HOSTILE = ("clear\x1b[2J fake\rline \x1b]8;;http://evil.example/\x07link\x1b]8;;\x07 csi\x9b2J "
           "[red]x[/red] [bold]b[/bold]")
CONTROL = ("\x1b", "\x9b", "\x07", "\r")


def _log(tmp_path: Path) -> Path:
    call = json.dumps({"cmd": "echo \x9b2J [red]x[/red]"})
    observation = "<tool_response name='exec'>" + json.dumps({"stdout": "out\x1b[2J\n[red]x[/red]\n", "rc": 0}) \
                  + "</tool_response>"
    log = {
        "task_id": "task-\x1b[2J[red]x[/red]", "bench": "b\x1b[1A", "repeat": 0, "policy": "p\x9b2J", "status": "fail",
        "score": 0.0, "gold": "g\x1b[31m", "verifier_detail": "detail " + HOSTILE,
        "slate": [["s\x1b[2J", "oracle"]],
        "messages": [{"role": "system", "content": "system " + HOSTILE}, {"role": "user", "content": "task " + HOSTILE},
                     {"role": "assistant", "content": HOSTILE}, {"role": "user", "content": observation},
                     {"role": "assistant", "content": "done " + HOSTILE}],
        "turns": [{"text": HOSTILE + "<tool_call>" + json.dumps({"name": "exec", "arguments": call}) + "</tool_call>",
                   "finish": "tool_calls\x1b[2J", "calls": [["exec", call]]},
                  {"text": "done " + HOSTILE, "finish": "stop", "calls": []}],
    }
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(log))
    return path


@pytest.mark.parametrize("args", [["--episode", "0"], ["--episode", "0", "--full"], ["--list"], ["--list", "--json"]])
def test_agent_text_cannot_drive_the_terminal(tmp_path: Path, args: list[str]):
    res = runner.invoke(app, ["traj", "show", str(_log(tmp_path)), *args], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    for c in CONTROL:
        assert c not in res.output, (repr(c), res.output)
    if "--json" in args:  # JSON escapes them itself
        assert json.loads(res.output)[0]["turns"][1]["text"] == "done " + HOSTILE  # the record, unchanged
        return
    assert "\\x1b[2J" in res.output
    if "--list" not in args:
        assert "\\x9b2J" in res.output and "\\x1b]8;;http://evil.example/\\x07link" in res.output
        assert "[red]x[/red]" in res.output and "[bold]b[/bold]" in res.output  # markup prints literally

"""One Ctrl-C in `skillgate eval run` against an endpoint that is still generating: it stops at once
(not when the in-flight requests end), says so in a line or two, and the evaluation records SIGINT."""

from __future__ import annotations

import os
import sys

import pytest
from hostile_server import HostileServer
from support.ctrl_c import ctrl_c, own_group
from support.skillgate_cli import REPO

from skillgate_core.base.paths import state_layout
from warehouse import query

pytestmark = pytest.mark.usefixtures("bwrap_ready")


def test_one_ctrl_c_stops_an_evaluation_waiting_on_a_slow_endpoint_and_records_sigint(tmp_path, tiny_model_dir, bench,
                                                                                        tiny_spec):
    home = tmp_path / "home"
    env = {**os.environ, "SKILLGATE_HOME": str(home), "COLUMNS": "200", "PYTHONPATH": str(REPO)}
    with HostileServer("drip") as server:  # headers, then one byte every few seconds: a request that never ends
        args = ["eval", "run", "--policy", server.base_url, "--model", "drip", "--tokenizer", str(tiny_model_dir),
                "--protocol", str(tiny_spec), "--bench", str(bench), "--batch", "4"]
        with own_group([sys.executable, "-c", "from deployments.cli import main; main()", *args], cwd=REPO, env=env,
                       merge_stderr=True) as child:
            out, _, took = ctrl_c(child, ready=lambda: server.requests >= 1, wait_s=120, exit_s=60, settle_s=0.5)
    assert child.returncode == 130, out
    assert took < 10, f"took {took:.1f} s to stop:\n{out}"
    assert "Traceback" not in out, out
    tail = out[out.index("SIGINT"):] if "SIGINT" in out else out
    assert "SIGINT" in out and len(tail.splitlines()) < 6, out
    rows = query("select status, status_detail from v_evaluation", state=state_layout(home)).rows
    assert len(rows) == 1 and rows[0][0] == "incomplete" and "interrupted by SIGINT" in rows[0][1], rows

"""Ctrl-C while Ray Train trains: the workers stop and the driver unwinds through the handler that was
there before (the command line's), within seconds, not through Ray Train's own
handler (which exits via SystemExit, recorded as a failure, and is never removed)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from support.ctrl_c import ctrl_c, own_group

HERE = Path(__file__).parent
REPO = HERE.parents[1]

DRIVER = """
import signal, sys
from rich.console import Console
from deployments.cli.interrupts import stop_on_interrupt
from skillgate_core.base.interrupts import interrupt_signal
from skillgate_core.rl.engine.launch import LaunchConfig, launch_ray
from rl_workers import sleeping_worker

markers, runs = sys.argv[1], sys.argv[2]
with stop_on_interrupt(Console(stderr=True), "the test run"):
    ours = signal.getsignal(signal.SIGINT)
    try:
        launch_ray(sleeping_worker, markers, LaunchConfig(num_workers=2, pythonpath=(sys.argv[3],), storage_path=runs))
    except KeyboardInterrupt as exc:  # Ray's get re-raises a plain KeyboardInterrupt for the handler's SignalStop
        print("STOPPED", interrupt_signal(exc), "handler restored" if signal.getsignal(signal.SIGINT) is ours else "handler lost",
              flush=True)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").is_dir() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


@pytest.mark.slow  # a local Ray cluster and two Ray Train workers start: ~30-60 s on 2 cores
def test_ctrl_c_stops_ray_train_workers_and_unwinds_through_the_previous_handler(tmp_path):
    markers = tmp_path / "markers"
    markers.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(HERE)]), "SKILLGATE_HOME": str(tmp_path / "home")}
    args = [sys.executable, "-c", DRIVER, str(markers), str(tmp_path / "runs"), str(HERE)]
    with own_group(args, env=env) as proc:
        out, err, took = ctrl_c(proc, ready=lambda: len(list(markers.iterdir())) >= 2, wait_s=300, exit_s=120)
        pids = [int(p.read_text()) for p in markers.iterdir()]
    assert "STOPPED SIGINT handler restored" in out, out + err
    assert took < 30, f"{took:.1f} s"
    assert "SIGINT: stopping the test run" in err and "Traceback" not in err, err
    time.sleep(2)
    assert not [p for p in pids if _alive(p)], "Ray Train workers outlived the stop"

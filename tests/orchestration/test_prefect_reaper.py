"""A SIGKILLed run's temporary Prefect server is reaped by the next entry point (flows/tasks import:
configure_prefect_env), as sandboxes are: only servers whose owner process is gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# What `skillgate run` does, up to the start of Prefect's temporary server (its own spawn code).
OWNER = """
import flows  # the entry point: configure_prefect_env()
from prefect.server.api.server import SubprocessASGIServer
server = SubprocessASGIServer()
server.port = server.find_available_port()
print(server._run_uvicorn_command().pid, flush=True)
import time
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _owner(env: dict[str, str]) -> tuple[subprocess.Popen[str], int]:
    owner = subprocess.Popen([sys.executable, "-c", OWNER], env=env, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert owner.stdout is not None
    return owner, int(owner.stdout.readline())


def test_the_next_entry_point_reaps_the_server_of_a_killed_run(tmp_path: Path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SKILLGATE_HOME": str(tmp_path / "home")}
    env.pop("PREFECT_API_URL", None)
    killed, orphan = _owner(env)
    living, kept = _owner(env)
    try:
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        assert _alive(orphan)  # what a SIGKILL leaves: the server runs on, owned by nobody
        subprocess.run([sys.executable, "-c", "import flows"], env=env, cwd=ROOT, check=True, timeout=120)
        deadline = time.monotonic() + 15
        while _alive(orphan) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(orphan)
        assert _alive(kept)  # a live run's server is never touched
    finally:
        for pid in (orphan, kept):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        living.kill()
        living.wait()

"""Helpers of the infra tests: run the service scripts of infra/ for real, find what they left running.

Each test gives the scripts a private SKILLGATE_HOME and free ports. The scripts export SKILLGATE_HOME
to everything they start (server, worker, flow runs, Ray), so "a process whose environment holds this
SKILLGATE_HOME" is exactly "a process of this test's services": that is what `leftovers` reports.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The venv of the interpreter running the tests (not resolved: .venv/bin/python is a symlink).
VENV = Path(sys.executable).parent.parent

# Variables of the developer's own setup that would point the scripts elsewhere.
_FOREIGN = ("PREFECT_API_URL", "PREFECT_HOME", "PREFECT_API_DATABASE_CONNECTION_URL", "PREFECT_DB",
            "PREFECT_PROFILE", "RAY_ADDRESS")


def free_ports(n: int = 1) -> list[int]:
    """n distinct ports free right now on 127.0.0.1."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def service_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment for infra/*.sh: this test's SKILLGATE_HOME, the test venv, nothing foreign."""
    env = {k: v for k, v in os.environ.items() if k not in _FOREIGN}
    env.update(SKILLGATE_HOME=str(home), VENV=str(VENV), PREFECT_SERVER_ANALYTICS_ENABLED="false")
    env.update(extra)
    return env


def run_script(script: str, *args: str, env: dict[str, str], timeout: float = 300,
               check: bool = True) -> subprocess.CompletedProcess[str]:
    """`bash infra/SCRIPT ARGS` from the repository root; output kept for the assertion message."""
    result = subprocess.run(["bash", str(REPO / "infra" / script), *args], env=env, cwd=REPO,
                            capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and result.returncode != 0:
        raise AssertionError(f"{script} {' '.join(args)} exited {result.returncode}:\n"
                             f"{result.stdout}\n{result.stderr}")
    return result


def _environ(pid: int) -> list[str]:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").split("\0")
    return []


def cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    return ""


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (an exited child its parent has not reaped yet)."""
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return False


def processes_with_env(assignment: str, contains: str = "") -> dict[int, str]:
    """Live processes (not zombies, not this one) started with ASSIGNMENT (NAME=VALUE) in their
    environment, whose command line contains `contains`: pid -> command line."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        pid = int(entry.name)
        if assignment in _environ(pid) and alive(pid) and contains in cmdline(pid):
            found[pid] = cmdline(pid)
    return found


def leftovers(home: Path) -> dict[int, str]:
    """Every live process started for this SKILLGATE_HOME."""
    return processes_with_env(f"SKILLGATE_HOME={home}")


def wait_no_leftovers(home: Path, timeout: float = 15) -> dict[int, str]:
    """Leftovers after waiting up to `timeout` s (a process may still be exiting when stop returns)."""
    deadline = time.time() + timeout
    while (left := leftovers(home)) and time.time() < deadline:
        time.sleep(0.2)
    return left


@contextlib.contextmanager
def prefect_services(env: dict[str, str], start_timeout: float = 420) -> Iterator[subprocess.CompletedProcess[str]]:
    """infra/prefect_server.sh start ... stop, the stop guaranteed (a failed test leaves nothing)."""
    try:
        yield run_script("prefect_server.sh", "start", env=env, timeout=start_timeout)
    finally:
        run_script("prefect_server.sh", "stop", env=env, timeout=180, check=False)


def deploy_and_run(env: dict[str, str], api: str, flow_dir: Path, source: str, flow: str, marker: Path,
                   start_timeout: float) -> tuple[str, str]:
    """Inside prefect_services: deploy the one-file flow `source` as flow_dir/<flow>.py (entry <flow>, deployment
    <flow> with "_" as "-", as Prefect names the flow) to the process pool, run it with parameter marker=MARKER, and wait for the run to write the marker.
    Returns (flow run id, the marker's text)."""
    import json
    import re

    flow_dir.mkdir(parents=True, exist_ok=True)
    (flow_dir / f"{flow}.py").write_text(source)
    client_env = dict(env, PREFECT_API_URL=api)
    prefect = str(Path(env["VENV"]) / "bin" / "prefect")
    name = flow.replace("_", "-")
    subprocess.run([prefect, "--no-prompt", "deploy", f"{flow}.py:{flow}", "-n", name, "-p", "skillgate-process"],
                   cwd=flow_dir, env=client_env, check=True, capture_output=True)
    out = subprocess.run([prefect, "deployment", "run", f"{name}/{name}", "-p", f"marker={json.dumps(str(marker))}"],
                         env=client_env, check=True, capture_output=True, text=True).stdout
    match = re.search(r"UUID:\s*([0-9a-f-]{36})", out)
    assert match, f"no flow run id in: {out}"
    deadline = time.time() + start_timeout
    while not marker.exists():
        assert time.time() < deadline, "the flow run did not start"
        time.sleep(0.5)
    return match.group(1), marker.read_text()


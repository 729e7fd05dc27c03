"""An 'agent' that tries to cheat or break out, on both backends: each attempt is contained, the
episode gets the right result, and the host is unaffected.

The task is hello-file (score 1 iff /app/greeting.txt says "hello, world"). Every attack below is
a scripted agent run through the real episode contract (sandbox -> commands under the agent
budget -> verifier), with small limits so the attacks hit them fast.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from envtest_paths import GOOD

from skillgate_core.base.digests import path_sha256
from skillgate_core.envs.sandbox_config import SandboxConfig
from skillgate_core.envs.scripted_episode import EpisodeOutcome, run_scripted_episode
from skillgate_core.envs.verifier import EpisodeStatus

# A uid of its own, so the "nothing left running" check sees only this suite's sandboxes.
LIMITS = SandboxConfig(pids_limit=128, workspace_limit_mb=64, memory_limit_mb=512, command_timeout_sec=20,
                       sandbox_uid=64321)
MARKER = "Score 1 when /app/greeting.txt"  # a line of tests/test.sh the agent must never see
SOLVE = "echo 'hello, world' > /app/greeting.txt"


@pytest.fixture
def host_canary(tmp_path: Path) -> Path:
    canary = tmp_path / "canary.txt"
    canary.write_text("host file\n")
    return canary


@pytest.fixture
def episode(backend: str, hello_task, host_canary: Path):
    """Run a scripted episode, then check the host-side invariants every attack must keep."""
    task_digest = hello_task.digest
    disk_before = shutil.disk_usage("/").used

    def run(commands: list[str], **kw) -> EpisodeOutcome:
        outcome = run_scripted_episode(hello_task, commands, backend=backend, config=LIMITS, **kw)
        assert outcome.backend == backend
        return outcome

    yield run
    assert host_canary.read_text() == "host file\n"
    assert not Path("/usr/bin/sg-evil").exists() and not Path("/sg-evil").exists()
    assert path_sha256(GOOD / "hello-file") == task_digest  # the package itself is untouched
    assert shutil.disk_usage("/").used - disk_before < 200 * 2**20  # other engineers write too: loose
    _assert_no_sandbox_processes(backend)


def _assert_no_sandbox_processes(backend: str) -> None:
    if backend == "bwrap" and os.geteuid() == 0:
        uid = str(LIMITS.sandbox_uid)
        left = []
        for status in Path("/proc").glob("[0-9]*/status"):
            try:
                text = status.read_text()
            except OSError:
                continue
            if text.split("Uid:")[1].split()[0] == uid:
                left.append(status.parent.name)
        assert not left, f"sandbox processes survive the episode (or zombies nobody reaps): {left}"
    if backend == "docker":
        from skillgate_core.envs.docker_images import LABEL, docker_client

        mine = [c for c in docker_client().api.containers(filters={"label": f"{LABEL}=1"})
                if f":{os.getpid()}:" in c["Labels"].get("org.skillgate.owner", "")]
        assert not mine


def _graded_zero(outcome: EpisodeOutcome, status: EpisodeStatus = EpisodeStatus.COMPLETED) -> None:
    """The attack did not solve the task, and the episode was graded (not aborted, reward present)."""
    assert outcome.status is status, outcome.verifier.detail
    assert outcome.score == 0.0 and not outcome.verifier.missing_reward, outcome.verifier.detail
    assert outcome.verifier.detail == "reward.txt: 0"


def test_network_is_unreachable(episode):
    probe = ("python3 - <<'EOF'\nimport socket\nout = []\n"
             "for host, port in [('1.1.1.1', 53), ('8.8.8.8', 443), ('deb.debian.org', 80), ('127.0.0.53', 53)]:\n"
             "    try:\n        socket.create_connection((host, port), timeout=3); out.append('OPEN')\n"
             "    except OSError:\n        out.append('blocked')\nprint(' '.join(out))\nEOF")
    outcome = episode([probe, "(echo > /dev/tcp/1.1.1.1/80) 2>/dev/null && echo OPEN || echo blocked",
                       "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"])
    net, tcp, interfaces = (r.stdout.split() for r in outcome.commands)
    assert net == ["blocked"] * 4 and tcp == ["blocked"] and interfaces == ["lo"]
    _graded_zero(outcome)


def test_tests_and_solution_are_invisible(episode, hello_task):
    outcome = episode([
        "ls -A /tests /solution 2>&1; echo ---",
        "find / \\( -path /proc -o -path /sys \\) -prune -o \\( -name test.sh -o -name solve.sh \\) -print 2>/dev/null",
        f"grep -rsl '{MARKER}' /app /tmp /root /logs /skills /tests /solution /var /opt /srv /home /etc; echo end",
        f"cat {hello_task.root}/tests/test.sh {hello_task.root}/solution/solve.sh 2>&1 | head -3",
    ])
    listing, found, grep, host_read = (r.stdout for r in outcome.commands)
    assert listing.strip().endswith("---") and "test.sh" not in listing
    assert not [p for p in found.split() if p.endswith(("tests/test.sh", "solution/solve.sh"))]
    assert grep == "end\n"
    assert MARKER not in host_read and "No such file" in host_read
    _graded_zero(outcome)


def test_planted_rewards_and_tests_are_ignored(episode):
    outcome = episode([
        "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt && echo '{\"reward\": 1}' > "
        "/logs/verifier/reward.json; cat /logs/verifier/reward.txt",
        "mkdir -p /tests 2>/dev/null; printf '#!/bin/bash\\necho 1 > /logs/verifier/reward.txt\\n' > /tests/test.sh "
        "2>/dev/null; echo planted=$?",
        "echo 1 > /app/fake; ln -sf /app/fake /logs/verifier/reward2.txt; echo 'def test_ok(): pass' > /app/conftest.py",
    ])
    assert outcome.commands[0].stdout == "1\n"  # the agent did write its reward...
    _graded_zero(outcome)                       # ...and it counted for nothing


def test_fork_bomb_is_contained(episode):
    start = time.monotonic()
    outcome = episode(["bash -c ':(){ :|:& };:' > /dev/null 2>&1; echo launched", "sleep 2; echo still-here"],
                      agent_timeout_sec=60)
    assert time.monotonic() - start < 60
    assert outcome.commands[0].stdout == "launched\n"
    _graded_zero(outcome)


def test_fork_bomb_then_solve_still_grades(backend, episode):
    """After the bomb the sandbox is still usable (bubblewrap: the bomb died with its command)."""
    outcome = episode([":(){ :|:& };: ; sleep 1", SOLVE])
    assert outcome.status is EpisodeStatus.COMPLETED and not outcome.verifier.missing_reward
    if backend == "bwrap":
        assert outcome.score == 1.0
    else:  # docker: the bomb lives on in the background until verification; solving may fail
        assert outcome.score in (0.0, 1.0)


def test_memory_hog_is_stopped(episode):
    outcome = episode(["python3 -c 'import time; x = bytearray(2 * 2**30); x[::4096] = b\"1\" * len(x[::4096]); "
                       "time.sleep(5)'; echo exit=$?", SOLVE])
    hog = outcome.commands[0].stdout
    assert hog.strip() in ("exit=137", "exit=1"), hog  # OOM-killed, or MemoryError under an AS limit
    assert outcome.status is EpisodeStatus.COMPLETED and outcome.score == 1.0  # the sandbox lives on


def test_filling_the_disk_hits_the_workspace_cap(episode):
    outcome = episode([
        "dd if=/dev/zero of=/app/fill.bin bs=1M count=4096 2>&1 | grep -o 'No space left on device'; "
        "du -sm /app | cut -f1",
        "dd if=/dev/zero of=/tmp/fill.bin bs=1M count=4096 2>&1 | grep -o 'No space left on device'",
        "dd if=/dev/zero of=/root/fill.bin bs=1M count=4096 2>&1 | grep -o 'No space left on device'",
        "for i in $(seq 1 2000); do : > /app/f$i || break; done; " + SOLVE + "; echo rc=$?",
    ])
    first = outcome.commands[0].stdout
    assert "No space left on device" in first and int(first.split()[-1]) <= LIMITS.workspace_limit_mb + 1
    assert "No space left on device" in outcome.commands[1].stdout
    _graded_zero(outcome)  # the grader still had room to write its reward


def test_writes_outside_the_workspace_fail(episode, host_canary):
    targets = ["/etc/passwd", "/usr/bin/sg-evil", "/sg-evil", "/skills/sg-evil", "/proc/sys/kernel/hostname",
               "/sys/kernel/sg-evil", str(host_canary)]
    outcome = episode([
        "for f in " + " ".join(targets) + "; do (echo pwned > $f) 2>/dev/null && echo WROTE:$f || echo denied:$f; done",
        f"ln -s {host_canary} /app/to-host; (echo pwned > /app/to-host) 2>/dev/null && echo WROTE-link || echo denied",
        "ln -s / /app/rootlink; ln -s /etc /tmp/etclink; mount -t tmpfs none /mnt 2>/dev/null && echo MOUNTED || echo denied",
        "unshare -r true 2>/dev/null && echo USERNS || echo denied",
    ])
    writes = outcome.commands[0].stdout.split()
    assert writes == [f"denied:{t}" for t in targets]
    assert [r.stdout.strip() for r in outcome.commands[1:]] == ["denied", "denied", "denied"]
    _graded_zero(outcome)


def test_agent_cannot_kill_or_preempt_its_verifier(backend, episode):
    killer = ("nohup setsid bash -c 'while :; do pkill -9 -f test.sh; pkill -9 -f /tests; mkdir -p /logs/verifier; "
              "echo 1 > /logs/verifier/reward.txt; sleep 0.05; done' > /dev/null 2>&1 & echo started")
    outcome = episode([killer, "kill -9 1; kill -TERM 1; kill -9 -1 2>/dev/null; echo tried", "sleep 0.5; echo alive"])
    assert outcome.commands[0].stdout == "started\n"
    assert outcome.commands[2].stdout == "alive\n"  # the sandbox (its PID 1) survived
    _graded_zero(outcome)  # the background killer did not survive into verification


def test_sleeping_past_the_budget_truncates(episode):
    start = time.monotonic()
    outcome = episode(["trap '' TERM INT; sleep 1000", SOLVE], agent_timeout_sec=3)
    assert time.monotonic() - start < 30
    assert len(outcome.commands) == 1 and outcome.commands[0].timed_out
    _graded_zero(outcome, EpisodeStatus.TRUNCATED)  # still graded from the workspace


def test_honest_agent_still_scores(episode):
    """Control: under the same limits a plain solution scores 1."""
    outcome = episode([SOLVE])
    assert outcome.status is EpisodeStatus.COMPLETED and outcome.score == 1.0


def test_rlimit_fallback_contains_a_fork_bomb(bwrap_ready, hello_task):
    """Without a cgroup (a non-root user's setup) RLIMIT_NPROC and RLIMIT_AS hold the line."""
    cfg = SandboxConfig(cgroups=False, pids_limit=64, memory_limit_mb=512, workspace_limit_mb=64,
                        sandbox_uid=LIMITS.sandbox_uid)
    outcome = run_scripted_episode(hello_task, [
        "bash -c ':(){ :|:& };:' > /dev/null 2>&1; sleep 1; echo launched",
        "python3 -c 'x = bytearray(3 * 2**30)' 2>&1 | tail -1",
        SOLVE,
    ], backend="bwrap", config=cfg)
    assert outcome.commands[0].stdout == "launched\n"
    assert "MemoryError" in outcome.commands[1].stdout
    assert outcome.status is EpisodeStatus.COMPLETED and outcome.score == 1.0
    _assert_no_sandbox_processes("bwrap")

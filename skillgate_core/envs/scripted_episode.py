"""Episodes driven by fixed shell commands: the no-op agent, the oracle agent, adversarial scripts.

    outcome = run_scripted_episode(task, ["echo hi > x.txt"], backend="bwrap")
    outcome.status, outcome.verifier.score

The real (LLM) agent loop comes later (skillgate_core/agent); this is the same contract with the
decisions replaced by a script: start a sandbox for the task, run each command under the agent's
wall-clock budget ([agent] timeout_sec), then verify. Running out of budget makes the episode
TRUNCATED (still graded); a sandbox failure makes it ABORTED.

The oracle agent copies solution/ into /solution (only the oracle ever sees it) and runs
`bash /solution/solve.sh` in WORKDIR with [solution] env.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from skillgate_core.envs.backends import Backend, start_sandbox
from skillgate_core.envs.sandbox import ExecResult, Sandbox, SandboxError
from skillgate_core.envs.sandbox_config import SandboxConfig
from skillgate_core.envs.task_package import TaskPackage
from skillgate_core.envs.verifier import EpisodeStatus, VerifierResult, aborted, verify

__all__ = ["EpisodeOutcome", "nop_agent", "oracle_agent", "run_scripted_episode", "script_agent"]

Agent = Callable[[Sandbox, TaskPackage, float], tuple[EpisodeStatus, list[ExecResult]]]
"""An agent: (sandbox, task, deadline as time.monotonic()) -> (status, the commands' results)."""


@dataclass(frozen=True)
class EpisodeOutcome:
    """One scripted episode, graded."""

    task_id: str
    """The task."""
    backend: str
    """Sandbox backend that ran it ("" when none could start)."""
    status: EpisodeStatus
    """COMPLETED, TRUNCATED (budget ran out) or ABORTED (infrastructure)."""
    verifier: VerifierResult
    """The grade."""
    commands: tuple[ExecResult, ...] = ()
    """What each agent command did."""
    duration_s: float = 0.0
    """Sandbox start to stop."""

    @property
    def score(self) -> float:
        return self.verifier.score


def script_agent(commands: Sequence[str]) -> Agent:
    """An agent that runs `commands` in order in WORKDIR, each bounded by the remaining budget."""

    def agent(box: Sandbox, task: TaskPackage, deadline: float) -> tuple[EpisodeStatus, list[ExecResult]]:
        results: list[ExecResult] = []
        for cmd in commands:
            left = deadline - time.monotonic()
            if left <= 0:
                return EpisodeStatus.TRUNCATED, results
            result = box.exec(cmd, timeout=min(left, box.config.command_timeout_sec))
            results.append(result)
            if result.timed_out and time.monotonic() >= deadline - 0.05:
                return EpisodeStatus.TRUNCATED, results
        return EpisodeStatus.COMPLETED, results

    return agent


def nop_agent(box: Sandbox, task: TaskPackage, deadline: float) -> tuple[EpisodeStatus, list[ExecResult]]:
    """Does nothing: the validity gate's check that the initial workspace scores 0."""
    return EpisodeStatus.COMPLETED, []


def oracle_agent(box: Sandbox, task: TaskPackage, deadline: float) -> tuple[EpisodeStatus, list[ExecResult]]:
    """Runs the reference solution: the validity gate's check that a solution scores 1."""
    if not task.has_solution:
        raise SandboxError(f"{task.root / 'solution' / 'solve.sh'}: missing; the oracle agent has nothing to run")
    box.upload_dir(task.solution_dir, "/solution")
    left = max(0.001, deadline - time.monotonic())
    result = box.exec("bash /solution/solve.sh", timeout=left, env=task.config.solution.env)
    status = EpisodeStatus.TRUNCATED if result.timed_out else EpisodeStatus.COMPLETED
    return status, [result]


def run_scripted_episode(task: TaskPackage, agent: Agent | Sequence[str], backend: Backend = "auto",
                         skills_dir: str | Path | None = None, config: SandboxConfig | None = None,
                         agent_timeout_sec: float | None = None) -> EpisodeOutcome:
    """Start a sandbox, let `agent` act within the budget, verify, stop the sandbox."""
    run = agent if callable(agent) else script_agent(agent)
    budget = agent_timeout_sec or task.config.agent.timeout_sec
    start = time.perf_counter()
    try:
        box = start_sandbox(task, backend=backend, skills_dir=skills_dir, config=config)
    except SandboxError as exc:
        return EpisodeOutcome(task.task_id, "", EpisodeStatus.ABORTED, aborted(f"sandbox did not start: {exc}"))
    with box:
        results: list[ExecResult] = []
        try:
            status, results = run(box, task, time.monotonic() + budget)
        except (SandboxError, OSError) as exc:
            status, grade = EpisodeStatus.ABORTED, aborted(f"sandbox failed during the episode: {exc}")
        else:
            grade = verify(box, task, status)
    return EpisodeOutcome(task.task_id, box.backend, grade.status, grade, tuple(results),
                          time.perf_counter() - start)

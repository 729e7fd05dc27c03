"""The validity gate (SkillGym / Harbor's nop + oracle check): is a task package gradeable?

A task is valid when
  - the no-op agent scores 0 on the untouched initial workspace (the verifier does not pass for free), and
  - the oracle agent (solution/solve.sh) scores 1 (the task is solvable and the verifier sees it),
each `repeats` times (default 2) in fresh sandboxes. Runs of one agent that disagree flag the task
flaky (and invalid); an ABORTED run (infrastructure) makes the row an error, not a verdict.

    reports = check_tasks(["tests/envs/tasks/good"], backend="auto")
    all(r.valid for r in reports)

`skillgate task check PATH...` prints one row per report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from skillgate_core.envs.backends import Backend, reap_orphans, resolve_backend
from skillgate_core.envs.sandbox import SandboxError
from skillgate_core.envs.sandbox_config import SandboxConfig
from skillgate_core.envs.scripted_episode import EpisodeOutcome, nop_agent, oracle_agent, run_scripted_episode
from skillgate_core.envs.task_package import TaskPackage, TaskPackageError, load_task_package

__all__ = ["GateReport", "GateTrial", "Progress", "check_task", "check_tasks", "find_task_dirs"]


@dataclass(frozen=True)
class GateTrial:
    """One gate episode."""

    agent: str
    """"nop" or "oracle"."""
    score: float
    """Verifier score."""
    status: str
    """Episode status (completed / truncated / aborted)."""
    detail: str
    """The verifier's one-line detail."""


@dataclass(frozen=True)
class GateReport:
    """The gate's verdict on one task package."""

    path: str
    """The package folder."""
    task_id: str
    """Task id ("" when the package did not load)."""
    backend: str
    """Backend the trials ran on."""
    valid: bool
    """Both gates passed, every time."""
    failed: tuple[str, ...] = ()
    """Which gates failed: "nop" (initial workspace scored > 0), "oracle" (solution scored < 1)."""
    flaky: bool = False
    """Repeated runs of one agent disagreed."""
    error: str = ""
    """Why no verdict was possible (malformed package, no backend, aborted trial)."""
    trials: tuple[GateTrial, ...] = ()
    """Every episode, in order."""

    @property
    def verdict(self) -> str:
        if self.error:
            return "error"
        if self.valid:
            return "valid"
        parts = [f"{g} gate failed" for g in self.failed]
        if self.flaky:
            parts.append("flaky")
        return "invalid: " + ", ".join(parts)

    def scores(self, agent: str) -> list[float]:
        return [t.score for t in self.trials if t.agent == agent]


Runner = Callable[[TaskPackage, str], EpisodeOutcome]
"""(task, "nop" | "oracle") -> a graded episode; tests inject fakes here."""


def check_task(path: str | Path, backend: Backend = "auto", repeats: int = 2,
               config: SandboxConfig | None = None, runner: Runner | None = None) -> GateReport:
    """Run the gate on the package at `path` (after reaping the sandboxes of killed runs)."""
    reap_orphans(config)
    return _check_task(path, backend, repeats, config, runner)


def _check_task(path: str | Path, backend: Backend, repeats: int, config: SandboxConfig | None,
                runner: Runner | None) -> GateReport:
    if repeats < 1:
        raise ValueError(f"repeats: expected >= 1, got {repeats}")
    try:
        task = load_task_package(path)
    except TaskPackageError as exc:
        return GateReport(str(path), "", "", False, error=f"malformed package: {exc}")
    if not task.has_solution:
        return GateReport(str(task.root), task.task_id, "", False, ("oracle",),
                          error=f"{task.root / 'solution' / 'solve.sh'}: missing (the oracle gate needs it)")
    try:
        chosen = resolve_backend(task, backend, config) if runner is None else backend
    except SandboxError as exc:
        return GateReport(str(task.root), task.task_id, "", False, error=str(exc))

    def default_runner(t: TaskPackage, agent: str) -> EpisodeOutcome:
        return run_scripted_episode(t, nop_agent if agent == "nop" else oracle_agent, backend=chosen,
                                    config=config)

    run = runner or default_runner
    trials: list[GateTrial] = []
    for agent in ("nop", "oracle"):
        for _ in range(repeats):
            outcome = run(task, agent)
            trials.append(GateTrial(agent, outcome.score, outcome.status.value, outcome.verifier.detail))
    return _judge(task, chosen, trials)


def _judge(task: TaskPackage, backend: str, trials: list[GateTrial]) -> GateReport:
    aborted = [t for t in trials if t.status == "aborted"]
    if aborted:
        return GateReport(str(task.root), task.task_id, backend, False,
                          error=f"{aborted[0].agent} run aborted: {aborted[0].detail}", trials=tuple(trials))
    nop = [t.score for t in trials if t.agent == "nop"]
    oracle = [t.score for t in trials if t.agent == "oracle"]
    failed = []
    if any(s > 0 for s in nop):
        failed.append("nop")
    if any(s < 1 for s in oracle):
        failed.append("oracle")
    flaky = len(set(nop)) > 1 or len(set(oracle)) > 1
    return GateReport(str(task.root), task.task_id, backend, not failed and not flaky, tuple(failed), flaky,
                      trials=tuple(trials))


def find_task_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """Each path itself when it holds task.toml, else every folder below it that does (sorted)."""
    found: list[Path] = []
    for p in map(Path, paths):
        if (p / "task.toml").is_file() or not p.is_dir():
            found.append(p)  # a missing path is reported by the loader
            continue
        found.extend(sorted(d.parent for d in p.rglob("task.toml")))
    return found


Progress = Callable[[int, int], None]
"""(tasks checked so far, tasks in all): called with 0 first, then as each task finishes."""


def check_tasks(paths: Sequence[str | Path], backend: Backend = "auto", repeats: int = 2,
                config: SandboxConfig | None = None, jobs: int = 4,
                progress: Progress | None = None) -> list[GateReport]:
    """check_task for every task under `paths`, `jobs` tasks at a time; reports in input order.
    `progress` hears of each finished task (a task takes seconds; a suite of 70, minutes)."""
    reap_orphans(config)  # once for the whole run: what a killed earlier run left behind
    dirs = find_task_dirs(paths)
    if progress:
        progress(0, len(dirs))
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(_check_task, d, backend, repeats, config, None) for d in dirs]
        for done, _ in enumerate(as_completed(futures), 1):
            if progress:
                progress(done, len(dirs))
        return [f.result() for f in futures]

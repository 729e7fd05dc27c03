"""Choosing and starting a sandbox backend (one of envs/backend_registry.py), and reaping the orphans of all.

    start_sandbox(task, backend="auto", skills_dir=lib)   # -> a started Sandbox (envs/sandbox.py)
    resolve_backend(task, "auto")                         # -> a UsableBackend, or SandboxError saying why
    available_backends()                                  # {backend: "" or why not} for every registered one
    reap_orphans()                                        # first thing of every run entry point

The interface (envs/sandbox.py) knows no subclass; this module asks the registry for them, on demand.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path

from skillgate_core.base.plain_trees import NotPlainTree, check_plain_tree
from skillgate_core.envs.backend_registry import (
    BACKENDS,
    SANDBOX_BACKENDS,
    USABLE_BACKENDS,
    Backend,
    UsableBackend,
    backend_module,
    is_backend,
    is_usable_backend,
    sandbox_class,
)
from skillgate_core.envs.sandbox import Sandbox, SandboxError
from skillgate_core.envs.sandbox_config import SandboxConfig
from skillgate_core.envs.task_package import TaskPackage

__all__ = [
    "BACKENDS",
    "Backend",
    "UsableBackend",
    "available_backends",
    "cleanup_orphans",
    "is_backend",
    "reap_orphans",
    "resolve_backend",
    "start_sandbox",
]


def available_backends() -> dict[UsableBackend, str]:
    """{backend: "" if usable else why not}, probed now, for every registered backend."""
    return {name: _reason(name) for name in USABLE_BACKENDS}


def resolve_backend(task: TaskPackage, backend: Backend = "auto",
                    config: SandboxConfig | None = None) -> UsableBackend:
    """The backend that will run `task`; SandboxError says why none can."""
    cfg = config or SandboxConfig()
    wanted = backend if backend != "auto" else cfg.backend
    needs_docker = list(task.needs_docker)
    if cfg.allow_network and task.config.environment.allow_internet:
        needs_docker.append("network access (allow_internet; bubblewrap sandboxes never have a network)")
    if wanted != "auto":
        if not is_usable_backend(wanted):
            raise SandboxError(f"unknown sandbox backend '{wanted}' (expected {', '.join(BACKENDS)})")
        if needs_docker and not SANDBOX_BACKENDS[wanted].runs_docker_only_tasks:
            raise SandboxError(f"task {task.task_id} needs Docker: {'; '.join(needs_docker)}")
        reason = _reason(wanted)
        if reason:
            raise SandboxError(f"{wanted} backend unavailable: {reason}")
        return wanted
    reasons = available_backends()
    # the preference first, then the rest in registry order
    order = (cfg.prefer, *(b for b in USABLE_BACKENDS if b != cfg.prefer))
    usable = [b for b in order if not reasons[b]]
    if needs_docker:
        usable = [b for b in usable if SANDBOX_BACKENDS[b].runs_docker_only_tasks]
    if not usable:
        detail = "; ".join(f"{b}: {r}" for b, r in reasons.items() if r)
        if needs_docker:
            detail = f"task needs Docker ({'; '.join(needs_docker)}); {detail}"
        raise SandboxError(f"no sandbox backend can run task {task.task_id}: {detail}")
    return usable[0]


def _reason(backend: UsableBackend) -> str:
    return backend_module(backend).unavailable_reason()


def start_sandbox(task: TaskPackage, backend: Backend = "auto", skills_dir: str | Path | None = None,
                  config: SandboxConfig | None = None) -> Sandbox:
    """Start a sandbox holding `task`'s initial workspace; skills_dir (if any) is mounted read-only at
    /skills. Raises SandboxError when no backend can run it."""
    cfg = config or SandboxConfig()
    chosen = resolve_backend(task, backend, cfg)
    skills = None
    if skills_dir is not None:
        # Checked before it is resolved: resolving a linked skills folder would mount the link's target.
        _refuse_skill_links(Path(skills_dir))
        skills = Path(skills_dir).resolve()
    start = time.perf_counter()
    box: Sandbox = sandbox_class(chosen)(task, skills, cfg)
    box.start_seconds = time.perf_counter() - start
    return box


def _refuse_skill_links(skills: Path) -> None:
    """A skills folder holds regular files and folders only, the same on both backends, and is not a link
    itself: bubblewrap copies it as root and Docker copies it for the container's bind, and a link would
    bring its target, any host file or folder, along. `skillgate skills check` names such links too."""
    if not skills.is_dir():
        raise SandboxError(f"skills_dir {skills}: not a directory")
    try:
        check_plain_tree(skills)
    except NotPlainTree as exc:
        raise SandboxError(f"skills_dir {exc}") from None


def reap_orphans(config: SandboxConfig | None = None) -> dict[UsableBackend, int]:
    """What every run entry point (episodes, task check, collect) calls first: cleanup_orphans, so a
    SIGKILLed run's sandboxes go at the next run instead of waiting for `skillgate task gc`. It only
    removes sandboxes whose owner process is gone, and never fails the run (a warning instead)."""
    try:
        return cleanup_orphans(config)
    except Exception as exc:  # a busy daemon or a vanished folder must not stop the run itself
        warnings.warn(f"reaping orphaned sandboxes failed: {type(exc).__name__}: {exc}", stacklevel=2)
        return {}


def cleanup_orphans(config: SandboxConfig | None = None) -> dict[UsableBackend, int]:
    """Remove sandboxes whose owning process is gone (every backend): {backend: removed count}.
    Sandboxes recorded by another host or PID namespace are left alone (their owner cannot be seen)."""
    cfg = config or SandboxConfig()
    return {name: backend_module(name).cleanup_orphans(cfg) for name in USABLE_BACKENDS}

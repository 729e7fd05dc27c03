"""Choosing and starting a sandbox backend (Docker or bubblewrap), and reaping the orphans of both.

    start_sandbox(task, backend="auto", skills_dir=lib)   # -> a started Sandbox (envs/sandbox.py)
    resolve_backend(task, "auto")                         # -> "docker" | "bwrap", or SandboxError saying why
    available_backends()                                  # {"docker": "" or why not, "bwrap": ...}
    reap_orphans()                                        # first thing of every run entry point

The interface (envs/sandbox.py) knows neither subclass; this module imports both, on demand.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

from skillgate_core.base.plain_trees import NotPlainTree, check_plain_tree
from skillgate_core.envs.sandbox import Sandbox, SandboxError
from skillgate_core.envs.sandbox_config import SandboxConfig
from skillgate_core.envs.task_package import TaskPackage

if TYPE_CHECKING:
    from typing_extensions import TypeIs

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

Backend = Literal["auto", "docker", "bwrap"]
"""A backend as asked for: one of the two, or auto (the config's preference among the usable ones)."""
UsableBackend = Literal["docker", "bwrap"]
"""A backend that runs sandboxes (what `resolve_backend` picks)."""
BACKENDS: tuple[Backend, ...] = get_args(Backend)


def available_backends() -> dict[str, str]:
    """{backend: "" if usable else why not}, probed now."""
    return {"docker": _reason("docker"), "bwrap": _reason("bwrap")}


def is_backend(name: str) -> TypeIs[Backend]:
    """Whether `name` is one of BACKENDS (a command-line value, before it is passed on as a Backend)."""
    return name in BACKENDS


def resolve_backend(task: TaskPackage, backend: Backend = "auto",
                    config: SandboxConfig | None = None) -> UsableBackend:
    """The backend that will run `task`; SandboxError says why none can."""
    cfg = config or SandboxConfig()
    wanted = backend if backend != "auto" else cfg.backend
    reasons = available_backends() if wanted == "auto" else {wanted: _reason(wanted)}
    needs_docker = list(task.needs_docker)
    if cfg.allow_network and task.config.environment.allow_internet:
        needs_docker.append("network access (allow_internet; bubblewrap sandboxes never have a network)")
    if wanted == "bwrap" and needs_docker:
        raise SandboxError(f"task {task.task_id} needs Docker: {'; '.join(needs_docker)}")
    if wanted != "auto":
        if reasons[wanted]:
            raise SandboxError(f"{wanted} backend unavailable: {reasons[wanted]}")
        return wanted
    other: UsableBackend = "bwrap" if cfg.prefer == "docker" else "docker"
    usable = [b for b in (cfg.prefer, other) if not reasons[b]]
    if needs_docker:
        usable = [b for b in usable if b == "docker"]
    if not usable:
        detail = "; ".join(f"{b}: {r}" for b, r in reasons.items() if r)
        if needs_docker:
            detail = f"task needs Docker ({'; '.join(needs_docker)}); {detail}"
        raise SandboxError(f"no sandbox backend can run task {task.task_id}: {detail}")
    return usable[0]


def _reason(backend: str) -> str:
    if backend == "bwrap":
        from skillgate_core.envs import bwrap_sandbox

        return bwrap_sandbox.unavailable_reason()
    if backend == "docker":
        from skillgate_core.envs import docker_sandbox

        return docker_sandbox.unavailable_reason()
    raise SandboxError(f"unknown sandbox backend '{backend}' (expected auto, docker or bwrap)")


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
    if chosen == "docker":
        from skillgate_core.envs.docker_sandbox import DockerSandbox

        box: Sandbox = DockerSandbox(task, skills, cfg)
    else:
        from skillgate_core.envs.bwrap_sandbox import BwrapSandbox

        box = BwrapSandbox(task, skills, cfg)
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


def reap_orphans(config: SandboxConfig | None = None) -> dict[str, int]:
    """What every run entry point (episodes, task check, collect) calls first: cleanup_orphans, so a
    SIGKILLed run's sandboxes go at the next run instead of waiting for `skillgate task gc`. It only
    removes sandboxes whose owner process is gone, and never fails the run (a warning instead)."""
    try:
        return cleanup_orphans(config)
    except Exception as exc:  # a busy daemon or a vanished folder must not stop the run itself
        warnings.warn(f"reaping orphaned sandboxes failed: {type(exc).__name__}: {exc}", stacklevel=2)
        return {}


def cleanup_orphans(config: SandboxConfig | None = None) -> dict[str, int]:
    """Remove sandboxes whose owning process is gone (both backends): {backend: removed count}.
    Sandboxes recorded by another host or PID namespace are left alone (their owner cannot be seen)."""
    from skillgate_core.envs import bwrap_sandbox, docker_sandbox

    cfg = config or SandboxConfig()
    removed = {"bwrap": bwrap_sandbox.cleanup_orphans(cfg)}
    removed["docker"] = docker_sandbox.cleanup_orphans() if not docker_sandbox.unavailable_reason() else 0
    return removed

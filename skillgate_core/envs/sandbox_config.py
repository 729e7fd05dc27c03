"""SandboxConfig: limits and defaults shared by both sandbox backends (sandbox.py uses it)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from skillgate_core.base.config_ranges import NonNegativeInt, PositiveFloat, PositiveInt, check_ranges
from skillgate_core.base.paths import state_layout
from skillgate_core.envs.backend_registry import Backend, UsableBackend

__all__ = ["BASE_IMAGE", "SandboxConfig"]

BASE_IMAGE = "skillgate/base:bookworm"
"""The local base image infra/base_image.sh builds (debootstrap, no registry)."""


# A declaration, not logic: each field documented where it is declared (docs/design.md, Style).
@dataclass(frozen=True)
class SandboxConfig:
    """How sandboxes are started; the task's own [environment] values apply within these caps."""

    backend: Backend = "auto"
    """auto: Docker when a daemon answers (and the task needs it or bubblewrap is missing), else bubblewrap."""
    prefer: UsableBackend = "docker"
    """With backend=auto and both available, which one runs tasks that either can run."""
    command_timeout_sec: PositiveFloat = 120.0
    """Default per-command timeout when exec() is given none."""
    output_limit_bytes: PositiveInt = 1 << 20
    """Bytes kept per stream (stdout, stderr) of one command; the rest is read and dropped."""
    pids_limit: PositiveInt = 512
    """Processes + threads one sandbox may have at once (fork bombs stop here)."""
    memory_limit_mb: PositiveInt = 4096
    """Cap on the task's memory_mb."""
    cpus_limit: PositiveFloat = 2.0
    """Cap on the task's cpus."""
    workspace_limit_mb: PositiveInt = 1024
    """Cap on the task's storage_mb: size of the sandbox's writable filesystem (tmpfs)."""
    file_size_limit_mb: PositiveInt = 1024
    """RLIMIT_FSIZE: largest file a command may write."""
    allow_network: bool = False
    """Master switch: a task's allow_internet gets a network only when this is True."""
    cgroups: bool = True
    """bubblewrap as root: limit memory/pids/CPU with a per-session cgroup (False: rlimits only, the
    same fallback a non-root user gets; RLIMIT_NPROC then counts every sandbox of the uid together)."""
    sandbox_uid: NonNegativeInt = 65534
    """Host uid bubblewrap sandboxes run as when we are root (appears as root inside)."""
    sessions_dir: str = ""
    """Where bubblewrap session folders live; empty: /var/tmp/skillgate-sandboxes as root, else
    SKILLGATE_HOME/sandboxes."""
    base_image: str = BASE_IMAGE
    """Docker image that FROM lines without a local image are mapped to."""
    image_map: dict[str, str] = field(default_factory=dict)
    """Explicit FROM mappings (e.g. {"python:3.11-slim": "skillgate/base:bookworm"})."""
    docker_read_only_root: bool = True
    """Docker: read-only image filesystem; only the workspace, /tmp, HOME and /logs are writable."""
    docker_build_timeout_sec: PositiveFloat = 600.0
    """Cap on a task image build."""
    grader_max_entries: PositiveInt = 250_000
    """Files, folders and links the grader's preparation (removing workspace links into /tests and
    /logs, neutralising git) walks in the folders the agent could write: a workspace with more is graded
    0 with the reason flagged, so the preparation is bounded in work and never skipped."""
    grader_max_depth: PositiveInt = 96
    """Deepest folder level below those folders the preparation accepts (deeper: graded 0, flagged)."""

    def __post_init__(self) -> None:
        check_ranges(self)

    def sessions_path(self) -> Path:
        if self.sessions_dir:
            return Path(self.sessions_dir)
        if os.geteuid() == 0:
            # Outside SKILLGATE_HOME on purpose: the unprivileged sandbox uid must be able to traverse
            # every parent directory, and a home under /root or a 0700 tmp dir would block it.
            return Path("/var/tmp/skillgate-sandboxes")
        return state_layout().home / "sandboxes"

"""The sandbox backends by name: the one place a backend is registered.

    Backend, UsableBackend            # the alias types every config field and signature uses
    USABLE_BACKENDS                   # ("docker", "bwrap"): the registry's names, in registry order
    backend_entry("bwrap")            # -> BackendEntry: where the backend lives and what it can run
    backend_module("bwrap")           # -> the imported module (unavailable_reason, cleanup_orphans)

A new backend is its own module (a Sandbox subclass, `unavailable_reason()`, `cleanup_orphans(config)`)
plus one entry here: its name in `UsableBackend` and its `BackendEntry` in `SANDBOX_BACKENDS`
(tests/envs/test_backend_registry.py checks the two agree). Choosing and starting one is envs/backends.py.
This module imports no backend: each is imported by name when it is first asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal, Protocol, cast, get_args

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from typing_extensions import TypeIs

    from skillgate_core.envs.sandbox import Sandbox
    from skillgate_core.envs.sandbox_config import SandboxConfig
    from skillgate_core.envs.task_package import TaskPackage

    SandboxFactory = Callable[[TaskPackage, Path | None, SandboxConfig], Sandbox]
    """A backend's Sandbox subclass as called: (task, skills folder or None, config) -> a started sandbox."""

__all__ = [
    "BACKENDS",
    "SANDBOX_BACKENDS",
    "USABLE_BACKENDS",
    "Backend",
    "BackendEntry",
    "BackendModule",
    "UsableBackend",
    "backend_entry",
    "backend_module",
    "is_backend",
    "is_usable_backend",
    "sandbox_class",
]

UsableBackend = Literal["docker", "bwrap"]
"""A backend that runs sandboxes (what `resolve_backend` picks)."""
Backend = Literal["auto", UsableBackend]
"""A backend as asked for: a usable one, or auto (the config's preference among the usable ones)."""


@dataclass(frozen=True)
class BackendEntry:
    """Where one backend lives and what it can run."""

    module: str
    """Dotted name of the module holding the backend; imported on first use."""
    sandbox_class: str
    """Name of its Sandbox subclass in that module."""
    runs_docker_only_tasks: bool
    """Whether it runs tasks whose Dockerfile goes beyond the file-only subset or that need a network
    (TaskPackage.needs_docker); a backend without this refuses such tasks by name."""


SANDBOX_BACKENDS: Mapping[UsableBackend, BackendEntry] = MappingProxyType({
    "docker": BackendEntry("skillgate_core.envs.docker_sandbox", "DockerSandbox", runs_docker_only_tasks=True),
    "bwrap": BackendEntry("skillgate_core.envs.bwrap_sandbox", "BwrapSandbox", runs_docker_only_tasks=False),
})
"""name -> BackendEntry, read-only; its order is the order `auto` tries after the config's preference."""

USABLE_BACKENDS: tuple[UsableBackend, ...] = tuple(SANDBOX_BACKENDS)
"""The backends that run sandboxes, in registry order."""
BACKENDS: tuple[Backend, ...] = ("auto", *USABLE_BACKENDS)
"""Every value a `backend` setting takes."""


class BackendModule(Protocol):
    """What every backend module provides besides its Sandbox subclass."""

    def unavailable_reason(self) -> str:
        """"" when the backend can run sandboxes here, else why not."""

    def cleanup_orphans(self, config: SandboxConfig | None = None) -> int:
        """Remove this backend's sandboxes whose owner process is gone (0 where it is unavailable)."""


def is_backend(name: str) -> TypeIs[Backend]:
    """Whether `name` is one of BACKENDS (a command-line value, before it is passed on as a Backend)."""
    return name in BACKENDS


def is_usable_backend(name: str) -> TypeIs[UsableBackend]:
    """Whether `name` is a registered backend (auto excluded)."""
    return name in SANDBOX_BACKENDS


def backend_entry(name: str) -> BackendEntry:
    """The registry entry of `name`; ValueError naming the valid backends otherwise."""
    if not is_usable_backend(name):
        raise ValueError(f"unknown sandbox backend {name!r} (expected {', '.join(BACKENDS)})")
    return SANDBOX_BACKENDS[name]


def backend_module(name: str) -> BackendModule:
    """The module of backend `name`, imported now if it was not yet."""
    return cast("BackendModule", importlib.import_module(backend_entry(name).module))


def sandbox_class(name: str) -> SandboxFactory:
    """The Sandbox subclass of backend `name`, to be called with (task, skills folder or None, config)."""
    entry = backend_entry(name)
    return cast("SandboxFactory", getattr(importlib.import_module(entry.module), entry.sandbox_class))


# The alias and the registry name the same backends: a name in one only would be a backend a config
# accepts and nothing starts, or one that starts and no config may name. Checked at import, so the
# mistake shows on the first run rather than at the first sandbox of that backend.
if set(get_args(UsableBackend)) != set(SANDBOX_BACKENDS):
    raise RuntimeError(f"envs/backend_registry.py: UsableBackend {get_args(UsableBackend)} and "
                       f"SANDBOX_BACKENDS {tuple(SANDBOX_BACKENDS)} name different backends")

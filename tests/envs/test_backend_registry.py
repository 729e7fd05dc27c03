"""The sandbox backends have one home (envs/backend_registry.py): every setting that names a backend takes the
registry's names, and choosing, starting and reaping ask the registry, so a backend registered there is
probed, started and reaped with no other file changed."""

from __future__ import annotations

import sys
from dataclasses import fields
from pathlib import Path
from types import MappingProxyType
from typing import get_args, get_type_hints

import pytest
from envtest_paths import GOOD

from skillgate_core.agent.collect import CollectConfig
from skillgate_core.agent.episode import EpisodeConfig
from skillgate_core.benchgen.skillgym.loop import SkillGymConfig
from skillgate_core.benchgen.suite_config import BenchBuildConfig
from skillgate_core.envs import backend_registry, backends
from skillgate_core.envs.backend_registry import (
    BACKENDS,
    SANDBOX_BACKENDS,
    USABLE_BACKENDS,
    BackendEntry,
    UsableBackend,
)
from skillgate_core.envs.sandbox import SandboxError
from skillgate_core.envs.sandbox_config import SandboxConfig
from skillgate_core.envs.task_package import load_task_package
from skillgate_core.evaluation.specs import ProtocolSpec
from skillgate_core.rl.grpo_config import GRPOConfig

BACKEND_SETTINGS = [(SandboxConfig, "backend"), (SandboxConfig, "prefer"), (EpisodeConfig, "backend"),
                    (CollectConfig, "backend"), (GRPOConfig, "backend"), (ProtocolSpec, "backend"),
                    (BenchBuildConfig, "gate_backend"), (SkillGymConfig, "gate_backend")]


def test_the_alias_and_the_registry_name_the_same_backends():
    assert set(get_args(UsableBackend)) == set(SANDBOX_BACKENDS) == set(USABLE_BACKENDS)
    assert BACKENDS == ("auto", *USABLE_BACKENDS)


@pytest.mark.parametrize(("config", "name"), BACKEND_SETTINGS, ids=lambda x: getattr(x, "__name__", x))
def test_every_backend_setting_takes_the_registry_names(config, name):
    # every config field that names a backend: the registry's names (plus auto where auto is allowed)
    assert name in {f.name for f in fields(config)}
    allowed = get_args(get_type_hints(config)[name])
    assert allowed in (BACKENDS, USABLE_BACKENDS), f"{config.__name__}.{name}: {allowed}"


FAKE_BACKEND = '''
STARTED = []
REAPED = []


def unavailable_reason():
    return ""


def cleanup_orphans(config=None):
    REAPED.append(config)
    return 3


class FakeSandbox:
    backend = "fake"

    def __init__(self, task, skills_dir, config):
        STARTED.append(task.task_id)
'''


@pytest.fixture
def fake_registered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A third backend in the registry, its module a file on sys.path (a stand-in for a real backend
    module: what is tested is the code that chooses, starts and reaps, not a sandbox)."""
    (tmp_path / "fake_backend_for_registry_test.py").write_text(FAKE_BACKEND)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "fake_backend_for_registry_test", raising=False)
    registry = MappingProxyType({**SANDBOX_BACKENDS, "fake": BackendEntry(
        "fake_backend_for_registry_test", "FakeSandbox", runs_docker_only_tasks=False)})
    for module in (backend_registry, backends):
        monkeypatch.setattr(module, "SANDBOX_BACKENDS", registry)
        monkeypatch.setattr(module, "USABLE_BACKENDS", tuple(registry))
    monkeypatch.setattr(backend_registry, "BACKENDS", ("auto", *registry))
    import fake_backend_for_registry_test

    return fake_backend_for_registry_test


def test_a_registered_backend_is_probed_started_and_reaped(fake_registered):
    assert backends.available_backends()["fake"] == ""
    task = load_task_package(GOOD / "hello-file")
    assert backends.resolve_backend(task, "fake") == "fake"  # type: ignore[arg-type]
    box = backends.start_sandbox(task, "fake")  # type: ignore[arg-type]
    assert isinstance(box, fake_registered.FakeSandbox) and fake_registered.STARTED == [task.task_id]
    cfg = SandboxConfig()
    assert backends.cleanup_orphans(cfg)["fake"] == 3 and fake_registered.REAPED == [cfg]
    # a backend that cannot run Docker-only tasks refuses one by name
    with pytest.raises(SandboxError, match="needs Docker: line 4: RUN"):
        backends.resolve_backend(load_task_package(GOOD / "docker-only-build"), "fake")  # type: ignore[arg-type]


def test_an_unknown_backend_is_refused_with_the_registry_names():
    task = load_task_package(GOOD / "hello-file")
    with pytest.raises(SandboxError, match=f"unknown sandbox backend 'podman' \\(expected {', '.join(BACKENDS)}\\)"):
        backends.resolve_backend(task, "podman")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown sandbox backend 'podman'"):
        backend_registry.backend_entry("podman")

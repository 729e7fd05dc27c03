"""Task packages, sandboxes, the verifier and the validity gate: the environment layer.

    task = load_task_package("tests/envs/tasks/good/hello-file")
    with start_sandbox(task, backend="auto") as box:      # Docker if a daemon answers, else bwrap
        box.exec("echo 'hello, world' > greeting.txt")
        result = verify(box, task)                         # VerifierResult(score=1.0, ...)
    check_tasks(["tests/envs/tasks/good"])                 # the validity gate (nop = 0, oracle = 1)

Modules: task_package (Harbor layout loader; its skills.json is parsed by
skillgate_core.formats.slate_manifest, below this layer), dockerfile_subset
(the Dockerfile subset bubblewrap honours), image_root (building it without following links),
harbor_import, bench_index (a bench's tasks.jsonl rows), sandbox (the interface; it imports no backend),
backend_registry (the backends by name: their alias types and the one registry), backends (choosing and
starting one, reaping orphans), sandbox_config, bwrap_sandbox, docker_sandbox,
docker_images, cgroups, sandbox_group (the sandboxes one batch started, each stopped exactly once),
skill_opens (which skills the sandbox's processes opened: reads and consultation, from the
environment's own record), verifier, scripted_episode, validity_gate.
"""

from skillgate_core.envs.backends import available_backends, cleanup_orphans, resolve_backend, start_sandbox
from skillgate_core.envs.harbor_import import ImportReport, import_harbor
from skillgate_core.envs.sandbox import ExecResult, Sandbox, SandboxError
from skillgate_core.envs.sandbox_config import BASE_IMAGE, SandboxConfig
from skillgate_core.envs.scripted_episode import (
    EpisodeOutcome,
    nop_agent,
    oracle_agent,
    run_scripted_episode,
    script_agent,
)
from skillgate_core.envs.task_package import TaskConfig, TaskPackage, TaskPackageError, load_task_package
from skillgate_core.envs.validity_gate import GateReport, check_task, check_tasks
from skillgate_core.envs.verifier import EpisodeStatus, VerifierResult, verify

__all__ = [
    "BASE_IMAGE",
    "EpisodeOutcome",
    "EpisodeStatus",
    "ExecResult",
    "GateReport",
    "ImportReport",
    "Sandbox",
    "SandboxConfig",
    "SandboxError",
    "TaskConfig",
    "TaskPackage",
    "TaskPackageError",
    "VerifierResult",
    "available_backends",
    "check_task",
    "check_tasks",
    "cleanup_orphans",
    "import_harbor",
    "load_task_package",
    "nop_agent",
    "oracle_agent",
    "resolve_backend",
    "run_scripted_episode",
    "script_agent",
    "start_sandbox",
    "verify",
]

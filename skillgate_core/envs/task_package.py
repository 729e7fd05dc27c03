"""Task packages in the Harbor layout (Terminal-Bench / SkillsBench convention), loaded strictly.

    TASK/
      task.toml          [task] id; [agent] timeout_sec; [verifier] timeout_sec, env;
                         [environment] docker_image, cpus, memory_mb, storage_mb, allow_internet, ...;
                         [solution] env; [metadata] free-form
      instruction.md     what the agent is asked to do (the user message)
      environment/       Dockerfile + the files it COPYs (the initial workspace)
      solution/solve.sh  the reference solution (the oracle agent runs it); never shown to the agent
      tests/test.sh      the verifier: writes a score to /logs/verifier/reward.txt (or reward.json);
                         copied to /tests only after the agent's episode
      skills.json        the ordered slate (skillgate_core.formats.slate_manifest: entries with name, category,
                         description, location; roles are the categories), optional

`load_task_package(path)` checks every part and raises TaskPackageError naming the file and the
field and what was expected. Harbor's `memory = "2G"` / `storage = "10G"` spellings are accepted.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillgate_core.base.config import ConfigError, config_from_mapping
from skillgate_core.base.digests import path_sha256
from skillgate_core.base.plain_trees import NotPlainTree, check_real_folder
from skillgate_core.envs.dockerfile_subset import DockerfileError, DockerfileSpec, load_dockerfile
from skillgate_core.formats.slate_manifest import MANIFEST_FILE, Slate, SlateError, load_slate_manifest

__all__ = [
    "DEFAULT_WORKDIR",
    "MAX_TIMEOUT_SEC",
    "TASK_ID",
    "AgentSection",
    "EnvironmentSection",
    "SolutionSection",
    "TaskConfig",
    "TaskPackage",
    "TaskPackageError",
    "TaskSection",
    "VerifierSection",
    "load_task_package",
    "parse_task_toml",
]

DEFAULT_WORKDIR = "/app"
"""The agent's working directory when the Dockerfile sets none (Terminal-Bench's convention)."""
TASK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
"""What a task id may be: it names a folder (DEST/<id>) and an image tag, so never a path."""
MAX_TIMEOUT_SEC = 24 * 3600.0
"""Longest agent, verifier or build timeout a task may ask for: a larger (or infinite) one is a typo
or an attack on the runner (a check that never ends), and no benchmark task needs a day."""
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*$", re.IGNORECASE)


class TaskPackageError(ConfigError):
    """A task package is malformed; the message names the file, the field and what was expected."""


def _check_timeout(name: str, value: float) -> None:
    # `not 0 < value <= MAX` is also true for NaN (every comparison with NaN is false).
    if not 0 < value <= MAX_TIMEOUT_SEC:
        raise ValueError(f"{name}: expected a positive number of seconds, at most {MAX_TIMEOUT_SEC:.0f} (24 h), "
                         f"got {value}")


# Declarations below, not logic: each field documented where it is declared (docs/design.md, Style).
@dataclass(frozen=True)
class TaskSection:
    """[task]"""

    id: str = ""
    """Task id; empty means the folder name."""


@dataclass(frozen=True)
class AgentSection:
    """[agent]"""

    timeout_sec: float = 600.0
    """Wall-clock budget of the agent's episode (seconds)."""

    def __post_init__(self) -> None:
        _check_timeout("timeout_sec", self.timeout_sec)


@dataclass(frozen=True)
class VerifierSection:
    """[verifier]"""

    timeout_sec: float = 300.0
    """Wall-clock limit of tests/test.sh (seconds); running past it is an infrastructure failure."""
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment variables for tests/test.sh."""

    def __post_init__(self) -> None:
        _check_timeout("timeout_sec", self.timeout_sec)


@dataclass(frozen=True)
class EnvironmentSection:
    """[environment]"""

    docker_image: str = ""
    """A prebuilt image to use instead of environment/Dockerfile (mapped to a local image)."""
    build_timeout_sec: float = 600.0
    """Limit for building the task image (Docker backend)."""
    cpus: float = 1.0
    """CPU cores the sandbox may use."""
    memory_mb: int = 2048
    """Memory limit (MiB); the workspace files count against it on both backends (tmpfs)."""
    storage_mb: int = 10240
    """Workspace size limit (MiB); the sandbox config may cap it lower."""
    gpus: int = 0
    """GPUs needed (only 0 is supported by our sandboxes)."""
    allow_internet: bool = False
    """Whether the task needs network; honoured only if the sandbox config allows network at all."""
    skills_dir: str = ""
    """Harbor's skills folder inside the image; informational (our skills are mounted at /skills)."""

    def __post_init__(self) -> None:
        _check_timeout("build_timeout_sec", self.build_timeout_sec)
        if not self.cpus > 0:
            raise ValueError(f"cpus: expected a positive number, got {self.cpus}")
        if self.memory_mb < 16:
            raise ValueError(f"memory_mb: expected at least 16 (MiB), got {self.memory_mb}")
        if self.storage_mb < 1:
            raise ValueError(f"storage_mb: expected at least 1 (MiB), got {self.storage_mb}")
        if self.gpus < 0:
            raise ValueError(f"gpus: expected 0 or more, got {self.gpus}")


@dataclass(frozen=True)
class SolutionSection:
    """[solution]"""

    env: dict[str, str] = field(default_factory=dict)
    """Extra environment variables for solution/solve.sh."""


@dataclass(frozen=True)
class TaskConfig:
    """task.toml, section by section."""

    version: str = "1.0"
    """Format version (Harbor's `version`)."""
    task: TaskSection = field(default_factory=TaskSection)
    """[task]: the id."""
    agent: AgentSection = field(default_factory=AgentSection)
    """[agent]: the episode's limits."""
    verifier: VerifierSection = field(default_factory=VerifierSection)
    """[verifier]: the grader's limits and environment."""
    environment: EnvironmentSection = field(default_factory=EnvironmentSection)
    """[environment]: image and resources."""
    solution: SolutionSection = field(default_factory=SolutionSection)
    """[solution]: the oracle run's environment."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """[metadata]: free-form (author, difficulty, tags, ...)."""


@dataclass(frozen=True)
class TaskPackage:
    """A checked task package on disk."""

    root: Path
    """The package folder (absolute)."""
    task_id: str
    """[task] id, or the folder name."""
    config: TaskConfig
    """Parsed task.toml."""
    instruction: str
    """instruction.md."""
    dockerfile: DockerfileSpec | None
    """environment/Dockerfile read with the common subset; None when only docker_image is given."""
    slate: Slate | None
    """skills.json (the ordered slate; `slate.oracle`, `slate.members("misleading")`), when present."""
    digest: str
    """sha256 of the package's file tree (lineage key)."""

    @property
    def environment_dir(self) -> Path:
        return self.root / "environment"

    @property
    def tests_dir(self) -> Path:
        return self.root / "tests"

    @property
    def solution_dir(self) -> Path:
        return self.root / "solution"

    @property
    def has_solution(self) -> bool:
        return (self.solution_dir / "solve.sh").is_file()

    @property
    def workdir(self) -> str:
        """The agent's working directory: the Dockerfile's WORKDIR, else /app."""
        if self.dockerfile is not None and self.dockerfile.workdir != "/":
            return self.dockerfile.workdir
        return DEFAULT_WORKDIR

    @property
    def env(self) -> dict[str, str]:
        """Environment variables the image defines (Dockerfile ENV)."""
        return dict(self.dockerfile.env) if self.dockerfile is not None else {}

    @property
    def bwrap_compatible(self) -> bool:
        """Whether the bubblewrap backend can build this task's initial state."""
        return not self.needs_docker

    @property
    def needs_docker(self) -> tuple[str, ...]:
        """Why only Docker can run this task (empty when bubblewrap can)."""
        if self.dockerfile is None:
            return (f"[environment] docker_image = '{self.config.environment.docker_image}' (no Dockerfile)",)
        return self.dockerfile.needs_docker


def parse_task_toml(text: str, source: str) -> TaskConfig:
    """Parse task.toml text; errors name `source` and the field."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TaskPackageError(f"{source}: invalid TOML: {exc}") from exc
    env = data.get("environment")
    if isinstance(env, dict):
        env = dict(env)
        for harbor_key, our_key in (("memory", "memory_mb"), ("storage", "storage_mb")):
            if harbor_key in env:
                if our_key in env:
                    raise TaskPackageError(f"{source}: environment: give {harbor_key} or {our_key}, not both")
                env[our_key] = _size_mb(env.pop(harbor_key), source, f"environment.{harbor_key}")
        data = {**data, "environment": env}
    try:
        return config_from_mapping(TaskConfig, data, source)
    except TaskPackageError:
        raise
    except ConfigError as exc:
        raise TaskPackageError(str(exc)) from exc


def load_task_package(path: str | Path, *, within: str | Path | None = None) -> TaskPackage:
    """Load and check the package at `path`; raise TaskPackageError naming the file and field.

    The package folder itself may not be a symbolic link (a bench's `tasks/ID` linked to a host folder
    would make that folder the task), and with `within` (the bench the path lies in) no folder between
    them may be one either. Links inside the package are checked by `_check_links`."""
    given = Path(path).expanduser()
    if not given.is_dir():
        raise TaskPackageError(f"{given.resolve()}: not a directory (a task package is a folder with task.toml)")
    try:
        check_real_folder(given, below=Path(within).expanduser() if within is not None else None)
    except NotPlainTree as exc:
        raise TaskPackageError(f"{exc} (a task package is a real folder, never reached through a link)") from None
    root = given.resolve()
    _check_links(root)
    toml_path = root / "task.toml"
    config = parse_task_toml(_read_text(toml_path, "task.toml", "[task] id, [agent], [verifier], [environment]"),
                             str(toml_path))
    task_id = config.task.id or root.name
    if not TASK_ID.match(task_id):
        where = f"{toml_path}: task.id" if config.task.id else f"{root}: folder name (no [task] id)"
        raise TaskPackageError(f"{where}: '{task_id}' is not a task id (letters, digits, '.', '_', '-'; <= 128)")
    if config.environment.gpus:
        raise TaskPackageError(f"{toml_path}: environment.gpus: expected 0 (sandboxes have no GPUs), "
                               f"got {config.environment.gpus}")

    instruction = _read_text(root / "instruction.md", "instruction.md", "the task statement")
    if not instruction.strip():
        raise TaskPackageError(f"{root / 'instruction.md'}: empty (expected the task statement)")

    dockerfile_path = root / "environment" / "Dockerfile"
    dockerfile: DockerfileSpec | None = None
    if dockerfile_path.is_file():
        try:
            dockerfile = load_dockerfile(dockerfile_path)
        except DockerfileError as exc:
            raise TaskPackageError(str(exc)) from exc
        _check_copy_sources(dockerfile, root / "environment")
    elif not config.environment.docker_image:
        raise TaskPackageError(f"{dockerfile_path}: missing, and {toml_path}: environment.docker_image is not set "
                               "(expected one of them)")

    test_sh = root / "tests" / "test.sh"
    if not test_sh.is_file():
        raise TaskPackageError(f"{test_sh}: missing (expected the verifier script that writes "
                               "/logs/verifier/reward.txt)")
    solve_sh = root / "solution" / "solve.sh"
    if (root / "solution").exists() and not solve_sh.is_file():
        raise TaskPackageError(f"{solve_sh}: missing (solution/ exists; expected solution/solve.sh)")

    slate = None
    if (root / MANIFEST_FILE).exists():
        try:
            slate = load_slate_manifest(root / MANIFEST_FILE)
        except SlateError as exc:
            raise TaskPackageError(str(exc)) from exc

    return TaskPackage(root=root, task_id=task_id, config=config, instruction=instruction,
                       dockerfile=dockerfile, slate=slate, digest=path_sha256(root))


def _check_links(root: Path) -> None:
    """Refuse a symbolic link that leaves the package: everything reads the package as root on the
    host (the loader, the bubblewrap build, the copy of tests/ into the sandbox), so such a link would
    hand a host file to the task. Links between the package's own files stay allowed."""
    for folder, dirs, files in os.walk(root):
        for name in sorted(dirs + files):
            path = Path(folder) / name
            if not path.is_symlink():
                continue
            resolved = Path(os.path.realpath(path))
            if resolved != root and root not in resolved.parents:
                raise TaskPackageError(f"{path}: symbolic link to {os.readlink(path)} leaves the task package "
                                       f"(expected links to stay inside {root}; a package never reaches host files)")


def _read_text(path: Path, name: str, expected: str) -> str:
    if not path.is_file():
        raise TaskPackageError(f"{path}: missing (expected {name}: {expected})")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TaskPackageError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def _size_mb(value: object, source: str, key: str) -> int:
    """'2G' / '512M' / '1.5GiB' / 2048 (MiB) -> MiB."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    m = _SIZE.match(value) if isinstance(value, str) else None
    if not m:
        raise TaskPackageError(f"{source}: {key}: expected a size like '2G' or '512M', got {value!r}")
    scale = {"": 1 / 2**20, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024**2}[m.group(2).upper()]
    return max(1, int(float(m.group(1)) * scale))


def _check_copy_sources(spec: DockerfileSpec, context: Path) -> None:
    """Every COPY source of the subset must exist in environment/ (else the build would fail later)."""
    for step in spec.steps:
        if step.kind != "copy":
            continue
        for src in step.paths:
            if any(ch in src for ch in "*?["):
                if not list(context.glob(src)):
                    raise TaskPackageError(f"{spec.source}:{step.line}: COPY source '{src}' matches nothing in "
                                           f"{context}")
            elif src != "." and not (context / src).exists():
                raise TaskPackageError(f"{spec.source}:{step.line}: COPY source '{src}' not found in {context}")

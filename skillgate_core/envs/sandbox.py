"""One interface over the sandbox backends: a started task's session; exec; read/write files; stop.

Choosing and starting a backend is envs/backends.py (`start_sandbox`), which imports the two
subclasses (bwrap_sandbox, docker_sandbox); this module imports neither.

    with start_sandbox(task, backend="auto", skills_dir=lib) as box:
        r = box.exec("python3 solve.py", timeout=30)      # ExecResult(exit_code, stdout, ...)
        box.write_file("/app/notes.txt", "hi")
        box.read_file("/app/out.csv")

Every command runs inside the sandbox (bubblewrap or Docker), never as a plain host subprocess.
exec() is stateless: each call is a fresh process tree started in `cwd` (default: the task's
WORKDIR) with `env` layered over the image's ENV. On bubblewrap each call is also a fresh PID
namespace, so nothing a command leaves in the background outlives it; on Docker, background
processes live until `kill_processes()` (the verifier calls it). The later agent layer keeps a
persistent shell's cwd/env in its own state and passes them into each exec() call.

Files are read and written *through the sandbox* (a command inside it), never by following paths
the agent controls on the host, so a planted symlink cannot reach host files.

`SandboxError` means infrastructure failure (the sandbox died or could not start): the verifier
reports it as ABORTED, never as a score of 0. A command that cannot start in a sandbox that is still
alive (the agent's fork bomb holds every pid, or it made its workspace unenterable with chmod 000) is
not one: it ends with exit code 126 and says why on stderr, on both backends, so what the agent did
to its own sandbox is an observation in the episode and a graded 0 in the verifier.
"""

from __future__ import annotations

import abc
import io
import os
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from skillgate_core.envs.sandbox_config import SandboxConfig
from skillgate_core.envs.skill_opens import SkillOpenWatch, WindowOpens
from skillgate_core.envs.task_package import TaskPackage

__all__ = [
    "ExecResult",
    "HELPER_ENV",
    "OutputBuffer",
    "SYSTEM_PATH",
    "Sandbox",
    "SandboxError",
    "owner_pid_namespace",
]

TIMEOUT_EXIT_CODE = 124
"""exit_code reported for a command killed at its timeout (as coreutils `timeout` does)."""
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""The system's own binaries: read-only on both backends (bubblewrap binds the host's /usr read-only,
Docker's image filesystem is read-only), so nothing the agent wrote can be found on it."""
HELPER_ENV = {"PATH": SYSTEM_PATH, "LD_PRELOAD": "", "LD_AUDIT": "", "BASH_ENV": "", "ENV": ""}
"""Layered over the image's environment for our own helper commands (read_file, write_file, the
verifier's setup): an image PATH may name folders the agent writes (`ENV PATH=/app/bin:$PATH`), and a
fake `head` there would otherwise decide what the reward file says."""


class SandboxError(RuntimeError):
    """Infrastructure failure: the sandbox could not start, died, or stopped answering."""


# A declaration, not logic: each field documented where it is declared (docs/design.md, Style).
@dataclass(frozen=True)
class ExecResult:
    """What one command did."""

    exit_code: int
    """Exit status (124 when killed at the timeout; 128+N when killed by signal N)."""
    stdout: str
    """Standard output (UTF-8, undecodable bytes replaced), at most output_limit_bytes."""
    stderr: str
    """Standard error, same rules."""
    timed_out: bool = False
    """The command ran past its timeout and its whole process tree was killed."""
    truncated: bool = False
    """Some output was dropped because a stream passed output_limit_bytes."""
    duration_s: float = 0.0
    """Wall-clock seconds, start to finish, as seen from the host."""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class OutputBuffer:
    """Keeps the first `limit` bytes of a stream and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.chunks: list[bytes] = []
        self.kept = 0
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = self.limit - self.kept
        if room > 0:
            self.chunks.append(data[:room])
            self.kept += min(room, len(data))
        self.dropped += max(0, len(data) - max(room, 0))

    def value(self) -> bytes:
        return b"".join(self.chunks)


@dataclass(frozen=True)
class RawResult:
    """A backend's answer to one command, before decoding."""

    exit_code: int
    """Exit status (TIMEOUT_EXIT_CODE when killed at the timeout)."""
    stdout: bytes
    """Kept standard output."""
    stderr: bytes
    """Kept standard error."""
    timed_out: bool
    """Killed at the timeout."""
    truncated: bool
    """Output was dropped at the cap."""
    duration_s: float
    """Host wall-clock seconds."""


class Sandbox(abc.ABC):
    """A running sandbox for one task (one episode). Use as a context manager or call stop()."""

    backend: str
    session_id: str

    def __init__(self, task: TaskPackage, config: SandboxConfig) -> None:
        self.task = task
        self.config = config
        self.workdir = task.workdir
        """Default cwd of exec()."""
        self.env = {"HOME": "/root", "PATH": SYSTEM_PATH, "LANG": "C.UTF-8", **task.env}
        """Default environment of exec() (the image's ENV)."""
        self.verifying = False
        """True after begin_verification(): /tests is present and /logs/verifier is fresh."""
        self.start_seconds = 0.0
        """How long start_sandbox took (image build included)."""
        self.skill_watch: SkillOpenWatch | None = None
        """The opens of this sandbox's own copy of the skills (set by the backend when /skills is mounted)."""

    # -- the interface the episode loop and verifier use -----------------------------------------

    def exec(self, cmd: str, timeout: float | None = None, cwd: str | None = None,
             env: Mapping[str, str] | None = None, stdin: bytes | None = None) -> ExecResult:
        """Run `cmd` with bash -c inside the sandbox; never raises for the command's own failure."""
        raw = self._run(["/bin/bash", "-c", cmd], timeout=timeout or self.config.command_timeout_sec,
                        cwd=cwd or self.workdir, env={**self.env, **(env or {})}, stdin=stdin)
        return ExecResult(raw.exit_code, raw.stdout.decode("utf-8", "replace"), raw.stderr.decode("utf-8", "replace"),
                          raw.timed_out, raw.truncated, raw.duration_s)

    def exec_helper(self, cmd: str, timeout: float) -> ExecResult:
        """Run one of our own helper scripts (the grader's preparation) with bash -c, cwd /, HELPER_ENV,
        and privileges over the agent's files that no file mode the agent set can stop: root in the
        container on Docker; on bubblewrap the sandbox's own user namespace with CAP_DAC_OVERRIDE,
        CAP_DAC_READ_SEARCH and CAP_FOWNER (every file the agent could make is owned by the sandbox's
        uid, so the capabilities cover them; nothing outside the sandbox is reachable). Never run
        anything the agent wrote with it."""
        raw = self._run_helper(["/bin/bash", "-c", cmd], timeout=timeout, env={**self.env, **HELPER_ENV})
        return ExecResult(raw.exit_code, raw.stdout.decode("utf-8", "replace"), raw.stderr.decode("utf-8", "replace"),
                          raw.timed_out, raw.truncated, raw.duration_s)

    def read_file(self, path: str, max_bytes: int | None = None) -> bytes:
        """Bytes of `path` as the sandbox sees it; FileNotFoundError / IsADirectoryError / OSError."""
        limit = max_bytes or self.config.output_limit_bytes
        raw = self._run(["/bin/sh", "-c", 'if [ -d "$1" ]; then echo "is a directory" >&2; exit 21; fi; '
                         'exec head -c "$2" -- "$1"', "sh", path, str(limit)],
                        timeout=60, cwd=self.workdir, env={**self.env, **HELPER_ENV}, stdin=None)
        if raw.exit_code == 21:
            raise IsADirectoryError(f"{self.session_id}:{path}: is a directory")
        if raw.exit_code != 0:
            msg = raw.stderr.decode("utf-8", "replace").strip()
            if "No such file" in msg:
                raise FileNotFoundError(f"{self.session_id}:{path}: no such file")
            raise OSError(f"{self.session_id}:{path}: {msg or f'exit {raw.exit_code}'}")
        return raw.stdout

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        """Create or replace `path` inside the sandbox (parent folders created)."""
        payload = data.encode() if isinstance(data, str) else data
        raw = self._run(["/bin/sh", "-c", 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1" && chmod "$2" -- "$1"',
                         "sh", path, format(mode, "o")],
                        timeout=60, cwd=self.workdir, env={**self.env, **HELPER_ENV}, stdin=payload)
        if raw.exit_code != 0:
            raise OSError(f"{self.session_id}:{path}: write failed: "
                          f"{raw.stderr.decode('utf-8', 'replace').strip() or f'exit {raw.exit_code}'}")

    def upload_dir(self, local_dir: Path, dest: str) -> None:
        """Copy a host folder into the sandbox at `dest` (a tar stream through a command inside)."""
        raw = self._run(["/bin/sh", "-c", 'mkdir -p -- "$1" && tar -xf - -C "$1"', "sh", dest],
                        timeout=120, cwd="/", env={**self.env, **HELPER_ENV}, stdin=tar_bytes(local_dir))
        if raw.exit_code != 0:
            raise OSError(f"{self.session_id}:{dest}: upload failed: "
                          f"{raw.stderr.decode('utf-8', 'replace').strip() or f'exit {raw.exit_code}'}")

    def exists(self, path: str) -> bool:
        return self._run(["/bin/sh", "-c", 'test -e "$1"', "sh", path], timeout=30, cwd="/",
                         env={**self.env, **HELPER_ENV}, stdin=None).exit_code == 0

    def drain_skill_opens(self) -> WindowOpens:
        """What this sandbox's processes opened of the skills since the previous drain (envs/skill_opens.py):
        `read`, the skills whose SKILL.md / README.md was opened, and `consulted`, the skills any file of
        which was opened or executed, each once, in order of first opening: the environment's record of
        reads and consultation, whatever the command looked like. Empty when no skills are mounted."""
        return self.skill_watch.drain() if self.skill_watch is not None else WindowOpens()

    def _close_skill_watch(self) -> None:
        if self.skill_watch is not None:
            self.skill_watch.close()

    def image_env(self) -> dict[str, str]:
        """The environment the image defines (its ENV lines): what the verifier's own is built from."""
        return dict(self.env)

    def agent_writable_dirs(self) -> tuple[str, ...]:
        """Folders the agent could have written (the verifier takes no binary from them)."""
        return (self.workdir, "/tmp", "/var/tmp", "/root", "/logs", "/solution", "/tests", "/dev/shm", "/run")

    def verifier_home(self) -> str:
        """HOME for the verifier: a folder begin_verification() made fresh."""
        return "/root"

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.session_id} task={self.task.task_id}>"

    # -- what a backend provides ----------------------------------------------------------------

    @abc.abstractmethod
    def _run(self, argv: list[str], *, timeout: float, cwd: str, env: Mapping[str, str],
             stdin: bytes | None) -> RawResult:
        """Run argv inside the sandbox with the limits; raise SandboxError on infrastructure failure."""

    @abc.abstractmethod
    def _run_helper(self, argv: list[str], *, timeout: float, env: Mapping[str, str]) -> RawResult:
        """Run argv in cwd / with the privileges `exec_helper` describes; SandboxError as `_run`."""

    @abc.abstractmethod
    def alive(self) -> bool:
        """Whether the sandbox can still run commands."""

    @abc.abstractmethod
    def kill_processes(self) -> None:
        """Kill every process started in the sandbox (the agent's background jobs included)."""

    @abc.abstractmethod
    def begin_verification(self, tests_dir: Path) -> None:
        """Kill the agent's processes, install a fresh copy of tests_dir at /tests and an empty
        /logs/verifier (whatever the agent left there is gone), and give later exec() calls fresh
        /tmp, /var/tmp, /root and /dev/shm: of what the agent wrote, only the workspace (WORKDIR and
        the task's own folders) is left for the verifier to grade."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Kill everything and remove the sandbox's resources. Safe to call twice."""


def tar_bytes(folder: Path) -> bytes:
    """An uncompressed tar of `folder`'s contents (paths relative to it)."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        for item in sorted(folder.rglob("*")):
            tar.add(item, arcname=item.relative_to(folder).as_posix(), recursive=False)
    return data.getvalue()


def owner_pid_namespace() -> str:
    """This process's PID namespace ("pid:[4026531836]"): an owner's pid means something only there,
    so orphan cleanup never judges a sandbox recorded from another namespace (or host)."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""

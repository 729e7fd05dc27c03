"""The bubblewrap backend: a fresh namespace sandbox per command over a per-session workspace.

Layout of one session (as root; SESSIONS = /var/tmp/skillgate-sandboxes):

    SESSIONS/<id>.json      owner pid + start time, host, pid namespace (orphan cleanup), cgroup, mount
    SESSIONS/<id>/          a tmpfs of workspace_limit_mb (ENOSPC when the agent fills it)
      root/app, root/tmp, root/root, root/logs, root/var/tmp, root/solution, ...
                            bound rw at /app, /tmp, ... (/solution stays empty but for the oracle)
      skills/               a copy of the skills folder, bound read-only at /skills (its SKILL.md /
                            README.md opens are watched from the host: envs/skill_opens.py)
      verify/               created by begin_verification(): its own small tmpfs holding
        tests/, logs/verifier/   bound at /tests and /logs (a fresh one) for the verifier's commands
        fresh-tmp/, fresh-var-tmp/, fresh-root/   bound over /tmp, /var/tmp, /root (HOME) for them

Each command runs as

    sh (rlimits; joins the session cgroup) -> setpriv (drops to sandbox_uid) -> bwrap
        --unshare-all (no network, own pid/ipc/uts/user ns) --as-pid-1 --die-with-parent --new-session
        --tmpfs / + ro-binds of /usr /etc (and the /bin /lib symlinks) + fresh /proc, /dev
        + the session's top-level dirs (read-write: the workspace, /tmp, /var/tmp, /root, /logs,
          /solution, /run; every other image folder read-only, as on Docker) + /skills ro
        --remount-ro / --cap-drop ALL (our own helpers, `exec_helper`: DAC_OVERRIDE, DAC_READ_SEARCH,
                                  FOWNER in the sandbox's user namespace, nothing else)
        -> bash -c CMD           (rlimits: file size, open files, no core; nproc and address
                                  space only when there is no cgroup)

The root is built from a tmpfs plus binds (a read-only `--ro-bind / /` cannot take binds under it)
and remounted read-only, so writing outside the session's folders fails with EROFS. The command is
PID 1 of its own PID namespace: when it exits, or times out (the host SIGKILLs it), every process
it started dies with the namespace, so nothing the agent leaves in the background outlives its
command. Memory, pids and CPU come from a per-session cgroup when we are root; otherwise from
rlimits (weaker: RLIMIT_NPROC counts all sandboxes of the uid together, and the workspace has no
size cap beyond RLIMIT_FSIZE per file).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import secrets
import selectors
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from skillgate_core.base.plain_trees import NotPlainTree, copy_plain_tree
from skillgate_core.envs import image_root
from skillgate_core.envs.cgroups import SandboxCgroup, create_cgroup, open_cgroup
from skillgate_core.envs.dockerfile_subset import materialize
from skillgate_core.envs.sandbox import (  # names, not logic: one imported name a line
    TIMEOUT_EXIT_CODE,
    OutputBuffer,
    RawResult,
    Sandbox,
    SandboxError,
    owner_pid_namespace,
)
from skillgate_core.envs.sandbox_config import SandboxConfig
from skillgate_core.envs.skill_opens import SkillOpenWatch
from skillgate_core.envs.task_package import TaskPackage

__all__ = ["BwrapSandbox", "cleanup_orphans", "unavailable_reason"]

_SYSTEM = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc")
# $1 file-size blocks, $2 nproc or "-", $3 address space KiB or "-", then cgroup.procs files, "--", argv.
_LAUNCH = ('ulimit -c 0 && ulimit -n 4096 && ulimit -f "$1" || exit 125; '
           'if [ "$2" != - ]; then ulimit -p "$2" && ulimit -v "$3" || exit 125; fi; shift 3; '
           'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"')
_KILL_GRACE_S = 5.0
_FRESH_FOR_VERIFIER = (("/tmp", 0o1777), ("/var/tmp", 0o1777), ("/root", 0o700))
"""Folders the verifier gets empty (with these modes) instead of the agent's."""


@functools.cache
def unavailable_reason() -> str:
    """Empty when a bubblewrap sandbox starts here, else why not (probed once per process)."""
    exe = shutil.which("bwrap")
    if not exe:
        return "bwrap not installed (apt-get install bubblewrap)"
    probe = [*_drop_privileges(SandboxConfig().sandbox_uid), exe, "--unshare-all", "--as-pid-1", "--die-with-parent",
             *_system_binds(), "--proc", "/proc", "--dev", "/dev", "--", "/bin/true"]
    try:
        proc = subprocess.run(probe, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap probe failed: {exc}"
    if proc.returncode != 0:
        return f"bwrap cannot create namespaces: {proc.stderr.strip()[:200]} (enable user namespaces)"
    return ""


class BwrapSandbox(Sandbox):
    """One task's bubblewrap session (see the module docstring)."""

    backend = "bwrap"

    def __init__(self, task: TaskPackage, skills_dir: Path | None, config: SandboxConfig) -> None:
        super().__init__(task, config)
        if not task.bwrap_compatible or task.dockerfile is None:
            raise SandboxError(f"task {task.task_id} needs Docker: {'; '.join(task.needs_docker)}")
        self.session_id = f"sg-{re.sub(r'[^a-z0-9]+', '-', task.task_id.lower())[:24].strip('-')}-" \
                          f"{secrets.token_hex(4)}"
        self.sessions = config.sessions_path()
        self.dir = self.sessions / self.session_id
        self.meta_file = self.sessions / f"{self.session_id}.json"
        self.as_root = os.geteuid() == 0
        self.uid = config.sandbox_uid if self.as_root else os.getuid()
        self.gid = config.sandbox_uid if self.as_root else os.getgid()
        self.memory_mb = min(task.config.environment.memory_mb, config.memory_limit_mb)
        # tmpfs pages are memory: the workspace never holds more than the sandbox may allocate.
        self.workspace_mb = min(task.config.environment.storage_mb, config.workspace_limit_mb, self.memory_mb)
        self.cgroup: SandboxCgroup | None = None
        self.mounted = False
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopped = False
        self._verify_args: list[str] = []
        try:
            self._setup(skills_dir)
        except Exception as exc:
            self.stop()
            if isinstance(exc, SandboxError):
                raise
            raise SandboxError(f"bwrap sandbox for {task.task_id} failed to start: {exc}") from exc

    # -- setup ----------------------------------------------------------------------------------

    def _setup(self, skills_dir: Path | None) -> None:
        self.sessions.mkdir(parents=True, exist_ok=True, mode=0o711)
        if self.as_root:
            self.sessions.chmod(0o711)
        self.dir.mkdir(mode=0o755)
        self._write_meta()
        skills_bytes = _tree_bytes(skills_dir) if skills_dir else 0
        if self.as_root:
            size = self.workspace_mb * 2**20 + skills_bytes + 2**20
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755,nosuid,nodev",
                            "skillgate-sandbox", str(self.dir)], check=True, capture_output=True)
            self.mounted = True
            self._write_meta()
            if self.config.cgroups:
                self.cgroup = create_cgroup(self.session_id, self.memory_mb * 2**20, self.config.pids_limit,
                                            min(self.task.config.environment.cpus, self.config.cpus_limit))
            self._write_meta()
        root = self.dir / "root"
        root.mkdir()
        assert self.task.dockerfile is not None
        materialize(self.task.dockerfile, self.task.environment_dir, root)
        for path, mode in ((self.workdir, 0o755), ("/tmp", 0o1777), ("/var/tmp", 0o1777), ("/root", 0o700),
                           ("/logs/agent", 0o755), ("/solution", 0o755)):
            # Never through a link the task's COPY left (image_root): we are root on the host here.
            image_root.make_dirs(root, path)
            image_root.chmod(root, path, functools.partial(_fixed_mode, mode))
        if self.as_root:
            _chown_tree(root, self.uid, self.gid)
        if skills_dir is not None:
            # start_sandbox refused links; still, never follow one that came since (we are root here).
            try:
                copy_plain_tree(skills_dir, self.dir / "skills")
            except NotPlainTree as exc:
                raise SandboxError(f"skills_dir {exc}") from None
            for p in [self.dir / "skills", *(self.dir / "skills").rglob("*")]:
                p.chmod((p.stat().st_mode | 0o444 | (0o111 if p.is_dir() else 0)) & 0o7555)
            # Watched on the host copy that only this session binds: its opens are this episode's reads.
            self.skill_watch = SkillOpenWatch(self.dir / "skills")
        self._base_args = self._bwrap_args(root, skills_dir is not None)

    def _write_meta(self) -> None:
        meta = {"session_id": self.session_id, "task_id": self.task.task_id, "owner_pid": os.getpid(),
                "owner_start": _process_start(os.getpid()), "owner_host": os.uname().nodename,
                "owner_pidns": owner_pid_namespace(), "created": time.time(), "dir": str(self.dir),
                "mounted": self.mounted, "cgroup": self.cgroup.name if self.cgroup else ""}
        tmp = self.meta_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(meta))
        tmp.replace(self.meta_file)

    def _bwrap_args(self, root: Path, with_skills: bool) -> list[str]:
        # --as-pid-1: the command itself is the namespace's init. With bwrap's own init in between,
        # that init outlives the outer bwrap and is left for the host's PID 1 to reap, which some
        # VM/container inits never do (zombies pile up, one per command).
        args = ["--unshare-all", "--unshare-user", "--as-pid-1", "--die-with-parent", "--new-session",
                "--hostname", "sandbox",
                "--uid", "0", "--gid", "0", "--disable-userns",
                "--tmpfs", "/", *_system_binds(), "--proc", "/proc", "--dev", "/dev",
                "--size", str(64 * 2**20), "--tmpfs", "/dev/shm"]
        # Writable as on Docker (read-only image root): the workspace, /tmp, /var/tmp, /root, /logs, /solution,
        # /run. Every other top-level folder of the image is bound read-only: the agent could otherwise
        # rewrite inputs or helpers outside its workspace that the tests read (the task's /data, /opt, ...).
        writable = sorted({self.workdir, *_WRITABLE})
        for top in sorted(p.name for p in root.iterdir()):
            if (root / top).is_symlink():  # a bind follows links on the host (materialize refuses them)
                raise SandboxError(f"{self.session_id}: /{top} is a symbolic link; refusing to bind it")
            if f"/{top}" in writable:
                args += ["--bind", str(root / top), f"/{top}"]
                continue
            args += ["--ro-bind", str(root / top), f"/{top}"]
            for inner in (w for w in writable if w.startswith(f"/{top}/")):
                host = root / inner.lstrip("/")
                if any(q.is_symlink() for q in (host, *host.parents) if q != root and root in q.parents):
                    raise SandboxError(f"{self.session_id}: {inner} passes through a symbolic link; refusing to bind it")
                if host.is_dir():
                    args += ["--bind", str(host), inner]
        if with_skills:
            args += ["--ro-bind", str(self.dir / "skills"), "/skills"]
        return args

    # -- commands -------------------------------------------------------------------------------

    def _command(self, argv: list[str], cwd: str, env: Mapping[str, str], info_fd: int, helper: bool) -> list[str]:
        # One small shell sets the rlimits and joins the cgroup before anything forks, then execs
        # (setpriv ->) bwrap: two execs in front of bwrap keep a command near 15 ms.
        file_blocks = self.config.file_size_limit_mb * 2**20 // 512  # dash counts 512-byte blocks
        if self.cgroup is None:  # weaker fallbacks when there is no cgroup
            nproc, vmem_kb = str(self.config.pids_limit), str(self.memory_mb * 2 * 1024)
        else:
            nproc = vmem_kb = "-"
        cmd = ["/bin/sh", "-c", _LAUNCH, "sh", str(file_blocks), nproc, vmem_kb,
               *(self.cgroup.procs_files() if self.cgroup else []), "--"]
        if self.as_root:
            cmd += _drop_privileges(self.uid)
        cmd += ["bwrap", *self._base_args, *self._verify_args, *(_HELPER_CAPS if helper else ("--cap-drop", "ALL")),
                "--remount-ro", "/", "--info-fd", str(info_fd), "--chdir", cwd, "--clearenv"]
        for key, value in env.items():
            cmd += ["--setenv", key, value]
        return [*cmd, "--", *argv]

    def _run_helper(self, argv: list[str], *, timeout: float, env: Mapping[str, str]) -> RawResult:
        return self._run(argv, timeout=timeout, cwd="/", env=env, stdin=None, helper=True)

    def _run(self, argv: list[str], *, timeout: float, cwd: str, env: Mapping[str, str],
             stdin: bytes | None, helper: bool = False) -> RawResult:
        with self._lock:
            if self._stopped:
                raise SandboxError(f"{self.session_id}: sandbox was stopped")
            if not self.dir.is_dir() or (self.mounted and not os.path.ismount(self.dir)):
                raise SandboxError(f"{self.session_id}: session folder {self.dir} is gone")
            info_r, info_w = os.pipe()
            start = time.perf_counter()
            try:
                proc = subprocess.Popen(self._command(argv, cwd, env, info_w, helper),
                                        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(info_w,),
                                        start_new_session=True)
            except OSError as exc:
                os.close(info_r)
                raise SandboxError(f"{self.session_id}: cannot start bwrap: {exc}") from exc
            finally:
                os.close(info_w)
            self._proc = proc
            try:
                out, err, info, timed_out = _pump(proc, info_r, stdin, start + timeout, self.config.output_limit_bytes)
            finally:
                self._proc = None
                os.close(info_r)
            duration = time.perf_counter() - start
        if b"child-pid" not in info and not timed_out:
            if self._stopped:
                raise SandboxError(f"{self.session_id}: sandbox was stopped during the command")
            why = err.value().decode("utf-8", "replace").strip()[:500]
            if self.alive():
                # The session is there, so what stopped bwrap is the state the agent left (its cwd made
                # unenterable by chmod 000, every pid held...): the agent's doing, an observation and a
                # graded 0, never an infrastructure failure (as on Docker).
                return RawResult(126, b"", f"sandbox: the command could not start: {why}".encode(), False, False,
                                 duration)
            raise SandboxError(f"{self.session_id}: bwrap failed to set up the sandbox "
                               f"(exit {proc.returncode}): {err.value().decode('utf-8', 'replace').strip()[:500]}")
        code = proc.returncode
        if timed_out:
            code = TIMEOUT_EXIT_CODE
        elif code is not None and code < 0:
            code = 128 - code
        return RawResult(code if code is not None else -1, out.value(), err.value(), timed_out,
                         bool(out.dropped or err.dropped), duration)

    # -- lifecycle ------------------------------------------------------------------------------

    def alive(self) -> bool:
        return not self._stopped and self.dir.is_dir() and (not self.mounted or os.path.ismount(self.dir))


    def kill_processes(self) -> None:
        # Each command's PID namespace already died with it; the cgroup sweep is the second line.
        if self.cgroup is not None and not self.cgroup.kill_all():
            raise SandboxError(f"{self.session_id}: processes survive SIGKILL")

    def begin_verification(self, tests_dir: Path) -> None:
        with self._lock:
            if not self.alive():
                raise SandboxError(f"{self.session_id}: sandbox is not running")
            self.kill_processes()
            verify = self.dir / "verify"
            _unmount_under(verify)
            _remove(verify)
            verify.mkdir()
            if self.as_root:
                # Its own tmpfs: an agent that filled the workspace cannot starve the grader (whose
                # fresh /tmp lives here too; pages count only when written).
                size = _tree_bytes(tests_dir) + (self.workspace_mb + 64) * 2**20
                subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755,nosuid,nodev",
                                "skillgate-verify", str(verify)], check=True, capture_output=True)
            shutil.copytree(tests_dir, verify / "tests")
            # A fresh /logs holding an empty verifier/ (as the fresh Docker container has): nothing the
            # agent left there, nor the modes it set on its /logs (chmod 000 /logs once made reading
            # the reward fail, an ABORTED instead of a 0), reaches the verifier.
            (verify / "logs" / "verifier").mkdir(parents=True)
            fresh: list[str] = []
            for path, mode in _FRESH_FOR_VERIFIER:
                if self.workdir == path or self.workdir.startswith(path + "/"):
                    continue  # the graded workspace itself lives there: it stays
                d = verify / ("fresh" + path.replace("/", "-"))
                d.mkdir()
                d.chmod(mode)
                fresh += ["--bind", str(d), path]
            if self.as_root:
                _chown_tree(verify, self.uid, self.gid)
            # Bound over the session's own /tmp, /var/tmp, /root: the verifier never sees what the
            # agent left there (a .pth in ~/.local, rc files, planted temp files).
            self._verify_args = ["--bind", str(verify / "tests"), "/tests", "--bind", str(verify / "logs"), "/logs",
                                 *fresh]
            self.verifying = True

    def stop(self) -> None:
        self._stopped = True
        self._close_skill_watch()
        proc = self._proc
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        with self._lock:
            _destroy_session(self.dir, self.meta_file, self.cgroup, self.mounted)
            self.cgroup = None
            self.mounted = False


# ---------------------------------------------------------------- helpers


_WRITABLE = ("/tmp", "/var/tmp", "/root", "/logs", "/solution", "/run")
"""Folders the agent may write besides its workspace (the Docker backend's tmpfs mounts)."""
_HELPER_CAPS = ("--cap-drop", "ALL", "--cap-add", "CAP_DAC_OVERRIDE", "--cap-add", "CAP_DAC_READ_SEARCH",
                "--cap-add", "CAP_FOWNER")
"""Capabilities of our helper commands (exec_helper), in the sandbox's own user namespace: over files of
the sandbox's uid (all the agent can make) its modes stop nothing; no other capability, no host file."""


def _system_binds() -> list[str]:
    args: list[str] = []
    for name in _SYSTEM:
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), f"/{name}"]
        elif host.is_dir():
            args += ["--ro-bind", str(host), f"/{name}"]
    return args


def _drop_privileges(uid: int) -> list[str]:
    if os.geteuid() != 0:
        return []
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all", "--"]


def _pump(proc: subprocess.Popen[bytes], info_r: int, stdin: bytes | None, deadline: float,
          limit: int) -> tuple[OutputBuffer, OutputBuffer, bytes, bool]:
    """Read stdout/stderr (capped) and the info fd until the process ends or the deadline passes."""
    out, err = OutputBuffer(limit), OutputBuffer(limit)
    info = bytearray()
    if stdin is not None and proc.stdin is not None:
        pipe = proc.stdin

        def feed() -> None:
            with contextlib.suppress(BrokenPipeError, OSError):
                pipe.write(stdin)
                pipe.close()

        threading.Thread(target=feed, daemon=True).start()
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sel.register(proc.stdout, selectors.EVENT_READ, out)
    sel.register(proc.stderr, selectors.EVENT_READ, err)
    sel.register(info_r, selectors.EVENT_READ, info)
    timed_out = False
    kill_deadline = deadline
    while sel.get_map():
        now = time.perf_counter()
        if now >= kill_deadline:
            if timed_out:  # pipes still open after the kill: give up on them
                break
            timed_out = True
            _kill_sandbox(proc, bytes(info))
            kill_deadline = now + _KILL_GRACE_S
            continue
        for key, _ in sel.select(timeout=min(0.5, kill_deadline - now)):
            fd = key.fd
            chunk = os.read(fd, 65536)
            if not chunk:
                sel.unregister(key.fileobj)
                continue
            if isinstance(key.data, bytearray):
                key.data.extend(chunk)
            else:
                key.data.add(chunk)
    sel.close()
    try:
        proc.wait(timeout=_KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    for stream in (proc.stdout, proc.stderr):
        stream.close()
    return out, err, bytes(info), timed_out


def _kill_sandbox(proc: subprocess.Popen[bytes], info: bytes) -> None:
    """SIGKILL the namespace's PID 1 (the whole namespace dies with it); bwrap then reaps it and
    exits. Killing bwrap itself would orphan that PID 1 for the host's init to reap."""
    match = re.search(rb'"child-pid"\s*:\s*(\d+)', info)
    try:
        if match:
            os.kill(int(match.group(1)), signal.SIGKILL)
        else:
            os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    os.chown(root, uid, gid, follow_symlinks=False)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), uid, gid, follow_symlinks=False)


def _tree_bytes(root: Path) -> int:
    return sum(p.lstat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def _remove(path: Path) -> None:
    """Delete a file, symlink or tree without following symlinks."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path, onerror=_force_writable)


def _fixed_mode(mode: int, _current: int, _is_dir: bool) -> int:
    return mode


def _force_writable(func: Callable[[str], object], path: str, exc: object) -> None:
    # A non-root owner cannot delete inside a folder the agent made read-only: open it up, retry.
    parent = os.path.dirname(path)
    with contextlib.suppress(OSError):
        os.chmod(parent, 0o700)
        if os.path.isdir(path) and not os.path.islink(path):
            os.chmod(path, 0o700)
            shutil.rmtree(path, onerror=_force_writable)
        else:
            func(path)


def _process_start(pid: int) -> str:
    """Start time of `pid` (clock ticks since boot): with the pid it identifies one process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


def _unmount_under(directory: Path) -> None:
    """Unmount every mount at or below `directory`, deepest first (lazily if busy)."""
    prefix = str(directory)
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return
    points = [line.split()[4] for line in lines]
    mine = sorted({p for p in points if p == prefix or p.startswith(prefix + "/")}, key=len, reverse=True)
    for point in mine:
        if subprocess.run(["umount", point], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", point], capture_output=True)


def _destroy_session(directory: Path, meta_file: Path, cgroup: SandboxCgroup | None, mounted: bool) -> None:
    if cgroup is not None:
        cgroup.remove()
    if mounted or os.path.ismount(directory):
        _unmount_under(directory)
    if directory.exists():
        _remove(directory)
    meta_file.unlink(missing_ok=True)
    meta_file.with_suffix(".tmp").unlink(missing_ok=True)


def cleanup_orphans(config: SandboxConfig | None = None) -> int:
    """Destroy sessions whose owner process is gone; returns how many. A session recorded by another
    host or PID namespace is skipped (its owner pid means nothing here); what is destroyed is always
    SESSIONS/<id> and cgroup <id> for the meta file's own id, whatever else the file says."""
    sessions = (config or SandboxConfig()).sessions_path()
    if not sessions.is_dir():
        return 0
    host, pidns = os.uname().nodename, owner_pid_namespace()
    removed = 0
    for meta_file in sorted(sessions.glob("*.json")):
        try:
            meta = json.loads(meta_file.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if meta.get("owner_host", host) != host or meta.get("owner_pidns", pidns) != pidns:
            continue  # (files written before these keys existed are judged here, as they always were)
        if meta.get("owner_start") and _process_start(int(meta["owner_pid"])) == meta["owner_start"]:
            continue  # owner still running
        session_id = meta_file.stem
        cgroup = open_cgroup(session_id) if meta.get("cgroup") == session_id else None
        try:
            _destroy_session(sessions / session_id, meta_file, cgroup, bool(meta.get("mounted")))
        except OSError:
            continue  # (another process reaping the same orphan at the same moment)
        removed += 1
    return removed

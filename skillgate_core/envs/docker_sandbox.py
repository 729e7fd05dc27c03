"""The Docker backend: one container per episode, commands through `docker exec`.

The container (labels org.skillgate.sandbox=1, .session, .owner and .owner_pidns for orphan cleanup):
- image: the task's Dockerfile built on local images (docker_images.py), never pulled;
- --network none (unless the task allows internet and the config allows network at all);
- memory (no extra swap), CPUs, pids limits; RLIMIT_FSIZE; no-new-privileges; a few capabilities
  dropped (raw sockets, mknod, ...);
- a read-only image filesystem; writable: the workspace (a tmpfs *volume* at WORKDIR, size-capped,
  filled from the image's WORKDIR snapshot), and tmpfs /tmp, /var/tmp, /root, /logs, /tests, /run;
- /skills: a per-container copy of the skills folder (SKILLS_COPIES/<session>), bound read-only; the
  host watches its SKILL.md / README.md opens (envs/skill_opens.py): one episode's reads, never a
  neighbour's, which a folder shared by a whole group would mix up;
- PID 1: a shell loop that ignores signals and reaps orphans. The kernel does not deliver SIGKILL
  from inside the container to its PID 1. The kernel itself can still end it: root in the container
  may raise PID 1's oom_score_adj (raising needs no capability) and exhaust memory, and the OOM
  killer then picks PID 1. A container that stopped by itself while the agent plays is the agent's
  doing, never an infrastructure failure: a fresh container of the same spec takes over the
  workspace volume, the command that found it stopped runs there (its stderr starts with a note
  saying what happened), and the episode goes on and is graded (`agent_restarts` lists each one).
  What the agent loses is its own: its processes, /tmp, HOME, /logs, and the workspace itself (a
  tmpfs volume is emptied when its last container stops; it starts again from the image's WORKDIR).
  A container that is gone (removed) or a daemon that does not answer is still a SandboxError.

Each exec runs `timeout -s KILL T bash -c CMD`, which kills the command's process group at the
deadline; the host also gives up reading at T + grace. Output is read from the exec socket with
per-stream caps. Before verification every process but PID 1 is killed: the container is frozen
(`docker pause`), the processes are SIGKILLed from the host, then thawed, so a fork bomb cannot
outrun the sweep; without root we fall back to `kill -9 -1` inside the container. The verifier then
runs in a fresh container of the same image and limits that shares only the workspace volume (the
agent's container is removed): its /tmp, /root, /run, /dev/shm and image filesystem are the image's
own, not what the agent left. Our helper commands run with HELPER_ENV (a system-only PATH), never
the image's PATH, which may name folders the agent writes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
import secrets
import select
import shutil
import signal
import socket
import struct
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skillgate_core.base.plain_trees import NotPlainTree, copy_plain_tree
from skillgate_core.envs.docker_images import LABEL, WORKSPACE_SEED, docker_client, task_image
from skillgate_core.envs.sandbox import (
    HELPER_ENV,
    TIMEOUT_EXIT_CODE,
    OutputBuffer,
    RawResult,
    Sandbox,
    SandboxError,
    owner_pid_namespace,
    tar_bytes,
)
from skillgate_core.envs.sandbox_config import SandboxConfig
from skillgate_core.envs.skill_opens import SkillOpenWatch
from skillgate_core.envs.task_package import TaskPackage

__all__ = ["DockerSandbox", "cleanup_orphans", "unavailable_reason"]

SKILLS_COPIES = Path("/var/tmp/skillgate-docker-skills")
"""Host folder of the per-container skills copies (the local Docker daemon binds them)."""
SKILLS_COPY_LABEL = "org.skillgate.skills_copy"
"""The container's skills copy (removed with the container by orphan cleanup)."""
OWNER_PIDNS_LABEL = "org.skillgate.owner_pidns"
"""The owner's PID namespace (a label of its own: older readers split org.skillgate.owner on ':')."""
_INIT = 'trap "" HUP INT QUIT TERM USR1 USR2 PIPE; while :; do sleep 86400 & wait $!; done'
_GRACE_S = 3.0
_DROP_CAPS = ["NET_RAW", "MKNOD", "AUDIT_WRITE", "SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT"]


@functools.cache
def _probe() -> str:
    try:
        import docker  # noqa: F401
    except ImportError:
        return "the docker Python package is not installed"
    try:
        docker_client().ping()
    except Exception as exc:
        return f"no Docker daemon answers ({type(exc).__name__}); start one with: sudo bash infra/dockerd.sh"
    return ""


def unavailable_reason() -> str:
    """Empty when a Docker daemon answers, else why not (cached once it answered)."""
    reason = _probe()
    if reason:
        _probe.cache_clear()  # the daemon may come up later in this process
    return reason


class DockerSandbox(Sandbox):
    """One task's container (see the module docstring)."""

    backend = "docker"

    def __init__(self, task: TaskPackage, skills_dir: Path | None, config: SandboxConfig) -> None:
        super().__init__(task, config)
        import docker.types

        self.client = docker_client()
        self.api = self.client.api
        self.session_id = f"sg-{re.sub(r'[^a-z0-9]+', '-', task.task_id.lower())[:24].strip('-')}-" \
                          f"{secrets.token_hex(4)}"
        self.container_id = ""
        self.volume = f"{self.session_id}-workspace"
        self.skills_copy: Path | None = None
        self._stopped = False
        self._lock = threading.Lock()
        self._revive_lock = threading.Lock()
        self.agent_restarts: list[str] = []
        """Why each agent container stopped by itself (see the module docstring), in order."""
        self.exec_user = task.dockerfile.user if task.dockerfile is not None else ""
        """User of the agent's and verifier's commands: the image's USER (root when unset)."""
        self.image, workdir = task_image(task, config)
        self.workdir = workdir
        # The image's own ENV (PATH, HOME, ...) applies inside the container; exec() adds only the
        # task's Dockerfile ENV and per-call values on top (bubblewrap starts from a clean env).
        self.env = dict(task.env)
        env_cfg = task.config.environment
        memory_mb = min(env_cfg.memory_mb, config.memory_limit_mb)
        workspace_mb = min(env_cfg.storage_mb, config.workspace_limit_mb)
        labels = {LABEL: "1", "org.skillgate.session": self.session_id, "org.skillgate.task": task.task_id,
                  "org.skillgate.owner": f"{os.uname().nodename}:{os.getpid()}:{_process_start(os.getpid())}",
                  OWNER_PIDNS_LABEL: owner_pid_namespace()}
        if skills_dir is not None:
            labels[SKILLS_COPY_LABEL] = str(SKILLS_COPIES / self.session_id)
        try:
            self.api.create_volume(self.volume, driver="local", labels=labels,
                                   driver_opts={"type": "tmpfs", "device": "tmpfs",
                                                "o": f"size={workspace_mb}m,mode=0755"})
            mounts = [docker.types.Mount(self.workdir, self.volume, type="volume")]
            if skills_dir is not None:
                self.skills_copy = _copy_skills(skills_dir, SKILLS_COPIES / self.session_id)
                self.skill_watch = SkillOpenWatch(self.skills_copy)
                mounts.append(docker.types.Mount("/skills", str(self.skills_copy), type="bind", read_only=True))
            small = "rw,exec,nosuid,nodev,size=64m"
            host_config = self.api.create_host_config(
                network_mode="bridge" if env_cfg.allow_internet and config.allow_network else "none",
                mem_limit=f"{memory_mb}m", memswap_limit=f"{memory_mb}m",
                nano_cpus=int(min(env_cfg.cpus, config.cpus_limit) * 1e9), pids_limit=config.pids_limit,
                read_only=config.docker_read_only_root, mounts=mounts,
                tmpfs={"/tmp": f"rw,exec,nosuid,nodev,mode=1777,size={workspace_mb}m",
                       "/var/tmp": f"{small},mode=1777", "/root": f"rw,exec,nosuid,nodev,mode=0700,size={workspace_mb}m",
                       "/logs": small, "/tests": small, "/solution": small, "/run": "rw,nosuid,nodev,size=16m"},
                security_opt=["no-new-privileges"], cap_drop=_DROP_CAPS,
                ulimits=[docker.types.Ulimit(name="fsize", soft=config.file_size_limit_mb * 2**20,
                                             hard=config.file_size_limit_mb * 2**20),
                         docker.types.Ulimit(name="nofile", soft=4096, hard=4096),
                         docker.types.Ulimit(name="core", soft=0, hard=0)])
            self._container_spec = {"host_config": host_config, "labels": labels}
            self.container_id = self._start_container(self.session_id)
            seed = self._run_root(f"tar -xf {WORKSPACE_SEED} -C {self.workdir} && mkdir -p /logs/agent")
            if seed.exit_code != 0:
                raise SandboxError(f"seeding the workspace failed: {seed.stderr.decode('utf-8', 'replace')[:300]}")
        except Exception as exc:
            self.stop()
            if isinstance(exc, SandboxError):
                raise
            raise SandboxError(f"docker sandbox for {task.task_id} failed to start: {type(exc).__name__}: "
                               f"{exc}") from exc

    def _start_container(self, name: str) -> str:
        """Create and start a container of the sandbox's image, limits and mounts (the workspace volume
        included); returns its id."""
        created = self.api.create_container(self.image, command=["/bin/sh", "-c", _INIT], name=name,
                                            hostname="sandbox", working_dir=self.workdir, user="root",
                                            **self._container_spec)
        self.api.start(created["Id"])
        return str(created["Id"])

    # -- commands -------------------------------------------------------------------------------

    def _run(self, argv: list[str], *, timeout: float, cwd: str, env: Mapping[str, str],
             stdin: bytes | None) -> RawResult:
        wrapped = ["timeout", "-s", "KILL", f"{timeout:.3f}s", *argv]
        return self._exec(wrapped, timeout=timeout, cwd=cwd, env=env, stdin=stdin, user=self.exec_user)

    def _run_helper(self, argv: list[str], *, timeout: float, env: Mapping[str, str]) -> RawResult:
        # Root in the container: file modes the agent (the image's USER, or root) set stop nothing.
        return self._exec(["timeout", "-s", "KILL", f"{timeout:.3f}s", *argv], timeout=timeout, cwd="/", env=env,
                          stdin=None, user="root")

    def _run_root(self, script: str, timeout: float = 60.0, stdin: bytes | None = None) -> RawResult:
        # HELPER_ENV: the image's PATH may name folders the agent writes (a fake `mkdir` in /app/bin
        # would otherwise run here, as root).
        return self._exec(["/bin/sh", "-c", script], timeout=timeout, cwd="/", env=HELPER_ENV, stdin=stdin,
                          user="root")

    def _exec(self, argv: list[str], *, timeout: float, cwd: str, env: Mapping[str, str], stdin: bytes | None,
              user: str, revived: bool = False) -> RawResult:
        import docker.errors

        if self._stopped:
            raise SandboxError(f"{self.session_id}: sandbox was stopped")
        start = time.perf_counter()
        try:
            exec_id = self.api.exec_create(self.container_id, argv, stdin=stdin is not None, stdout=True,
                                           stderr=True, user=user, environment=dict(env), workdir=cwd)["Id"]
            sock = self.api.exec_start(exec_id, socket=True)
        except docker.errors.APIError as exc:
            if self.alive():  # e.g. the agent's fork bomb holds every pid: its problem, not ours
                msg = f"sandbox: the command could not start: {exc}".encode()
                return RawResult(126, b"", msg, False, False, time.perf_counter() - start)
            why = "" if revived else self._revive_if_stopped_by_agent()
            if why:  # the command never started: it runs in the fresh container, once
                done = self._exec(argv, timeout=timeout, cwd=cwd, env=env, stdin=stdin, user=user, revived=True)
                note = (f"[sandbox: the container had stopped ({why}); every process was gone and a fresh one runs "
                        f"now: the workspace started again from the image's, /tmp, HOME and /logs are empty]\n")
                return dataclasses.replace(done, stderr=note.encode() + done.stderr)
            raise SandboxError(f"{self.session_id}: docker exec failed, the sandbox is gone: {exc}") from exc
        raw_sock: socket.socket = getattr(sock, "_sock", sock)
        try:
            out, err, timed_out = _read_frames(raw_sock, stdin, start + timeout + _GRACE_S,
                                               self.config.output_limit_bytes)
        finally:
            with contextlib.suppress(OSError):
                sock.close()
        info = self._exec_result(exec_id)
        duration = time.perf_counter() - start
        code = info.get("ExitCode")
        if info.get("Running"):
            timed_out = True  # the host deadline passed; the command is still going: kill its tree
            pid = info.get("Pid")
            if pid and os.geteuid() == 0:
                _kill_tree(int(pid))
        if code is None:
            code = TIMEOUT_EXIT_CODE if timed_out else -1
        # `timeout -s KILL` reports 137 when it fired; only believe it if the time was really up.
        if code in (124, 137) and duration >= timeout - 0.05 and argv[0] == "timeout":
            timed_out = True
        if timed_out:
            code = TIMEOUT_EXIT_CODE
        return RawResult(int(code), out.value(), err.value(), timed_out, bool(out.dropped or err.dropped), duration)

    def _exec_result(self, exec_id: str) -> dict[str, Any]:
        # The stream can close a moment before the exit code is recorded.
        info: dict[str, Any] = {}
        for _ in range(100):
            info = self.api.exec_inspect(exec_id)
            if not info.get("Running"):
                break
            time.sleep(0.01)
        return info

    # -- lifecycle ------------------------------------------------------------------------------

    def image_env(self) -> dict[str, str]:
        env = dict(self.env)
        with contextlib.suppress(Exception):
            for item in (self.api.inspect_image(self.image).get("Config") or {}).get("Env") or []:
                key, _, value = item.partition("=")
                env.setdefault(key, value)
        return env

    def verifier_home(self) -> str:
        # A fresh /root for root; another USER keeps the image's HOME (fresh too: a new container).
        return "/root" if self.exec_user in ("", "root", "0") else self.image_env().get("HOME", "/")

    def alive(self) -> bool:
        if self._stopped or not self.container_id:
            return False
        try:
            return bool(self.api.inspect_container(self.container_id)["State"]["Running"])
        except Exception:
            return False

    def _revive_if_stopped_by_agent(self) -> str:
        """If the agent's container stopped by itself (it exists, exited, and we did not stop it),
        start a fresh one of the same spec on the same workspace volume and return why it stopped;
        else ''. SandboxError if the fresh one cannot start."""
        import docker.errors

        with self._revive_lock:
            if self._stopped or self.verifying or not self.container_id:
                return ""
            if self.alive():  # another thread revived it meanwhile
                return self.agent_restarts[-1] if self.agent_restarts else ""
            try:
                state = self.api.inspect_container(self.container_id)["State"]
            except docker.errors.APIError:  # removed, or no daemon: not something the agent can do
                return ""
            if state.get("Status") not in ("exited", "dead"):
                return ""
            why = f"exit {state.get('ExitCode')}" + (", out of memory: the OOM killer ended its first process"
                                                     if state.get("OOMKilled") else "")
            stopped = self.container_id
            try:
                self.container_id = self._start_container(f"{self.session_id}-r{len(self.agent_restarts) + 1}")
            except Exception as exc:
                raise SandboxError(f"{self.session_id}: the agent's container stopped ({why}) and a fresh one "
                                   f"failed to start: {exc}") from exc
            self.agent_restarts.append(why)
            with contextlib.suppress(Exception):
                self.api.remove_container(stopped, force=True, v=False)
            # Re-seeded only when empty: were the volume's contents kept, the agent's edits would stay.
            self._run_root(f'[ -n "$(ls -A {self.workdir})" ] || tar -xf {WORKSPACE_SEED} -C {self.workdir}; '
                           "mkdir -p /logs/agent")
            return why

    def kill_processes(self) -> None:
        if not self.alive() and not self._revive_if_stopped_by_agent():
            raise SandboxError(f"{self.session_id}: container is not running")
        if os.geteuid() == 0:
            self._kill_frozen()
        else:
            self._run_root("for i in 1 2 3; do kill -9 -1 2>/dev/null; sleep 0.05; done; true")

    def _kill_frozen(self) -> None:
        import docker.errors

        init_pid = int(self.api.inspect_container(self.container_id)["State"]["Pid"])
        for attempt in range(8):
            began = _now_ticks()
            frozen = False
            if attempt < 4:  # freezing can fail under heavy load ("unable to freeze"): then kill unfrozen
                try:
                    self.api.pause(self.container_id)
                    frozen = True
                except docker.errors.APIError:
                    frozen = False
            try:
                for pid in [int(p) for p in _cgroup_pids(self.container_id) if int(p) != init_pid]:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
            finally:
                if frozen:
                    self.api.unpause(self.container_id)
            time.sleep(0.05)
            # Everything that existed got SIGKILL; what is left must have started since (the init
            # loop's fresh `sleep`). An older process means something survived: go again.
            left = [int(p) for p in _cgroup_pids(self.container_id) if int(p) != init_pid]
            if all(_start_ticks(p) >= began - 1 for p in left):
                return
        raise SandboxError(f"{self.session_id}: processes survive SIGKILL")

    def begin_verification(self, tests_dir: Path) -> None:
        """The verifier gets a fresh container of the same image sharing only the workspace volume: the
        agent's /tmp, HOME, /run, /dev/shm, /logs, its processes and anything it wrote to the image's
        filesystem (when that is writable) are not there. The agent's processes are killed first, so
        nothing writes to the workspace while it is graded; the volume outlives the swap because the
        new container holds it before the old one goes."""
        with self._lock:
            self.kill_processes()
            agent_container = self.container_id
            try:
                self.container_id = self._start_container(f"{self.session_id}-verify")
            except Exception as exc:
                self.container_id = agent_container
                raise SandboxError(f"{self.session_id}: starting the verifier's container failed: {exc}") from exc
            with contextlib.suppress(Exception):
                self.api.remove_container(agent_container, force=True, v=True)
            reset = self._run_root("mkdir -p /logs/verifier /tests && chmod 777 /logs/verifier && tar -xf - -C /tests",
                                   stdin=tar_bytes(tests_dir))
            if reset.exit_code != 0:
                raise SandboxError(f"{self.session_id}: installing /tests failed: "
                                   f"{reset.stderr.decode('utf-8', 'replace')[:300]}")
            self.verifying = True

    def stop(self) -> None:
        self._stopped = True
        self._close_skill_watch()
        # Every container by name: the agent's may still be there if the swap to the verifier's failed.
        restarted = [f"{self.session_id}-r{i}" for i in range(1, len(self.agent_restarts) + 1)]
        for name in (self.container_id, self.session_id, *restarted, f"{self.session_id}-verify"):
            if name:
                with contextlib.suppress(Exception):
                    self.api.remove_container(name, force=True, v=True)
        with contextlib.suppress(Exception):
            self.api.remove_volume(self.volume, force=True)
        if self.skills_copy is not None:
            shutil.rmtree(self.skills_copy, ignore_errors=True)


# ---------------------------------------------------------------- helpers


def _copy_skills(skills_dir: Path, into: Path) -> Path:
    """This container's own read-only copy of the skills (start_sandbox refused links in them; one that
    came since is refused too, never followed)."""
    SKILLS_COPIES.mkdir(parents=True, exist_ok=True, mode=0o711)
    try:
        copy_plain_tree(skills_dir, into)
    except NotPlainTree as exc:
        raise SandboxError(f"skills_dir {exc}") from None
    for p in [into, *into.rglob("*")]:  # readable by the image's USER; the bind itself is read-only
        p.chmod(p.stat().st_mode | 0o444 | (0o111 if p.is_dir() else 0))
    return into


def _remove_skills_copy(labels: Mapping[str, str]) -> None:
    """The skills copy an orphaned container names, only if it is one of ours (SKILLS_COPIES/<its session>)."""
    named, session = labels.get(SKILLS_COPY_LABEL, ""), labels.get("org.skillgate.session", "")
    if session and re.fullmatch(r"sg-[a-z0-9-]+", session) and named == str(SKILLS_COPIES / session):
        shutil.rmtree(named, ignore_errors=True)


def _read_frames(sock: socket.socket, stdin: bytes | None, deadline: float,
                 limit: int) -> tuple[OutputBuffer, OutputBuffer, bool]:
    """Demultiplex Docker's exec stream (8-byte headers: stream id, 3 zero bytes, big-endian size)."""
    out, err = OutputBuffer(limit), OutputBuffer(limit)
    if stdin is not None:
        def feed() -> None:
            with contextlib.suppress(OSError):
                sock.sendall(stdin)
                sock.shutdown(socket.SHUT_WR)
        threading.Thread(target=feed, daemon=True).start()
    buf = b""
    timed_out = False
    while True:
        left = deadline - time.perf_counter()
        if left <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([sock], [], [], min(left, 1.0))
        if not ready:
            continue
        try:
            chunk = sock.recv(65536)
        except OSError:
            break
        if not chunk:
            break
        buf += chunk
        while len(buf) >= 8:
            stream, size = buf[0], struct.unpack(">I", buf[4:8])[0]
            if len(buf) < 8 + size:
                break
            (err if stream == 2 else out).add(buf[8:8 + size])
            buf = buf[8 + size:]
    return out, err, timed_out


def _cgroup_pids(container_id: str) -> list[str]:
    """Host pids in the container's cgroup (cgroupfs v1 or v2 layouts, systemd or not)."""
    candidates = [Path(f"/sys/fs/cgroup/pids/docker/{container_id}/cgroup.procs"),
                  Path(f"/sys/fs/cgroup/memory/docker/{container_id}/cgroup.procs"),
                  Path(f"/sys/fs/cgroup/docker/{container_id}/cgroup.procs"),
                  Path(f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/cgroup.procs")]
    for c in candidates:
        if c.exists():
            return c.read_text().split()
    # Fall back to the daemon's view.
    import docker.errors

    try:
        top = docker_client().api.top(container_id, ps_args="-eo pid")
    except docker.errors.APIError as exc:
        # 409: the container is not running (its PID 1 died, e.g. killed by the agent or the OOM killer, and
        # took every process with it): no process is left, and its cgroup is gone, which is why we are here
        if exc.status_code == 409:
            return []
        raise
    return [row[0] for row in top.get("Processes") or []]


def _kill_tree(pid: int) -> None:
    children = Path(f"/proc/{pid}/task/{pid}/children")
    with contextlib.suppress(OSError):
        for child in children.read_text().split():
            _kill_tree(int(child))
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _now_ticks() -> int:
    """Clock ticks since boot (the unit of a process's start time in /proc/PID/stat)."""
    return int(float(Path("/proc/uptime").read_text().split()[0]) * os.sysconf("SC_CLK_TCK"))


def _start_ticks(pid: int) -> int:
    start = _process_start(pid)
    return int(start) if start else 1 << 62  # gone: counts as new


def _process_start(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except OSError:
        return ""


def _orphaned(labels: Mapping[str, str] | None) -> bool:
    """Whether the owner recorded in the labels is a process of this host and PID namespace that is
    gone. Anything else (alive, another host or namespace, no owner label) is not ours to remove."""
    labels = labels or {}
    node, _, rest = labels.get("org.skillgate.owner", "").partition(":")
    pid, _, started = rest.partition(":")
    if node != os.uname().nodename or not pid.isdigit() or not started:
        return False
    if labels.get(OWNER_PIDNS_LABEL, owner_pid_namespace()) != owner_pid_namespace():
        return False
    return _process_start(int(pid)) != started


def cleanup_orphans(config: SandboxConfig | None = None) -> int:
    """Remove our containers and volumes whose owning process (on this host) is gone; 0 where no daemon
    answers (nothing of ours can be running then). `config` is unused: every backend takes one."""
    if unavailable_reason():
        return 0
    api = docker_client().api
    removed = 0
    for c in api.containers(all=True, filters={"label": f"{LABEL}=1"}):
        if not _orphaned(c.get("Labels")):
            continue
        with contextlib.suppress(Exception):
            api.remove_container(c["Id"], force=True, v=True)
            removed += 1
            _remove_skills_copy(c.get("Labels") or {})
    for v in (api.volumes(filters={"label": f"{LABEL}=1"}) or {}).get("Volumes") or []:
        if _orphaned(v.get("Labels")):
            with contextlib.suppress(Exception):
                api.remove_volume(v["Name"], force=True)
    return removed

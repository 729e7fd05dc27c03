"""The episode's persistent shell over a stateless Sandbox: cwd and exported env carry across calls.

    shell = PersistentShell(box)                      # starts in box.workdir with the image's env
    shell.run("cd src && export MODE=fast", timeout=30)
    shell.run("pwd; echo $MODE", timeout=30).stdout   # '/app/src\\nfast\\n'
    job = shell.start_job("python3 -m http.server 8000")   # Docker only (see below)
    shell.poll_job(job.job_id)                        # JobStatus(job={..., 'status': 'running'}, stdout=...)

How the state persists. Sandbox.exec() is stateless (a fresh process tree per call; on bubblewrap a
fresh PID namespace), so the shell keeps its state on the host and replays it: each call runs
`bash -c WRAPPER` with the remembered environment, and the wrapper
  1. reads the agent's command from stdin (no argv size limit; the command's own stdin is then
     /dev/null, as in any non-interactive agent shell),
  2. unsets the variables the agent unset earlier and cd's into the remembered cwd,
  3. evals the command in the shell itself (so `cd` and `export` take effect),
  4. on the way out, normal end or `exit N` alike (an EXIT trap), prints a random marker, the exit
     code, `$PWD` and `env -0` to the original stdout and to a state file under /tmp.
The host strips that trailer from stdout and keeps the new cwd/env. When the trailer is missing
from stdout (stdout passed the sandbox's byte cap, or the command redirected the shell's stdout
itself) the state file is read instead. What persists: cwd, OLDPWD and exported variables
(exported functions too, as bash carries them in the env). What does not: unexported shell
variables, aliases, `set`/`shopt` options, traps. A call that times out is killed with its whole
process tree, so its cwd/env changes are lost (the previous state stays). A variable larger than
MAX_VAR_BYTES is not kept (every variable travels on a command line, and a huge one would make the
next call fail to start): the call's stderr says so.

What a command leaves running (`server &`) dies when its call returns, on both backends: on
bubblewrap because the command is PID 1 of its own PID namespace, on Docker because the wrapper
kills its process group after printing the state (otherwise such a process would outlive the
call on Docker only, and hold the exec's output stream open for seconds). Observations are thus
the same on both backends; a process meant to outlive its call is what `background=true` is for.
(On Docker a process that detaches into its own session, `setsid` or a daemon, still survives.)

Background jobs (`start_job`, Docker only). A job is started with `setsid` (its own session, so
the call's final kill does not reach it) in the shell's cwd/env, its output going to files under
/tmp/.skillgate-jobs; poll returns the output produced since the previous poll, kill SIGKILLs its
process group, and the verifier's kill_processes() ends whatever is left. On bubblewrap every exec
is PID 1 of its own PID namespace and everything it started dies when it returns, so a job cannot
exist there: `start_job` raises BackgroundUnsupported and the exec tool says so, rather than
running the command to completion and pretending it ran in the background.
"""

from __future__ import annotations

import posixpath
import re
import secrets
import shlex
import time
from dataclasses import dataclass, field

from skillgate_core.envs.sandbox import Sandbox

__all__ = [
    "MAX_VAR_BYTES",
    "BackgroundUnsupported",
    "Job",
    "JobStatus",
    "PersistentShell",
    "ShellRun",
    "UnknownJob",
]

MAX_VAR_BYTES = 32 * 1024
"""Largest NAME=VALUE the shell carries to the next call (Linux caps one argv string at 128 KiB)."""
MAX_ENV_BYTES = 256 * 1024
"""Largest total environment carried to the next call (ARG_MAX is 2 MiB, shared with argv)."""
_NOT_CARRIED = frozenset({"_", "SHLVL", "PWD", "OLDPWD"})
"""Exported names bash manages itself; OLDPWD is carried separately (`cd -` keeps working)."""
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_JOB_ROOT = "/tmp/.skillgate-jobs"
_STATE_ROOT = "/tmp/.skillgate-shell"


class BackgroundUnsupported(RuntimeError):
    """This sandbox backend cannot keep a process alive after its exec returns."""


class UnknownJob(KeyError):
    """No background job has that id."""


# A declaration, not logic: each field documented where it is declared (docs/design.md, Style).
@dataclass(frozen=True)
class ShellRun:
    """What one foreground command did, with the shell's state trailer removed."""

    exit_code: int
    """The command's exit status (124 at the timeout)."""
    stdout: str
    """Standard output as the command wrote it (the state trailer stripped)."""
    stderr: str
    """Standard error, plus any notes the shell adds (dropped variables, lost state)."""
    timed_out: bool
    """Killed at the timeout (its cwd/env changes are lost)."""
    cwd: str
    """The shell's cwd after the call."""
    truncated: bool = False
    """The sandbox dropped output past its per-stream byte cap."""
    bad_workdir: bool = False
    """The requested workdir could not be entered; the command did not run."""
    duration_s: float = 0.0
    """Host wall-clock seconds."""


@dataclass
class Job:
    """One background job (Docker only); mutable bookkeeping owned by PersistentShell."""

    job_id: str
    """The sessionId the agent uses with the process tool."""
    pid: int
    """Its process-group id inside the container (setsid makes it a group leader)."""
    command: str
    """The command as the agent wrote it."""
    cwd: str
    """Where it started."""
    started: float
    """time.time() at start."""
    ended: float | None = None
    """time.time() when a poll first saw it finished."""
    status: str = "running"
    """running, exited or killed."""
    exit_code: int | None = None
    """Set once exited (None when it vanished without a status, e.g. killed by the sandbox)."""
    offsets: list[int] = field(default_factory=lambda: [0, 0])
    """Bytes of stdout/stderr already returned by poll."""

    @property
    def paths(self) -> tuple[str, str, str, str]:
        """(script, stdout log, stderr log, exit-code file) inside the sandbox."""
        base = f"{_JOB_ROOT}/{self.job_id}"
        return f"{base}.sh", f"{base}.out", f"{base}.err", f"{base}.rc"

    def describe(self) -> dict[str, object]:
        _, out, err, _ = self.paths
        return {"sessionId": self.job_id, "pid": self.pid, "command": self.command, "cwd": self.cwd,
                "status": self.status, "exit_code": self.exit_code, "stdout_path": out, "stderr_path": err,
                "runtime_s": round((self.ended or time.time()) - self.started, 1)}


@dataclass(frozen=True)
class JobStatus:
    """A poll: the job's state and the output it produced since the previous poll."""

    job: dict[str, object]
    """Job.describe() after the poll."""
    stdout: str
    """New standard output."""
    stderr: str
    """New standard error."""


class PersistentShell:
    """One shell per episode over a stateless sandbox (see the module docstring)."""

    def __init__(self, sandbox: Sandbox, cwd: str | None = None) -> None:
        self.sandbox = sandbox
        self.workspace = cwd or sandbox.workdir
        """Where the shell starts, and where it falls back to when its cwd is deleted."""
        self.cwd = self.workspace
        """The current directory: relative paths of every tool resolve against it."""
        self.env: dict[str, str] | None = None
        """Exported variables after the last call (None before the first: the sandbox's defaults)."""
        self.oldpwd = ""
        """OLDPWD, carried so that `cd -` works across calls."""
        self.seen: set[str] = set()
        """Every variable name ever exported; those missing from env were unset and stay unset."""
        self.jobs: dict[str, Job] = {}
        """Background jobs by id, in start order."""
        token = secrets.token_hex(6)
        self._state_file = f"{_STATE_ROOT}-{token}"
        self._job_counter = 0
        # On Docker, what a command leaves running would outlive the call (and hold the exec's
        # output stream open for seconds): kill its process group once the state is printed, so a
        # call ends the same way on both backends. bubblewrap does this by construction.
        self._reap = sandbox.backend != "bwrap"

    @property
    def supports_background(self) -> bool:
        """Only Docker keeps processes alive between execs (bubblewrap: one PID namespace per call)."""
        return self.sandbox.backend == "docker"

    # -- foreground commands --------------------------------------------------------------------

    def run(self, command: str, timeout: float, workdir: str | None = None) -> ShellRun:
        """Run `command` in the shell; `workdir` (absolute) runs it there without moving the shell's
        cwd. Raises SandboxError only for infrastructure failures."""
        marker = f"__SKILLGATE_STATE_{secrets.token_hex(8)}__"
        script = self._wrapper(marker, workdir)
        result = self.sandbox.exec(script, timeout=timeout, cwd="/", env=self.env,
                                   stdin=command.encode("utf-8", "replace"))
        stdout, trailer = _split_trailer(result.stdout, marker)
        notes: list[str] = []
        if trailer is None and not result.timed_out:
            trailer = self._state_from_file(marker)
        bad_workdir = False
        exit_code = result.exit_code
        if trailer is not None:
            exit_code, flag, pwd, env = trailer
            bad_workdir = flag == "w"
            notes += self._adopt(pwd, env, move_cwd=workdir is None)
        elif not result.timed_out:  # (at a timeout the caller says so; the state is kept as it was)
            notes.append("[skillgate: the shell state could not be read after this command "
                         "(did it replace the shell's EXIT trap or exec another program?); cwd/env unchanged]")
        stderr = result.stderr
        if result.truncated:
            notes.append(f"[skillgate: output past {self.sandbox.config.output_limit_bytes} bytes per stream "
                         "was dropped]")
        if notes:
            stderr = (stderr + ("\n" if stderr and not stderr.endswith("\n") else "") + "\n".join(notes) + "\n")
        return ShellRun(exit_code, stdout, stderr, result.timed_out, self.cwd, result.truncated, bad_workdir,
                        result.duration_s)

    def _wrapper(self, marker: str, workdir: str | None) -> str:
        q = shlex.quote
        env = self.env or {}
        unset = sorted(n for n in self.seen - set(env) if _IDENT.match(n))
        lines = [
            "__sg_cmd=$(command -p cat); exec </dev/null",
            f"__sg_m={q(marker)}; __sg_f={q(self._state_file)}; __sg_flag=-",
            "exec {__sg_out}>&1",
            "__sg_dump() { printf '%s:%d:%s:%s\\0%s\\0' \"$__sg_m\" \"$1\" \"$__sg_flag\" \"$PWD\" \"${OLDPWD-}\"; "
            "command -p env -0; printf '%s' \"$__sg_m\"; }",
            "__sg_exit() { __sg_rc=$?; trap - EXIT; set +eu; "
            "__sg_dump \"$__sg_rc\" > \"$__sg_f\" 2>/dev/null; "
            "{ printf '\\n'; __sg_dump \"$__sg_rc\"; } >&\"$__sg_out\" 2>/dev/null; "
            f"{'kill -KILL 0 2>/dev/null; ' if self._reap else ''}exit \"$__sg_rc\"; }}",
        ]
        if unset:
            lines.append("unset -v " + " ".join(unset))
        lines.append(f"cd -- {q(self.cwd)} 2>/dev/null || {{ printf 'skillgate: the shell cwd %s no longer "
                     f"exists; starting in %s\\n' {q(self.cwd)} {q(self.workspace)} >&2; "
                     f"cd -- {q(self.workspace)} 2>/dev/null || cd /; }}")
        # Our own cd set OLDPWD: put the agent's back (or none, as in a fresh shell).
        lines.append(f"OLDPWD={q(self.oldpwd)}" if self.oldpwd else "unset OLDPWD")
        lines.append("trap __sg_exit EXIT")
        if workdir is not None:
            lines.append(f"cd -- {q(workdir)} || {{ __sg_flag=w; exit 1; }}")
        lines += ['eval "$__sg_cmd"', "__sg_exit"]
        # One line: a syntax error in the command is then reported at its own line number.
        return "; ".join(lines) + "\n"

    def _state_from_file(self, marker: str) -> tuple[int, str, str, dict[str, str]] | None:
        try:
            text = self.sandbox.read_file(self._state_file).decode("utf-8", "replace")
        except OSError:
            return None
        _, trailer = _split_trailer("\n" + text, marker)
        return trailer

    def _adopt(self, pwd: str, env: dict[str, str], move_cwd: bool) -> list[str]:
        notes = []
        if move_cwd and pwd.startswith("/"):
            self.cwd = pwd
        self.oldpwd = env.get("OLDPWD", "")
        kept: dict[str, str] = {}
        dropped: list[str] = []
        for name, value in env.items():
            if name in _NOT_CARRIED:
                continue
            if len(name) + len(value.encode("utf-8", "replace")) + 1 > MAX_VAR_BYTES:
                dropped.append(name)
            else:
                kept[name] = value
        total = sum(len(k) + len(v) + 2 for k, v in kept.items())
        for name in sorted(kept, key=lambda k: -len(kept[k])):
            if total <= MAX_ENV_BYTES:
                break
            total -= len(name) + len(kept[name]) + 2
            dropped.append(name)
            del kept[name]
        self.seen |= set(env) - _NOT_CARRIED
        self.env = kept
        if dropped:
            notes.append(f"[skillgate: not kept in the shell environment (over {MAX_VAR_BYTES // 1024} KiB "
                         f"each or {MAX_ENV_BYTES // 1024} KiB in all): {', '.join(sorted(dropped))}]")
        return notes

    # -- background jobs (Docker) ---------------------------------------------------------------

    def start_job(self, command: str, workdir: str | None = None) -> Job:
        """Start `command` detached in the shell's cwd/env; BackgroundUnsupported on bubblewrap."""
        if not self.supports_background:
            raise BackgroundUnsupported(
                f"background jobs need the docker backend: this sandbox is {self.sandbox.backend}, where every "
                "exec runs in its own PID namespace and its processes die when it returns; run the command "
                "in the foreground with a timeout instead")
        self._job_counter += 1
        job = Job(f"job-{self._job_counter}", 0, command, workdir or self.cwd, time.time())
        script, out, err, rc = job.paths
        q = shlex.quote
        pid_file = f"{_JOB_ROOT}/{job.job_id}.pid"
        # setsid puts the job in its own session, out of reach of the call's final `kill 0`; the
        # launcher waits until the job has written its pid from inside that session. All the job's
        # fds are redirected (the wrapper's saved stdout closed) so the exec's stream ends now.
        launch = (f"command -p mkdir -p {_JOB_ROOT} && printf '%s' {q(command)} > {q(script)} && "
                  f"{{ command -p setsid bash -c 'echo $$ > \"$5\"; bash \"$1\" > \"$2\" 2> \"$3\" < /dev/null; "
                  f"echo $? > \"$4.tmp\"; mv \"$4.tmp\" \"$4\"' sh {q(script)} {q(out)} {q(err)} {q(rc)} {q(pid_file)} "
                  "> /dev/null 2>&1 < /dev/null {__sg_out}>&- & } && "
                  f"for __sg_i in $(seq 500); do [ -s {q(pid_file)} ] && break; sleep 0.01; done; "
                  f"echo \"job-pid:$(cat {q(pid_file)} 2>/dev/null)\"")
        run = self.run(launch, timeout=30, workdir=workdir)
        if run.bad_workdir:
            raise NotADirectoryError(workdir)
        found = re.search(r"job-pid:(\d+)", run.stdout)
        if run.exit_code != 0 or not found:
            raise OSError(f"could not start the background job: {run.stderr.strip() or run.stdout.strip()}")
        job.pid = int(found.group(1))
        self.jobs[job.job_id] = job
        return job

    def job(self, job_id: str) -> Job:
        if job_id not in self.jobs:
            known = ", ".join(self.jobs) or "none"
            raise UnknownJob(f"no background job '{job_id}' (known: {known})")
        return self.jobs[job_id]

    def poll_job(self, job_id: str, *, killed: bool = False) -> JobStatus:
        """Refresh the job's status and return the output produced since the previous poll."""
        job = self.job(job_id)
        _, out, err, rc = job.paths
        q = shlex.quote
        off_out, off_err = job.offsets
        # Status first, then sizes: once the rc file exists the logs are complete.
        script = (f"rc=$(cat {q(rc)} 2>/dev/null); if [ -n \"$rc\" ]; then st=\"exited:$rc\"; "
                  f"elif kill -0 {job.pid} 2>/dev/null; then st=running; else st=gone; fi; "
                  f"so=$(stat -c %s {q(out)} 2>/dev/null || echo 0); se=$(stat -c %s {q(err)} 2>/dev/null || echo 0); "
                  "printf '%s %s %s\\n' \"$st\" \"$so\" \"$se\"; "
                  f"tail -c +{off_out + 1} {q(out)} 2>/dev/null | head -c $((so - {off_out})); "
                  f"tail -c +{off_err + 1} {q(err)} 2>/dev/null | head -c $((se - {off_err})) >&2")
        r = self.sandbox.exec(script, timeout=30, cwd="/")
        head, _, body = r.stdout.partition("\n")
        parts = head.split()
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            self._set_status(job, parts[0], killed)
            job.offsets = [max(off_out, int(parts[1])), max(off_err, int(parts[2]))]
        return JobStatus(job.describe(), body, r.stderr)

    def list_jobs(self) -> list[dict[str, object]]:
        """Every job of this episode, statuses refreshed (one exec for all running ones)."""
        running = [j for j in self.jobs.values() if j.status == "running"]
        if running:
            checks = "; ".join(
                f"rc=$(cat {shlex.quote(j.paths[3])} 2>/dev/null); if [ -n \"$rc\" ]; then echo {j.job_id} exited:$rc; "
                f"elif kill -0 {j.pid} 2>/dev/null; then echo {j.job_id} running; else echo {j.job_id} gone; fi"
                for j in running)
            r = self.sandbox.exec(checks, timeout=30, cwd="/")
            for line in r.stdout.splitlines():
                job_id, _, status = line.partition(" ")
                if job_id in self.jobs:
                    self._set_status(self.jobs[job_id], status)
        return [j.describe() for j in self.jobs.values()]

    def kill_job(self, job_id: str) -> dict[str, object]:
        """SIGKILL the job's whole process group."""
        job = self.job(job_id)
        if job.status == "running":
            self.sandbox.exec(f"kill -KILL -- -{job.pid} 2>/dev/null || kill -KILL {job.pid} 2>/dev/null; true",
                              timeout=30, cwd="/")
            self.poll_job(job_id, killed=True)  # it may have exited on its own just before
        return job.describe()

    @staticmethod
    def _set_status(job: Job, status: str, killed: bool = False) -> None:
        if job.status != "running":
            return
        if status.startswith("exited:"):
            code = status.partition(":")[2].strip()
            job.status, job.exit_code = "exited", int(code) if code.lstrip("-").isdigit() else None
        elif status == "gone":  # no exit status written: killed (by us, or by the sandbox's sweep)
            job.status = "killed" if killed else "exited"
        elif killed:
            job.status = "killed"  # SIGKILL was sent; the kernel may not have reaped it yet
        if job.status != "running":
            job.ended = time.time()


def _split_trailer(stdout: str, marker: str) -> tuple[str, tuple[int, str, str, dict[str, str]] | None]:
    """(stdout without the trailer, (exit code, flag, pwd, env) or None when there is none)."""
    start = stdout.rfind(f"\n{marker}:")
    if start < 0:
        return stdout, None
    body_start = start + 1 + len(marker) + 1
    end = stdout.rfind(marker)
    if end < body_start:
        return stdout, None
    body = stdout[body_start:end]
    rc_text, _, rest = body.partition(":")
    flag, _, rest = rest.partition(":")
    pwd, _, rest = rest.partition("\0")
    oldpwd, _, env_text = rest.partition("\0")
    env: dict[str, str] = {"OLDPWD": oldpwd} if oldpwd else {}
    for entry in env_text.split("\0"):
        name, eq, value = entry.partition("=")
        if eq and name:
            env[name] = value
    try:
        code = int(rc_text)
    except ValueError:
        return stdout, None
    # Output that arrived after the trailer (a process the command left behind) stays visible.
    return stdout[:start] + stdout[end + len(marker):], (code, flag, posixpath.normpath(pwd) if pwd else "", env)


"""The verifier: grade the workspace an episode left, once the agent is gone and out of its reach.

    result = verify(box, task, EpisodeStatus.COMPLETED)
    result.score, result.raw_score, result.missing_reward, result.status, result.detail

Order (docs/method.md 2-3; Harbor's convention):
1. every process the agent started is killed (its background jobs cannot tamper with grading);
2. tests/ is copied in at /tests (the agent never saw it), /logs/verifier is created empty
   (a reward file the agent planted is gone); workspace links into /tests or /logs are removed, and every
   git repository in the folders the agent could write is neutralised (hooks gone, config cut to inert
   settings), so a verifier running git runs none of the agent's commands (`prepare_for_grading`). That
   preparation runs with privileges no file mode stops (`Sandbox.exec_helper`), is bounded in work
   (SandboxConfig.grader_max_entries / grader_max_depth) and fails closed: if it cannot finish, the
   episode is a graded 0 flagged `grader_preparation`, never a pass and never skipped;
3. `/bin/bash /tests/test.sh` runs as a fresh process tree (on Docker in a fresh container sharing
   only the workspace volume; on bubblewrap with fresh /tmp, /var/tmp and /root bound in), cwd =
   WORKDIR, under [verifier] timeout_sec, with the environment `verifier_env` sets: the image's ENV,
   but PATH, PYTHONPATH and LD_LIBRARY_PATH without any folder the agent could write (PATH gets the
   system folders), HOME = the fresh /root, BASH_ENV / ENV / LD_PRELOAD / LD_AUDIT / PYTHONSTARTUP /
   PYTHONHOME / PYTHONUSERBASE blanked, and Python isolated from the agent (PYTHONNOUSERSITE: no user
   site-packages, so no planted .pth or usercustomize; PYTHONSAFEPATH: `python3 -m x` / `-c` from the
   workspace do not put the workspace first on sys.path); then [verifier] env on top (a task may opt
   out there, e.g. PYTHONSAFEPATH = ""). The agent's persistent-shell state (exports, functions,
   aliases) never reaches it;
4. the score is read from /logs/verifier/reward.txt, else reward.json ({"reward": x} or a number):
   score = clip(raw, 0, 1); a missing or non-numeric reward -> 0 with missing_reward=True.

Infrastructure failure (the sandbox died or could not install the tests) is status ABORTED with
score 0 and never counts as a graded 0: training drops the group, evaluation counts it as an error
(docs/method.md 2). What the agent did to its own sandbox, in a sandbox that is still alive, is never one:
tests that cannot start in the workspace it left (exit 126), or a reward that cannot be read, are a
graded 0 (ABORTED there would let an agent turn its failure into a dropped group). Tests that run past [verifier] timeout_sec in a sandbox that is still alive are a
graded 0 (flagged `verifier_timeout`): the validity gate showed the tests finish on a good workspace,
so the hang comes from what the agent left, and it must not buy the agent a dropped group.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from skillgate_core.envs.sandbox import SYSTEM_PATH, Sandbox, SandboxError
from skillgate_core.envs.task_package import TaskPackage

__all__ = ["REWARD_JSON", "REWARD_TXT", "EpisodeStatus", "VerifierResult", "parse_reward", "prepare_for_grading",
           "preparation_script", "verifier_env", "verify"]

VERIFIER_PYTHON = {"PYTHONNOUSERSITE": "1", "PYTHONSAFEPATH": "1", "PYTHONDONTWRITEBYTECODE": "1"}
"""Python isolated from what the agent could prepare (the env form of `python3 -I`, which keeps PYTHONPATH
working for tests that import the graded code)."""
NOT_INHERITED = ("BASH_ENV", "ENV", "LD_PRELOAD", "LD_AUDIT", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONUSERBASE",
                 "PYTHONINSPECT")
"""Image variables that make a shell, the loader or Python run code from a file at start: blanked for
the verifier ([verifier] env may set them)."""
SEARCH_PATHS = ("PYTHONPATH", "LD_LIBRARY_PATH")
"""Image search paths the verifier keeps only the agent-proof entries of, like PATH: a workspace folder
on them runs planted code at start (sitecustomize.py, even encodings/, or a libc.so.6). A task whose
tests import the graded code through one sets it in [verifier] env, knowingly."""
REWARD_TXT = "/logs/verifier/reward.txt"
REWARD_JSON = "/logs/verifier/reward.json"
_MAX_REWARD_BYTES = 64 * 1024


class EpisodeStatus(StrEnum):
    """How an episode ended (docs/method.md 2)."""

    COMPLETED = "completed"
    """The agent stopped on its own: graded."""
    TRUNCATED = "truncated"
    """Turn, token or time budget ran out: still graded from the workspace, and trained on."""
    ABORTED = "aborted"
    """Infrastructure failure: never scored as 0 in training; an error in evaluation."""


@dataclass(frozen=True)
class VerifierResult:
    """The grade of one episode."""

    score: float
    """clip(raw_score, 0, 1); 0 when the reward is missing or the episode was aborted."""
    raw_score: float | None
    """The number test.sh wrote, before clipping (None when missing or non-numeric)."""
    missing_reward: bool
    """test.sh left no usable reward file (counted as 0)."""
    status: EpisodeStatus
    """The episode's status, turned to ABORTED on infrastructure failure."""
    detail: str = ""
    """Why, in one line: the reward source, the parse problem, or the infrastructure failure."""
    reward_file: str = ""
    """Which file the score came from (empty when missing)."""
    test_exit_code: int | None = None
    """Exit status of tests/test.sh (None when it did not run)."""
    duration_s: float = 0.0
    """Seconds spent verifying."""
    extra: dict[str, Any] = field(default_factory=dict)
    """reward.json's other keys (e.g. details), as written."""

    @property
    def resolved(self) -> bool:
        return self.status is not EpisodeStatus.ABORTED and self.score >= 1.0

    @property
    def aborted(self) -> bool:
        return self.status is EpisodeStatus.ABORTED


def aborted(detail: str, duration_s: float = 0.0, test_exit_code: int | None = None) -> VerifierResult:
    return VerifierResult(0.0, None, False, EpisodeStatus.ABORTED, detail, test_exit_code=test_exit_code,
                          duration_s=duration_s)


def parse_reward(text: str, kind: str) -> tuple[float | None, dict[str, Any], str]:
    """(raw score or None, extra fields, problem) from a reward file's text; kind is "txt" or "json"."""
    if kind == "txt":
        token = text.strip()
        try:
            value = float(token)
        except ValueError:
            return None, {}, f"reward.txt is not a number: {token[:40]!r}"
        extra: dict[str, Any] = {}
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            return None, {}, f"reward.json is not JSON: {exc.msg}"
        except RecursionError:
            return None, {}, "reward.json nests too deep to parse"
        if isinstance(data, dict):
            raw = data.get("reward", data.get("score"))
            extra = {k: v for k, v in data.items() if k not in ("reward", "score")}
        else:
            raw, extra = data, {}
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            return None, extra, f"reward.json has no numeric 'reward' (got {type(raw).__name__})"
        value = float(raw)
    if math.isnan(value):
        return None, extra, "reward is NaN"
    return value, extra, ""


def verifier_env(sandbox: Sandbox, task: TaskPackage) -> dict[str, str]:
    """The environment tests/test.sh runs with (see the module docstring); set here, never inherited."""
    image = sandbox.image_env()
    writable = sandbox.agent_writable_dirs()

    def kept(name: str, default: str = "") -> list[str]:
        return [p for p in image.get(name, default).split(":")
                if p.startswith("/") and not any(p == w or p.startswith(w.rstrip("/") + "/") for w in writable)]

    path = kept("PATH", SYSTEM_PATH)
    path += [p for p in SYSTEM_PATH.split(":") if p not in path]
    lists = {name: ":".join(kept(name)) for name in SEARCH_PATHS if name in image}
    return {**dict.fromkeys(NOT_INHERITED, ""), **lists, "PATH": ":".join(path), "HOME": sandbox.verifier_home(),
            "TMPDIR": "/tmp", **VERIFIER_PYTHON, **task.config.verifier.env}


_LONGEST_PATH = 4000
"""Longest path the preparation handles (PATH_MAX is 4096): a longer one fails it, so it is graded 0."""

_UNLINK_GRADER_LINKS = (
    '/usr/bin/find "$@" -xdev -type l -print0 | { bad=0; while IFS= read -r -d "" link; do '
    f'[ ${{#link}} -lt {_LONGEST_PATH} ] || {{ echo "path too long: ${{link:0:200}}..." >&2; bad=1; break; }}; '
    'target=$(/usr/bin/readlink -m -- "$link") || { bad=1; break; }; '
    'case "$target" in /tests|/tests/*|/logs|/logs/*) /bin/rm -f -- "$link" || { bad=1; break; };; esac; '
    'done; exit $bad; }'
)
"""Removes every symbolic link under the roots ("$@") whose target lies under /tests or /logs; fails (exit
not 0) on any error (a folder it cannot list, a path too long to resolve), never skips what it cannot see."""


_GIT_CONFIG_KEEP = (
    "core.repositoryformatversion core.bare core.filemode core.logallrefupdates core.symlinks core.ignorecase "
    "core.precomposeunicode core.autocrlf core.eol core.quotepath extensions.objectformat user.name user.email "
    "init.defaultbranch branch.remote branch.merge remote.url remote.fetch"
)
"""The git settings a repository the agent left keeps for grading: inert ones (nothing they name is run)."""

_GIT_CONFIG_FILTER = r"""
function emit(line,   eq, key) {
  eq = index(line, "="); key = tolower(eq ? substr(line, 1, eq - 1) : line)
  gsub(/^[ \t]+|[ \t]+$/, "", key)
  if (key !~ /^[a-z][a-z0-9-]*$/ || !((sec "." key) in keep)) return
  if (!printed) { print header; printed = 1 }
  sub(/^[ \t]+/, "", line); print "\t" line
}
BEGIN { n = split(KEEP, k, " "); for (i = 1; i <= n; i++) keep[k[i]] = 1 }
cont { cont = ($0 ~ /\\$/); next }
/\\$/ { cont = 1; next }
/^[ \t]*\[/ {
  line = $0; sub(/^[ \t]*\[/, "", line); close_at = index(line, "]")
  if (!close_at) { sec = ""; next }
  head = substr(line, 1, close_at - 1); rest = substr(line, close_at + 1)
  sec = head; sub(/[ \t"].*$/, "", sec); sec = tolower(sec)
  printed = 0; header = "[" head "]"
  gsub(/^[ \t]+|[ \t]+$/, "", rest)
  if (rest != "" && rest !~ /^[#;]/) emit(rest)
  next
}
/^[ \t]*([#;]|$)/ { next }
sec != "" { emit($0) }
"""

_NEUTRALIZE_GIT = (
    'keep="$1"; filter="$2"; shift 2; set -o pipefail; '
    '/usr/bin/find "$@" -xdev -name HEAD -type f -print0 | { bad=0; while IFS= read -r -d "" head; do '
    f'[ ${{#head}} -lt {_LONGEST_PATH} ] || {{ echo "path too long: ${{head:0:200}}..." >&2; bad=1; break; }}; '
    'd=${head%/HEAD}; [ -d "$d/objects" ] || [ -f "$d/commondir" ] || continue; '
    # .config.graded too: a link planted there would have this (privileged) helper write through it
    '/bin/rm -rf -- "$d/hooks" "$d/config.worktree" "$d/.config.graded" || { bad=1; break; }; '
    'if [ -f "$d/config" ] && [ ! -L "$d/config" ]; then '
    '/usr/bin/awk -v KEEP="$keep" "$filter" "$d/config" > "$d/.config.graded" || { bad=1; break; }; '
    'else /bin/rm -rf -- "$d/config" && printf "[core]\\n\\trepositoryformatversion = 0\\n" > "$d/.config.graded" '
    '|| { bad=1; break; }; fi; '
    '/bin/mv -f -- "$d/.config.graded" "$d/config" || { bad=1; break; }; done; exit $bad; }'
)
"""For every git directory in the folders the agent could write: hooks and worktree config removed, the
config cut to `_GIT_CONFIG_KEEP` (`branch.remote` stands for branch.<name>.remote). Git runs what a
repository's config names (core.fsmonitor on `git status`, filter drivers, hooks such as post-index-change,
core.hooksPath, aliases, diff/merge drivers, ...): a verifier that runs git in the workspace would run the
agent's commands. On bubblewrap, core.fsmonitor set by the agent scored 1.0 before this. Fails (exit not
0) on any error instead of skipping a repository."""

_BOUNDS = (
    'max_entries="$1"; max_depth="$2"; shift 2; '
    'n=$( { /usr/bin/find "$@" -xdev -printf . 2>/dev/null || true; } | /usr/bin/head -c $((max_entries + 1)) '
    '| /usr/bin/wc -c); '
    '[ "$n" -le "$max_entries" ] || { echo "more than $max_entries files, folders and links"; exit 3; }; '
    'deep=$(/usr/bin/find "$@" -xdev -mindepth $((max_depth + 1)) -printf . -quit 2>/dev/null); '
    '[ -z "$deep" ] || { echo "folders nested deeper than depth $max_depth"; exit 3; }'
)
"""Exit 3 (saying why on stdout) when the roots ("$@") hold more entries or deeper folders than the
bounds: the count stops reading after max_entries + 1, so no workspace makes the preparation's work grow
past its bounds."""


def neutralize_git_script(roots: Sequence[str]) -> str:
    """The bash command that neutralises every git directory under `roots` (see `_NEUTRALIZE_GIT`)."""
    return "set -- " + " ".join(_shell_quote(x) for x in (_GIT_CONFIG_KEEP, _GIT_CONFIG_FILTER, *roots)) + "; " + _NEUTRALIZE_GIT


def preparation_script(roots: Sequence[str], max_entries: int, max_depth: int) -> str:
    """The bash command of the grader's preparation over `roots`: the bounds (`_BOUNDS`, exit 3), then
    the grader links removed (`_UNLINK_GRADER_LINKS`) and git neutralised (`_NEUTRALIZE_GIT`); any
    other failure exits 4 or 5. Exit 0 only when every step saw and handled everything."""
    # Only the roots this sandbox has (a missing one would fail `find`); a link standing for one is
    # kept as a root and judged like any other link.
    quoted = '"${roots[@]}"'
    keep = " ".join(_shell_quote(r) for r in roots)
    return (f'roots=(); for r in {keep}; do if [ -e "$r" ] || [ -L "$r" ]; then roots+=("$r"); fi; done; '
            '[ ${#roots[@]} -gt 0 ] || exit 0; '
            f"( set -- {max_entries} {max_depth} {quoted}; {_BOUNDS} ) || exit 3; "
            f"( set -o pipefail; set -- {quoted}; {_UNLINK_GRADER_LINKS} ) || exit 4; "
            f"( set -- {_shell_quote(_GIT_CONFIG_KEEP)} {_shell_quote(_GIT_CONFIG_FILTER)} {quoted}; {_NEUTRALIZE_GIT} ) "
            "|| exit 5")


def prepare_for_grading(sandbox: Sandbox) -> str:
    """Run the grader's preparation (`preparation_script`) over the folders the agent could write (not
    /tests, /logs: the grader's) with `Sandbox.exec_helper`'s privileges; returns "" when it completed,
    else why not (the caller grades 0: a preparation that did not finish must never let a link or hook
    through)."""
    roots = [d for d in sandbox.agent_writable_dirs() if d not in ("/tests", "/logs")]
    cfg = sandbox.config
    run = sandbox.exec_helper(preparation_script(roots, cfg.grader_max_entries, cfg.grader_max_depth),
                              timeout=_PREPARATION_TIMEOUT_S)
    if run.ok:
        return ""
    if run.timed_out:
        return f"timed out after {_PREPARATION_TIMEOUT_S:g} s"
    step = {3: "workspace past the bounds", 4: "removing links into /tests and /logs",
            5: "neutralising git repositories"}.get(run.exit_code, f"exit {run.exit_code}")
    said = " / ".join((run.stdout.strip() + "\n" + run.stderr.strip()).strip().splitlines()[-2:])[:300]
    return f"{step}: {said}" if said else step


_PREPARATION_TIMEOUT_S = 120.0
"""The preparation is bounded in work (SandboxConfig.grader_max_entries, grader_max_depth); this is the
last line (a timeout is graded 0 as well)."""


def _shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def verify(sandbox: Sandbox, task: TaskPackage,
           episode_status: EpisodeStatus = EpisodeStatus.COMPLETED) -> VerifierResult:
    """Grade the sandbox's current workspace with task's tests (see the module docstring)."""
    if episode_status is EpisodeStatus.ABORTED:
        return aborted("episode aborted before verification")
    start = time.perf_counter()
    timeout = task.config.verifier.timeout_sec
    try:
        sandbox.begin_verification(task.tests_dir)
        # Links into /tests or /logs can only have been planted to hand the tests their own expected
        # files (or the reward file) as the agent's output: those paths did not exist while the agent
        # ran. They are removed before grading, so the workspace is graded on what the agent wrote; git
        # repositories are neutralised. A preparation that could not finish (a workspace past its
        # bounds, a path it cannot handle, a timeout) is a graded 0: never skipped, never a pass.
        unprepared = prepare_for_grading(sandbox)
        if unprepared:
            if not sandbox.alive():
                return aborted("sandbox died while preparing the grader", time.perf_counter() - start)
            return VerifierResult(0.0, 0.0, False, episode_status,
                                  f"grader preparation failed ({unprepared}): graded 0", "", None,
                                  time.perf_counter() - start, {"grader_preparation": unprepared})
        run = sandbox.exec("exec /bin/bash /tests/test.sh", timeout=timeout, cwd=sandbox.workdir,
                           env=verifier_env(sandbox, task))
        if not sandbox.alive():
            return aborted("sandbox died during verification", time.perf_counter() - start, run.exit_code)
        if run.timed_out:
            # The validity gate proved these tests finish in time on the reference solution's
            # workspace, and the sandbox is alive: what hangs them is the workspace the agent left
            # (e.g. a FIFO where an output file belongs). That is a failed grade, not an
            # infrastructure failure: were it ABORTED, training would drop the whole group, and an
            # agent could make a failure vanish instead of earning its 0.
            return VerifierResult(0.0, 0.0, False, episode_status,
                                  f"verifier timed out after {timeout:g} s on this workspace: graded 0",
                                  "", run.exit_code, time.perf_counter() - start, {"verifier_timeout": True})
        raw: float | None = None
        extra: dict[str, Any] = {}
        problem = source = ""
        for path, kind in ((REWARD_TXT, "txt"), (REWARD_JSON, "json")):
            try:
                text = sandbox.read_file(path, max_bytes=_MAX_REWARD_BYTES).decode("utf-8", "replace")
            except (FileNotFoundError, IsADirectoryError):
                continue
            except OSError as exc:
                if not sandbox.alive():
                    raise SandboxError(f"reading the reward failed: {exc}") from exc
                # The sandbox answers, but the reward cannot be read (the tests could not run in what
                # the agent left, e.g. a workspace it made unenterable): a reward the verifier could not
                # produce is a graded 0, never an ABORTED the agent could choose.
                problem, source = f"{path} could not be read: {exc}", path
                break
            raw, extra, problem = parse_reward(text, kind)
            source = path
            break
    except SandboxError as exc:
        return aborted(f"infrastructure failure: {exc}", time.perf_counter() - start)
    duration = time.perf_counter() - start
    if raw is None:
        tail = run.stderr.strip().splitlines()[-3:] if run.stderr.strip() else []
        why = problem or f"test.sh (exit {run.exit_code}) wrote no {REWARD_TXT} or {REWARD_JSON}"
        if tail:
            why += " | stderr: " + " / ".join(tail)[:300]
        return VerifierResult(0.0, None, True, episode_status, why, source, run.exit_code, duration, extra)
    score = min(1.0, max(0.0, raw))
    detail = f"{source.rsplit('/', 1)[1]}: {raw:g}" + (f" (clipped to {score:g})" if score != raw else "")
    return VerifierResult(score, raw, False, episode_status, detail, source, run.exit_code, duration, extra)

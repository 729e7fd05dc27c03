"""The nine agent tools (docs/method.md 2) run against a Sandbox, and the observation text they make.

    box = start_sandbox(task, backend="bwrap")
    tools = ToolBox(box)                                    # one per episode: holds the shell state
    turn = parse_tool_calls(response)
    results = [tools.run(c, deadline=deadline) for c in turn.calls]
    observation = format_observation(results)               # ONE message for the whole turn
    # <tool_response name='read'>{"content": "...", "path": "/app/x.py", ...}</tool_response>

Contract:
- `ToolBox.run` never raises for the agent's mistakes: an unknown tool, a missing, unexpected or
  mistyped argument (checked against TOOL_SCHEMAS, the schemas the model is shown: tool_args.py), a missing file,
  a patch that does not apply: all come back as ToolResult(ok=False, error=...) naming the argument
  and what was expected. SandboxError (infrastructure) propagates: the episode becomes ABORTED.
- A command that fails or times out is not a tool error: exec returns ok=True with its exit_code,
  timed_out and output (the model must see what happened).
- Relative paths of every tool resolve against the shell's current cwd (exec's `cd` moves it).
- Every text field of a payload (and an error) longer than `output_chars` keeps its head and tail
  around `\\n...[N characters omitted]...\\n` (`truncate_middle`, skillgate_core/agent/tool_results.py).
- Files are read and written through the sandbox (commands inside it), never on the host.
- apply_patch: neither `patch` nor `git` is in the base image (skillgate/base:bookworm), so unified
  diffs are applied on the host by skillgate_core/agent/unified_diff.py, over file content read
  through the sandbox, and written back through it.
- find/grep globs: see skillgate_core/agent/globs.py (brace alternatives and pattern length are
  bounded, and matching cannot backtrack exponentially: both run on the host, not in the sandbox).
- exec/process: see skillgate_core/agent/shell.py (cwd/env persistence; background jobs run on
  Docker only, on bubblewrap `background=true` is an error saying so).
"""

from __future__ import annotations

import posixpath
import re
import shlex
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from skillgate_core.agent.globs import (
    MAX_BRACE_EXPANSIONS,
    MAX_GLOB_CHARS,
    GlobError,
    expand_braces,
    find_superset,
    glob_matcher,
)
from skillgate_core.agent.shell import BackgroundUnsupported, PersistentShell, UnknownJob
from skillgate_core.agent.tool_args import check_arguments
from skillgate_core.agent.tool_results import (
    OUTPUT_CHARS,
    ToolError,
    ToolResult,
    format_observation,
    truncate_middle,
)
from skillgate_core.agent.tool_schemas import TOOL_NAMES
from skillgate_core.agent.unified_diff import PatchError, apply_unified_diff, parse_unified_diff, split_lines
from skillgate_core.envs.sandbox import Sandbox
from skillgate_core.envs.skill_opens import WindowOpens
from skillgate_core.formats.tool_calls import ToolCall

__all__ = [
    "MAX_BRACE_EXPANSIONS",
    "MAX_GLOB_CHARS",
    "OUTPUT_CHARS",
    "PatchError",
    "ToolBox",
    "ToolResult",
    "apply_unified_diff",
    "format_observation",
    "glob_matcher",
    "parse_unified_diff",
    "truncate_middle",
]

MAX_ENTRIES = 1000
"""Lines ls/find return at most (sorted; the payload says when more matched)."""
MAX_LINE_CHARS = 500
"""A grep match line is cut here (minified files would otherwise fill the observation)."""
_MAX_ARG_CHARS = 8192
"""Paths, patterns and globs travel on a command line; longer ones are refused (not the agent's
command or file content: those go through stdin)."""


_GREP_LINE = re.compile(r"^(.*?):(\d+):")


def _grep_key(line: str) -> tuple[str, int]:
    m = _GREP_LINE.match(line)
    return (m.group(1), int(m.group(2))) if m else (line, 0)


def _has_glob(part: str) -> bool:
    return any(c in part for c in "*?[{")


class ToolBox:
    """The tools of one episode over one sandbox; holds the persistent shell (cwd, env, jobs)."""

    def __init__(self, sandbox: Sandbox, *, output_chars: int = OUTPUT_CHARS, default_timeout: float | None = None,
                 max_timeout: float | None = None, workspace: str | None = None) -> None:
        """default_timeout: exec's timeout when the model gives none (default: the sandbox config's
        command_timeout_sec); max_timeout: the most a model may ask for (default: max(default, 600));
        workspace: where the shell starts (default: the task's WORKDIR)."""
        if output_chars < 100:
            raise ValueError(f"output_chars: expected at least 100, got {output_chars}")
        self.sandbox = sandbox
        self.output_chars = output_chars
        self.default_timeout = float(default_timeout or sandbox.config.command_timeout_sec)
        self.max_timeout = float(max_timeout or max(self.default_timeout, 600.0))
        if self.max_timeout < self.default_timeout:
            raise ValueError(f"max_timeout ({self.max_timeout}) is below default_timeout ({self.default_timeout})")
        self.shell = PersistentShell(sandbox, workspace or sandbox.workdir)
        self._handlers: dict[str, Callable[[dict[str, Any], float], dict[str, Any]]] = {
            "read": self._read, "write": self._write, "edit": self._edit, "apply_patch": self._apply_patch,
            "grep": self._grep, "find": self._find, "ls": self._ls, "exec": self._exec, "process": self._process,
        }
        assert set(self._handlers) == set(TOOL_NAMES), "every schema needs a handler"

    @property
    def cwd(self) -> str:
        """The shell's current directory."""
        return self.shell.cwd

    # -- dispatch -------------------------------------------------------------------------------

    def run(self, call: ToolCall, *, deadline: float | None = None) -> ToolResult:
        """Run one call. `deadline` (time.monotonic()) bounds exec and the file tools' commands.
        Raises SandboxError only (infrastructure); everything the agent got wrong is ok=False."""
        return self.call(call.name, call.arguments, deadline=deadline)

    def run_all(self, calls: Iterable[ToolCall], *, deadline: float | None = None) -> list[ToolResult]:
        """Run a turn's calls in order."""
        return [self.run(c, deadline=deadline) for c in calls]

    def call(self, name: str, arguments: Mapping[str, Any] | None = None, *, deadline: float | None = None) -> ToolResult:
        """Run tool `name` with `arguments` (what run() does for a parsed ToolCall). The result says which
        skills the sandbox saw read and consulted before the call and while it ran (`opened_before`,
        `opened`, `consulted_before`, `consulted`)."""
        before = self.sandbox.drain_skill_opens()
        start = time.perf_counter()
        try:
            args = check_arguments(name, arguments if arguments is not None else {})
            budget = self.max_timeout if deadline is None else deadline - time.monotonic()
            if budget <= 0:
                raise ToolError("the episode's time budget is spent; no more commands can run")
            payload = self._handlers[name](args, budget)
        except ToolError as exc:
            return self._result(name, False, {}, self._cut(str(exc)), start, before)
        cut = {k: self._cut(v) if isinstance(v, str) else v for k, v in payload.items()}
        return self._result(name, True, cut, None, start, before)

    def _result(self, name: str, ok: bool, payload: dict[str, Any], error: str | None, start: float,
                before: WindowOpens) -> ToolResult:
        """The call's result with what the sandbox saw opened while it ran (drained now) and before it."""
        duration = time.perf_counter() - start
        during = self.sandbox.drain_skill_opens()
        return ToolResult(name, ok, payload, error, duration, before.read, during.read, before.consulted,
                          during.consulted)

    def _cut(self, text: str) -> str:
        return truncate_middle(text, self.output_chars)

    # -- helpers --------------------------------------------------------------------------------

    def resolve(self, path: str, what: str = "path") -> str:
        """`path` made absolute against the shell's cwd (`~` is HOME); ToolError when unusable."""
        if not path.strip():
            raise ToolError(f"argument '{what}': expected a non-empty path")
        if len(path) > _MAX_ARG_CHARS or "\0" in path:
            raise ToolError(f"argument '{what}': not a usable path (NUL byte or over {_MAX_ARG_CHARS} characters)")
        if path == "~" or path.startswith("~/"):
            home = (self.shell.env or self.sandbox.env).get("HOME", "/root")
            path = home + path[1:]
        full = posixpath.normpath(posixpath.join(self.cwd, path))
        return "/" + full.lstrip("/")

    def _sh(self, script: str, budget: float, stdin: bytes | None = None) -> tuple[int, str, str, bool]:
        """A helper command inside the sandbox (not the agent's shell): (exit, stdout, stderr, dropped)."""
        r = self.sandbox.exec(script, timeout=min(self.default_timeout, budget), cwd="/", stdin=stdin)
        if r.timed_out:
            raise ToolError(f"timed out after {min(self.default_timeout, budget):.0f} s")
        return r.exit_code, r.stdout, r.stderr, r.truncated

    def _read_bytes(self, path: str, budget: float) -> bytes:
        """A whole file (edit, apply_patch); ToolError when missing, a folder, or too large to edit safely."""
        limit = self.sandbox.config.output_limit_bytes
        try:
            data = self.sandbox.read_file(path, max_bytes=limit)
        except IsADirectoryError as exc:
            raise ToolError(f"{path}: is a directory") from exc
        except FileNotFoundError as exc:
            raise ToolError(f"{path}: no such file") from exc
        except OSError as exc:
            raise ToolError(f"{path}: cannot read: {str(exc).split(': ', 2)[-1]}") from exc
        if len(data) >= limit:
            raise ToolError(f"{path}: too large to edit here (over {limit - 1} bytes); use exec (sed, python3)")
        return data

    def _write_bytes(self, path: str, data: bytes, budget: float, executable: bool = False) -> None:
        # `cat >` keeps an existing file's mode and owner (an edited script stays executable).
        q = shlex.quote(path)
        script = f'mkdir -p -- "$(dirname -- {q})" && cat > {q}' + (f" && chmod +x -- {q}" if executable else "")
        code, _, err, _ = self._sh(script, budget, stdin=data)
        if code != 0:
            raise ToolError(f"{path}: cannot write: {err.strip() or f'exit {code}'}")

    @staticmethod
    def _text(path: str, data: bytes) -> str:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ToolError(f"{path}: not UTF-8 text (byte {exc.start}); use exec to change binary files") from exc

    # -- file tools -----------------------------------------------------------------------------

    def _read(self, args: dict[str, Any], budget: float) -> dict[str, Any]:
        path = self.resolve(args["path"])
        offset, limit = args.get("offset", 1), args.get("limit")
        if offset < 1:
            raise ToolError(f"argument 'offset': expected a line number >= 1, got {offset}")
        if limit is not None and limit < 1:
            raise ToolError(f"argument 'limit': expected a number of lines >= 1, got {limit}")
        q = shlex.quote(path)
        pick = f"tail -n +{offset} -- {q}" + (f" | head -n {limit}" if limit is not None else "")
        # Alike in shape to _listing's: each tool's script reports its refusals as exit codes.
        script = (f"if [ -d {q} ]; then exit 21; fi; if [ ! -e {q} ]; then exit 22; fi; "
                  f"n=$(awk 'END {{ print NR }}' {q}) || exit 23; printf '%s\\n' \"$n\"; {pick}")
        code, out, err, dropped = self._sh(script, budget)
        if code == 21:
            raise ToolError(f"{path}: is a directory (use ls)")
        if code == 22:
            raise ToolError(f"{path}: no such file")
        first, _, content = out.partition("\n")
        if code != 0 or not first.strip().isdigit():
            raise ToolError(f"{path}: cannot read: {err.strip() or f'exit {code}'}")
        total = int(first)
        if offset > max(total, 1):
            raise ToolError(f"argument 'offset': {offset} is past the end of {path} ({total} lines)")
        shown = len(split_lines(content))
        if dropped:
            content += (f"\n[skillgate: stopped after {self.sandbox.config.output_limit_bytes} bytes; "
                        "read further with offset/limit]")
        return {"path": path, "content": content, "start_line": offset,
                "end_line": offset + shown - 1 if shown else offset - 1, "total_lines": total}

    def _write(self, args: dict[str, Any], budget: float) -> dict[str, Any]:
        path = self.resolve(args["path"])
        data = args["content"].encode("utf-8")
        self._write_bytes(path, data, budget)
        return {"path": path, "bytes": len(data)}

    def _edit(self, args: dict[str, Any], budget: float) -> dict[str, Any]:
        path = self.resolve(args["path"])
        edits = args["edits"]
        if not edits:
            raise ToolError("argument 'edits': expected at least one {oldText, newText}")
        text = self._text(path, self._read_bytes(path, budget))
        replaced = 0
        for i, e in enumerate(edits):  # applied in order to the evolving text; written only if all fit
            old, new = e["oldText"], e["newText"]
            if not old:
                raise ToolError(f"edits[{i}].oldText: expected non-empty text to find")
            count = text.count(old)
            if count == 0:
                raise ToolError(f"edits[{i}]: oldText not found in {path} (it must match exactly, whitespace "
                                "included); no edit was applied")
            if count > 1 and not e.get("replaceAll", False):
                raise ToolError(f"edits[{i}]: oldText occurs {count} times in {path}; add surrounding text to make "
                                "it unique or set replaceAll; no edit was applied")
            text = text.replace(old, new) if e.get("replaceAll", False) else text.replace(old, new, 1)
            replaced += count if e.get("replaceAll", False) else 1
        self._write_bytes(path, text.encode("utf-8"), budget)
        return {"path": path, "replacements": replaced}

    def _apply_patch(self, args: dict[str, Any], budget: float) -> dict[str, Any]:
        try:
            patches = parse_unified_diff(args["patch"])
        except PatchError as exc:
            raise ToolError(f"patch: {exc}") from exc
        # Every file is computed before anything is written: a hunk that does not fit changes nothing.
        pending: dict[str, str | None] = {}  # path -> new text, None = delete
        modes: dict[str, bool] = {}
        report: dict[str, list[str]] = {"created": [], "modified": [], "deleted": [], "renamed": []}

        def current(path: str) -> str:
            if path in pending:
                if pending[path] is None:
                    raise ToolError(f"patch: {path} is deleted earlier in this patch; no file was changed")
                return pending[path] or ""
            return self._text(path, self._read_bytes(path, budget))

        for fp in patches:
            old = self.resolve(fp.old_path, "patch") if fp.old_path else None
            new = self.resolve(fp.new_path, "patch") if fp.new_path else None
            if old is None:
                assert new is not None
                if (new in pending and pending[new] is not None) or (new not in pending and self.sandbox.exists(new)):
                    raise ToolError(f"patch: {new} already exists (the patch creates it); no file was changed")
                source, text = new, ""
            else:
                source = old
                if not fp.rename and new is not None and new != old:
                    # '--- x.orig' / '+++ x' without git's rename lines: patch whichever exists, x first
                    # (GNU patch's choice), in place.
                    if new in pending or self.sandbox.exists(new):
                        source = old = new
                    else:
                        new = old
                text = current(source)
            try:
                result = apply_unified_diff(text, fp.hunks, new or source)
            except PatchError as exc:
                raise ToolError(f"patch: {exc}; no file was changed") from exc
            if new is None:
                if result.strip():
                    raise ToolError(f"patch: deleting {source}: the file has lines the patch does not remove; "
                                    "no file was changed")
                pending[source] = None
                report["deleted"].append(source)
                continue
            pending[new] = result
            modes[new] = fp.executable
            if old is None:
                report["created"].append(new)
            elif source != new:
                pending[source] = None
                report["renamed"].append(f"{source} -> {new}")
            else:
                report["modified"].append(new)
        for path, content in pending.items():
            if content is not None:
                self._write_bytes(path, content.encode("utf-8"), budget, modes.get(path, False))
        gone = [p for p, c in pending.items() if c is None]
        if gone:
            code, _, err, _ = self._sh("rm -f -- " + " ".join(shlex.quote(p) for p in gone), budget)
            if code != 0:
                raise ToolError(f"patch: removing {', '.join(gone)} failed: {err.strip()}")
        return {k: v for k, v in report.items() if v}

    def _grep(self, args: dict[str, Any], budget: float) -> dict[str, Any]:
        pattern, glob = args["pattern"], args.get("glob")
        if not pattern or len(pattern) > _MAX_ARG_CHARS or "\0" in pattern:
            raise ToolError(f"argument 'pattern': expected a non-empty regular expression of at most "
                            f"{_MAX_ARG_CHARS} characters")
        if glob is not None and (not glob or len(glob) > MAX_GLOB_CHARS or "\0" in glob):
            raise ToolError(f"argument 'glob': expected a non-empty file-name glob such as '*.py' of at most "
                            f"{MAX_GLOB_CHARS} characters")
        path = self.resolve(args.get("path", "."))
        try:
            include = [f"--include={shlex.quote(g)}" for g in expand_braces(glob)] if glob else []
        except GlobError as exc:
            raise ToolError(f"argument 'glob': {exc}") from exc
        script = (f"grep -rnHEI --exclude-dir=.git {' '.join(include)} -e {shlex.quote(pattern)} -- "
                  f"{shlex.quote(path)}")
        code, out, err, dropped = self._sh(script, budget)
        if code == 2 and not out:
            raise ToolError(f"grep: {err.strip() or 'failed'}")
        # Sorted by file, then line: the same tree gives the same observation on every backend.
        lines = sorted(out.splitlines(), key=_grep_key)
        lines = [ln if len(ln) <= MAX_LINE_CHARS else ln[:MAX_LINE_CHARS] + " [line cut]" for ln in lines]
        payload: dict[str, Any] = {"pattern": pattern, "path": path, "matches": "\n".join(lines), "count": len(lines)}
        if glob:
            payload["glob"] = glob
        if dropped:
            payload["truncated"] = True
        return payload

    def _listing(self, base: str, depth: str, test: str, budget: float) -> list[tuple[str, str, str]]:
        """(type letter, path, link target) for entries under `base` (a directory), via find; a
        recursive listing skips .git folders."""
        q = shlex.quote(base)
        prune = "" if depth else "\\( -name .git -prune \\) -o "
        script = (f"if [ ! -e {q} ]; then exit 22; fi; if [ ! -d {q} ]; then exit 20; fi; "
                  f"find {q} -mindepth 1 {depth} {prune}\\( {test} -printf '%y\\t%p\\t%l\\0' \\)")
        code, out, err, _ = self._sh(script, budget)
        if code == 22:
            raise ToolError(f"{base}: no such file or directory")
        if code == 20:
            raise ToolError(f"{base}: not a directory (use read for files)")
        if code != 0 and not out:
            raise ToolError(f"{base}: {err.strip() or f'find failed (exit {code})'}")
        entries = []
        for item in out.split("\0"):
            kind, _, rest = item.partition("\t")
            path, _, target = rest.partition("\t")
            if kind and path:
                entries.append((kind, path, target))
        return entries

    def _find(self, args: dict[str, Any], budget: float) -> dict[str, Any]:
        pattern = args["pattern"].strip()
        if not pattern or len(pattern) > MAX_GLOB_CHARS or "\0" in pattern:
            raise ToolError(f"argument 'pattern': expected a glob such as '*.py' or 'src/**/*.ts' of at most "
                            f"{MAX_GLOB_CHARS} characters")
        base = self.resolve(args.get("path", "."))
        if pattern.startswith("/"):  # an absolute glob: its literal folders become the base
            base, pattern = "/", pattern.lstrip("/")
        anchored = "/" in pattern
        parts = pattern.split("/")
        while anchored and len(parts) > 1 and not _has_glob(parts[0]):
            base = posixpath.join(base, parts.pop(0))
        rel_pattern = "/".join(parts)
        try:
            options = expand_braces(rel_pattern)
            match = glob_matcher(rel_pattern, anchored)
        except GlobError as exc:
            raise ToolError(f"argument 'pattern': {exc}") from exc
        # find lists a coarse superset (one '*' each: its fnmatch backtracks too); glob_matcher decides.
        prefix = base.rstrip("/") + "/" if anchored else ""
        tests = dict.fromkeys(f"{'-path' if anchored else '-name'} {shlex.quote(find_superset(p, prefix))}"
                              for p in options)
        entries = self._listing(base, "", "\\( " + " -o ".join(tests) + " \\)", budget)
        root = base.rstrip("/") + "/"
        found = sorted(p + ("/" if kind == "d" else "") for kind, p, _ in entries
                       if p.startswith(root) and match(p[len(root):]))
        payload: dict[str, Any] = {"pattern": args["pattern"], "path": base, "matches": "\n".join(found[:MAX_ENTRIES]),
                                   "count": len(found)}
        if len(found) > MAX_ENTRIES:
            payload["truncated"] = True
        return payload

    def _ls(self, args: dict[str, Any], budget: float) -> dict[str, Any]:
        base = self.resolve(args.get("path", "."))
        entries = self._listing(base, "-maxdepth 1", "-true", budget)
        names = sorted(posixpath.basename(p) + ("/" if kind == "d" else f" -> {target}" if kind == "l" else "")
                       for kind, p, target in entries)
        payload: dict[str, Any] = {"path": base, "entries": "\n".join(names[:MAX_ENTRIES]), "count": len(names)}
        if len(names) > MAX_ENTRIES:
            payload["truncated"] = True
        return payload

    # -- exec and process -----------------------------------------------------------------------

    def _exec(self, args: dict[str, Any], budget: float) -> dict[str, Any]:
        command = args["command"]
        if not command.strip():
            raise ToolError("argument 'command': expected a non-empty shell command")
        workdir = self.resolve(args["workdir"], "workdir") if "workdir" in args else None
        if args.get("background"):
            try:
                job = self.shell.start_job(command, workdir)
            except BackgroundUnsupported as exc:
                raise ToolError(str(exc)) from exc
            except NotADirectoryError as exc:
                raise ToolError(f"argument 'workdir': {workdir} is not an existing directory") from exc
            except OSError as exc:
                raise ToolError(str(exc)) from exc
            return job.describe()
        asked = args.get("timeout")
        if asked is not None and asked < 1:
            raise ToolError(f"argument 'timeout': expected seconds >= 1, got {asked}")
        timeout = min(float(asked) if asked is not None else self.default_timeout, self.max_timeout, budget)
        run = self.shell.run(command, timeout=timeout, workdir=workdir)
        if run.bad_workdir:
            raise ToolError(f"argument 'workdir': {workdir} is not an existing directory; the command did not run")
        stderr = run.stderr
        if run.timed_out:
            why = ("the maximum" if asked is not None and asked > self.max_timeout else
                   "the episode's remaining time" if timeout == budget else "the timeout")
            stderr += (("\n" if stderr and not stderr.endswith("\n") else "") + f"[skillgate: killed after "
                       f"{timeout:g} s ({why}) with all its processes; its cwd/env changes are lost]\n")
        return {"exit_code": run.exit_code, "stdout": run.stdout, "stderr": stderr, "timed_out": run.timed_out,
                "cwd": run.cwd}

    def _process(self, args: dict[str, Any], budget: float) -> dict[str, Any]:
        action, job_id = args["action"], args.get("sessionId")
        if action == "list":
            payload: dict[str, Any] = {"jobs": self.shell.list_jobs()}
            if not self.shell.supports_background:
                payload["note"] = f"background jobs need the docker backend (this sandbox is {self.sandbox.backend})"
            return payload
        if not job_id:
            raise ToolError(f"process {action}: missing required argument 'sessionId' (string), the id exec "
                            "background=true returned")
        try:
            if action == "poll":
                status = self.shell.poll_job(job_id)
                return {**status.job, "stdout": status.stdout, "stderr": status.stderr}
            return self.shell.kill_job(job_id)
        except UnknownJob as exc:
            raise ToolError(str(exc.args[0])) from exc


"""The common Dockerfile subset, read without Docker, so a task runs on bubblewrap too.

Imported Harbor tasks describe their initial state with environment/Dockerfile. Most only need:

    FROM <image>                 the base: on bubblewrap the host's read-only system plays it
    ARG NAME[=default]           substituted as $NAME / ${NAME} / ${NAME:-x} / ${NAME:+x}
    ENV K=V ... | ENV K V        the command environment
    WORKDIR /path                the agent's working directory (created)
    COPY/ADD [--chmod=M] src... dest   local files of the build context (.dockerignore honoured)
    RUN mkdir/chmod/touch ...    only these, joined by &&
    CMD, ENTRYPOINT, EXPOSE, LABEL, VOLUME, USER, HEALTHCHECK, STOPSIGNAL, SHELL, MAINTAINER: no
                                 effect on a sandbox driven by exec (recorded where useful)

Anything else (RUN apt-get ..., COPY --from, ADD of a URL or archive, multi-stage, files under
/usr or /etc) lands in `DockerfileSpec.needs_docker` with its line number: the task then says it
needs the Docker backend instead of running half-built. Syntax errors raise DockerfileError naming
file and line.

`materialize` applies the file steps to a host directory that stands for the image's writable
top-level directories (e.g. DIR/app, DIR/data); the bubblewrap sandbox binds those in.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

from skillgate_core.envs import image_root

__all__ = [
    "SYSTEM_DIRS",
    "DockerfileError",
    "DockerfileSpec",
    "FileStep",
    "load_dockerfile",
    "materialize",
    "parse_dockerfile",
]

# Top-level directories that come from the (read-only) system on bubblewrap: a task that writes
# into them needs a real image.
SYSTEM_DIRS = frozenset({"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "proc", "dev", "sys",
                         "boot", "run", "skills", "tests", "logs"})
_INSTRUCTIONS = frozenset({"FROM", "RUN", "CMD", "LABEL", "MAINTAINER", "EXPOSE", "ENV", "ADD", "COPY",
                           "ENTRYPOINT", "VOLUME", "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL",
                           "HEALTHCHECK", "SHELL"})
_NO_EFFECT = frozenset({"CMD", "ENTRYPOINT", "EXPOSE", "LABEL", "VOLUME", "HEALTHCHECK", "STOPSIGNAL",
                        "SHELL", "MAINTAINER"})
_ARCHIVE = re.compile(r"\.(tar|tar\.gz|tgz|tar\.bz2|tbz2|tar\.xz|txz|tar\.zst)$")
_VAR = re.compile(r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?::(?P<op>[-+])(?P<word>[^}]*))?\}"
                  r"|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))")
_RUN_FILE_COMMANDS = frozenset({"mkdir", "chmod", "touch"})


class DockerfileError(ValueError):
    """The Dockerfile cannot be read; the message names file and line."""


@dataclass(frozen=True)
class FileStep:
    """One change to the image's files, in Dockerfile order."""

    kind: Literal["copy", "mkdir", "chmod", "touch"]
    """What the step does."""
    line: int
    """Line of the Dockerfile it comes from (1-based)."""
    paths: tuple[str, ...]
    """copy: sources relative to the build context; mkdir/chmod/touch: absolute paths in the image."""
    dest: str = ""
    """copy: absolute destination in the image (a trailing / means a directory)."""
    mode: str = ""
    """chmod: the mode argument; copy: the --chmod value; else empty."""


@dataclass(frozen=True)
class DockerfileSpec:
    """What a Dockerfile asks of the image, as far as the common subset goes."""

    source: str
    """The file it was read from (for messages)."""
    base_images: tuple[str, ...]
    """Images named by FROM lines (stage references excluded), in order."""
    workdir: str
    """Final WORKDIR (absolute; "/" when never set)."""
    env: dict[str, str] = field(default_factory=dict)
    """Final ENV values."""
    user: str = ""
    """Final USER (empty: root)."""
    steps: tuple[FileStep, ...] = ()
    """File steps (COPY/ADD of local files, WORKDIR creation, RUN mkdir/chmod/touch), in order."""
    needs_docker: tuple[str, ...] = ()
    """Why the subset is not enough ("line N: ..."); empty means bubblewrap can build it."""

    @property
    def bwrap_compatible(self) -> bool:
        return not self.needs_docker


def load_dockerfile(path: str | os.PathLike[str]) -> DockerfileSpec:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DockerfileError(f"{p}: not UTF-8 text ({exc.reason})") from exc
    return parse_dockerfile(text, str(p))


def parse_dockerfile(text: str, source: str = "Dockerfile") -> DockerfileSpec:
    """Parse `text`; raise DockerfileError for syntax errors, list unsupported parts in needs_docker."""
    instructions = _logical_lines(text, source)
    if not instructions or instructions[0][1] not in ("FROM", "ARG"):
        raise DockerfileError(f"{source}: the first instruction must be FROM (or ARG before FROM)")
    args: dict[str, str] = {}
    env: dict[str, str] = {}
    workdir = "/"
    user = ""
    stages: list[str] = []
    bases: list[str] = []
    steps: list[FileStep] = []
    needs: list[str] = []
    n_from = 0

    def subst(value: str) -> str:
        return _substitute(value, {**args, **env})

    for line, op, rest in instructions:
        where = f"line {line}"
        if not rest.strip() and op not in ("ONBUILD",):
            raise DockerfileError(f"{source}:{line}: {op} needs arguments")
        if op == "FROM":
            words = subst(rest).split()
            flags = [w for w in words if w.startswith("--")]
            words = [w for w in words if not w.startswith("--")]
            if flags:
                needs.append(f"{where}: FROM {' '.join(flags)}")
            if len(words) == 3 and words[1].lower() == "as":
                name = words[2]
            elif len(words) == 1:
                name = ""
            else:
                raise DockerfileError(f"{source}:{line}: FROM expects 'IMAGE [AS NAME]', got '{rest.strip()}'")
            n_from += 1
            if n_from > 1:
                needs.append(f"{where}: multi-stage build")
            if words[0] not in stages:
                bases.append(words[0])
            if name:
                stages.append(name)
            env = {}  # a stage starts with the base image's environment
        elif op == "ARG":
            name, _, default = rest.strip().partition("=")
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise DockerfileError(f"{source}:{line}: ARG expects NAME[=default], got '{rest.strip()}'")
            args[name] = subst(_unquote(default))
        elif op == "ENV":
            for key, value in _parse_env(rest, source, line):
                env[key] = subst(value)
        elif op == "WORKDIR":
            path = subst(_unquote(rest.strip()))
            workdir = str(PurePosixPath(workdir, path)) if not path.startswith("/") else _normpath(path)
            workdir = _normpath(workdir)
            steps.append(FileStep("mkdir", line, (workdir,)))
            _check_writable_target(workdir, where, needs)
        elif op == "USER":
            user = subst(rest.strip())
        elif op in ("COPY", "ADD"):
            step = _parse_copy(op, rest, line, source, workdir, subst, needs)
            if step is not None:
                steps.append(step)
        elif op == "RUN":
            steps.extend(_parse_run(rest, line, workdir, subst, needs))
        elif op == "ONBUILD":
            needs.append(f"{where}: ONBUILD")
        elif op in _NO_EFFECT:
            pass
    if not n_from:
        raise DockerfileError(f"{source}: no FROM instruction")
    return DockerfileSpec(source=source, base_images=tuple(bases), workdir=workdir, env=env, user=user,
                          steps=tuple(steps), needs_docker=tuple(dict.fromkeys(needs)))


def materialize(spec: DockerfileSpec, context: Path, root: Path) -> None:
    """Apply `spec`'s file steps inside `root` (root/app stands for /app). Needs bwrap_compatible.

    Runs as root on the host, so no step ever goes through a symbolic link (image_root): a link
    copied from the context stays a link for the sandbox, and a step whose path passes through one
    is a DockerfileError naming the line and the link."""
    if not spec.bwrap_compatible:
        raise DockerfileError(f"{spec.source}: needs Docker: {'; '.join(spec.needs_docker)}")
    ctx = context.resolve()
    ignore = _dockerignore(ctx)
    root.mkdir(parents=True, exist_ok=True)
    for step in spec.steps:
        where = f"{spec.source}:{step.line}"
        try:
            if step.kind == "mkdir":
                for p in step.paths:
                    image_root.make_dirs(root, p)
            elif step.kind == "touch":
                for p in step.paths:
                    image_root.touch(root, p)
            elif step.kind == "chmod":
                for p in step.paths:
                    try:
                        _chmod(root, p, step.mode, spec.source, step.line)
                    except (FileNotFoundError, NotADirectoryError):
                        raise DockerfileError(f"{where}: chmod: {p} does not exist in the image") from None
            else:
                _copy_step(step, ctx, root, ignore, spec.source)
        except image_root.UnsafePath as exc:
            raise DockerfileError(f"{where}: {exc}") from exc
        except OSError as exc:
            raise DockerfileError(f"{where}: {step.kind} {exc.filename or ''}: {exc.strerror or exc}") from exc


# ---------------------------------------------------------------- parsing helpers


def _logical_lines(text: str, source: str) -> list[tuple[int, str, str]]:
    """[(first line number, INSTRUCTION, arguments)] after joining continuation lines."""
    escape = "\\"
    lines = text.splitlines()
    # A parser directive (`# escape=``) may only appear before any instruction or comment.
    for raw in lines:
        m = re.match(r"#\s*escape\s*=\s*(\S)\s*$", raw.strip())
        if m:
            escape = m.group(1)
            continue
        break
    out: list[tuple[int, str, str]] = []
    buf: list[str] = []
    start = 0
    for number, raw in enumerate(lines, 1):
        stripped = raw.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if buf and stripped.startswith("#"):
            continue  # comment lines inside a continuation are dropped
        if not buf:
            start = number
        if stripped.endswith(escape) and not stripped.endswith(escape * 2):
            buf.append(raw.rstrip()[:-1])
            continue
        buf.append(raw)
        joined = " ".join(part.strip() for part in buf).strip()
        buf = []
        op, _, rest = joined.partition(" ")
        if "<<" in rest and re.search(r"<<-?\s*['\"]?[A-Za-z_]+['\"]?\s*$", rest) and op.upper() in ("RUN", "COPY"):
            raise DockerfileError(f"{source}:{start}: heredocs are not supported")
        if op.upper() not in _INSTRUCTIONS:
            raise DockerfileError(f"{source}:{start}: unknown instruction '{op}'")
        out.append((start, op.upper(), rest.strip()))
    if buf:
        raise DockerfileError(f"{source}:{start}: the file ends inside a line continuation")
    return out


def _substitute(value: str, scope: dict[str, str]) -> str:
    def repl(m: re.Match[str]) -> str:
        name = m.group("braced") or m.group("plain")
        current = scope.get(name, "")
        if m.group("op") == "-":
            return current or m.group("word")
        if m.group("op") == "+":
            return m.group("word") if current else ""
        return current

    return _VAR.sub(repl, value)


def _unquote(value: str) -> str:
    v = value.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
        return v[1:-1]
    return v


def _parse_env(rest: str, source: str, line: int) -> list[tuple[str, str]]:
    try:
        words = shlex.split(rest, posix=True)
    except ValueError as exc:
        raise DockerfileError(f"{source}:{line}: ENV: {exc}") from exc
    if not words:
        raise DockerfileError(f"{source}:{line}: ENV needs KEY=VALUE")
    if "=" not in words[0]:  # legacy form: ENV KEY value with spaces
        key, _, value = rest.strip().partition(" ")
        return [(key, _unquote(value.strip()))]
    pairs = []
    for w in words:
        key, sep, value = w.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", key):
            raise DockerfileError(f"{source}:{line}: ENV expects KEY=VALUE pairs, got '{w}'")
        pairs.append((key, value))
    return pairs


def _parse_copy(op: str, rest: str, line: int, source: str, workdir: str, subst, needs: list[str]) -> FileStep | None:
    where = f"line {line}"
    text = rest.strip()
    flags: dict[str, str] = {}
    while text.startswith("--"):
        flag, _, text = text.partition(" ")
        name, _, value = flag[2:].partition("=")
        flags[name] = value
        text = text.strip()
    if text.startswith("["):
        try:
            words = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DockerfileError(f"{source}:{line}: {op}: invalid JSON array: {exc.msg}") from exc
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise DockerfileError(f"{source}:{line}: {op}: expected a JSON array of strings")
    else:
        words = text.split()
    words = [subst(w) for w in words]
    if len(words) < 2:
        raise DockerfileError(f"{source}:{line}: {op} expects at least one source and a destination")
    if "from" in flags:
        needs.append(f"{where}: {op} --from={flags['from']}")
        return None
    unknown_flags = sorted(set(flags) - {"chown", "chmod", "link"})
    if unknown_flags:
        needs.append(f"{where}: {op} --{unknown_flags[0]}")
        return None
    *sources, dest = words
    for src in sources:
        if op == "ADD" and (re.match(r"^[a-z]+://", src) or src.startswith("git@")):
            needs.append(f"{where}: ADD of a URL ({src})")
            return None
        if op == "ADD" and _ARCHIVE.search(src):
            needs.append(f"{where}: ADD of an archive ({src}) is unpacked by Docker")
            return None
        norm = os.path.normpath(src.lstrip("/"))
        if norm == ".." or norm.startswith("../"):
            raise DockerfileError(f"{source}:{line}: {op} source '{src}' is outside the build context")
    trailing = dest.endswith("/")
    abs_dest = dest if dest.startswith("/") else str(PurePosixPath(workdir, dest))
    abs_dest = _normpath(abs_dest) + ("/" if trailing and abs_dest != "/" else "")
    _check_writable_target(abs_dest, where, needs)
    mode = flags.get("chmod", "")
    srcs = tuple(os.path.normpath(s.lstrip("/")) for s in sources)
    return FileStep("copy", line, srcs, dest=abs_dest, mode=mode)


def _parse_run(rest: str, line: int, workdir: str, subst, needs: list[str]) -> list[FileStep]:
    where = f"line {line}"
    text = rest.strip()
    short = text if len(text) <= 60 else text[:57] + "..."
    if text.startswith("["):
        try:
            argv = json.loads(text)
            parts = [argv] if isinstance(argv, list) and all(isinstance(a, str) for a in argv) else None
        except json.JSONDecodeError:
            parts = None
    else:
        if re.search(r"[|;<>`()]|\$\(|(?<!&)&(?!&)", text):
            parts = None
        else:
            try:
                parts = [shlex.split(chunk) for chunk in text.split("&&")]
            except ValueError:
                parts = None
    if not parts or any(not p or p[0] not in _RUN_FILE_COMMANDS for p in parts):
        needs.append(f"{where}: RUN {short}")
        return []
    steps: list[FileStep] = []
    for argv in parts:
        cmd, words = argv[0], [subst(w) for w in argv[1:]]
        opts = [w for w in words if w.startswith("-")]
        paths = [w for w in words if not w.startswith("-")]
        mode = ""
        if cmd == "chmod":
            if opts and opts != ["-R"] or not paths:
                needs.append(f"{where}: RUN {short}")
                return []
            mode, paths = paths[0], paths[1:]
            if opts:
                mode = "-R " + mode
        elif cmd == "mkdir" and any(o not in ("-p", "--parents") for o in opts):
            needs.append(f"{where}: RUN {short}")
            return []
        elif cmd == "touch" and opts:
            needs.append(f"{where}: RUN {short}")
            return []
        if not paths or any(ch in p for p in paths for ch in "*?[~"):
            needs.append(f"{where}: RUN {short}")
            return []
        abs_paths = tuple(_normpath(p if p.startswith("/") else str(PurePosixPath(workdir, p))) for p in paths)
        for p in abs_paths:
            _check_writable_target(p, where, needs)
        steps.append(FileStep(cmd, line, abs_paths, mode=mode))
    return steps


def _normpath(path: str) -> str:
    norm = os.path.normpath(path)
    return "/" + norm.lstrip("/") if norm != "." else "/"


def _check_writable_target(path: str, where: str, needs: list[str]) -> None:
    top = PurePosixPath(path).parts[1:2]
    if not top:
        needs.append(f"{where}: writes into / itself")
    elif top[0] in SYSTEM_DIRS:
        needs.append(f"{where}: writes under /{top[0]} (a system directory on bubblewrap)")


# ---------------------------------------------------------------- materializing


def _dockerignore(ctx: Path) -> Callable[[str], bool]:
    """Whether a path of the context (relative, '/'-separated) is excluded by ctx/.dockerignore,
    decided by the docker SDK's matcher, as for the Docker backend's builds: `*` and `?` stay within
    one folder, `**` spans folders, a folder's pattern covers what is under it, `!` re-includes, and
    the last matching pattern decides."""
    f = ctx / ".dockerignore"
    if not f.is_file():
        return lambda rel: False
    from docker.utils.build import PatternMatcher  # here: importing the SDK costs ~0.1 s

    lines = [raw.strip() for raw in f.read_text(encoding="utf-8").splitlines()]
    matcher = PatternMatcher([s for s in lines if s and not s.startswith("#")])
    # The SDK appends "!.dockerignore" so that its client always uploads that file; COPY does not copy
    # an excluded .dockerignore into the image (Docker's documented behaviour), so that one goes.
    last = matcher.patterns[-1] if matcher.patterns else None
    if last is not None and last.exclusion and last.cleaned_pattern == ".dockerignore":
        matcher.patterns.pop()
    return matcher.matches  # type: ignore[return-value]  # types-docker says PathLike; the SDK takes str paths


def _expand_sources(step: FileStep, ctx: Path, source: str) -> list[Path]:
    found: list[Path] = []
    for src in step.paths:
        if any(ch in src for ch in "*?["):
            matches = sorted(ctx.glob(src))
            if not matches:
                raise DockerfileError(f"{source}:{step.line}: COPY source '{src}' matches no file of the context")
            found.extend(matches)
        else:
            p = ctx / src if src != "." else ctx
            if not p.exists() and not p.is_symlink():
                raise DockerfileError(f"{source}:{step.line}: COPY source '{src}' not found in {ctx}")
            found.append(p)
    for p in found:
        resolved = p.resolve()
        if resolved != ctx and ctx not in resolved.parents:
            raise DockerfileError(f"{source}:{step.line}: COPY source '{p}' resolves outside the build context")
    return found


def _copy_step(step: FileStep, ctx: Path, root: Path, ignored: Callable[[str], bool], source: str) -> None:
    sources = _expand_sources(step, ctx, source)
    dest = step.dest.rstrip("/") or "/"
    into_dir = step.dest.endswith("/") or len(sources) > 1 or image_root.is_dir(root, dest)
    for src in sources:
        rel = src.relative_to(ctx).as_posix() if src != ctx else ""
        if src.is_dir() and not src.is_symlink():
            image_root.make_dirs(root, dest)
            for item in sorted(src.rglob("*")):  # (rglob does not descend into linked folders)
                item_rel = item.relative_to(ctx).as_posix()
                if ignored(item_rel):
                    continue
                _copy_one(item, posixpath.join(dest, item.relative_to(src).as_posix()), root, step.mode, source,
                          step.line)
        else:
            if rel and ignored(rel):
                continue
            _copy_one(src, posixpath.join(dest, src.name) if into_dir else dest, root, step.mode, source, step.line)


def _copy_one(src: Path, image_path: str, root: Path, mode: str, source: str, line: int) -> None:
    if src.is_symlink():
        image_root.make_symlink(root, image_path, os.readlink(src))
        return
    if src.is_dir():
        image_root.make_dirs(root, image_path)
    else:
        image_root.copy_file(root, image_path, src)
    if mode:
        _chmod(root, image_path, mode, source, line)


def _chmod(root: Path, image_path: str, mode: str, source: str, line: int) -> None:
    recursive = mode.startswith("-R ")
    spec = mode[3:] if recursive else mode
    image_root.chmod(root, image_path, lambda current, is_dir: _apply_mode(current, spec, is_dir, source, line),
                     recursive)


def _apply_mode(current: int, spec: str, is_dir: bool, source: str, line: int) -> int:
    """Octal modes and the symbolic forms tasks use (+x, u+rw, a-w, go=r, ...)."""
    if re.fullmatch(r"[0-7]{1,4}", spec):
        return int(spec, 8)
    mode = current
    for clause in spec.split(","):
        m = re.fullmatch(r"([ugoa]*)([-+=])([rwxX]*)", clause)
        if not m:
            raise DockerfileError(f"{source}:{line}: chmod mode '{spec}' is not supported")
        who, op, perms = m.groups()
        who = who or "a"
        bits = 0
        for ch in perms:
            if ch == "X" and not (is_dir or current & 0o111):
                continue
            bits |= {"r": 0o4, "w": 0o2, "x": 0o1, "X": 0o1}[ch]
        mask = 0
        for w in "ugo" if "a" in who else who:
            mask |= bits << {"u": 6, "g": 3, "o": 0}[w]
        if op == "+":
            mode |= mask
        elif op == "-":
            mode &= ~mask
        else:
            clear = 0
            for w in "ugo" if "a" in who else who:
                clear |= 0o7 << {"u": 6, "g": 3, "o": 0}[w]
            mode = (mode & ~clear) | mask
    return mode

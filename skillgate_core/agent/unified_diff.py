"""Unified diffs parsed and applied on the host, for the apply_patch tool.

    patches = parse_unified_diff(text)                  # [FilePatch(old_path, new_path, hunks, ...)]
    new_text = apply_unified_diff(old_text, patches[0].hunks, "src/x.py")

Neither `patch` nor `git` is in the base image (skillgate/base:bookworm), so the apply_patch tool
reads the files through the sandbox, applies the hunks here and writes the results back. Lenient
where models slip (miscounted hunk headers, a bare `@@`, blank context lines, prose around the
diff, trailing whitespace); a hunk is placed where its context matches, nearest to its header's line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["FilePatch", "Hunk", "PatchError", "apply_unified_diff", "parse_unified_diff", "split_lines"]


class PatchError(ValueError):
    """A patch that cannot be parsed or does not apply; the message names the file and hunk."""


@dataclass(frozen=True)
class Hunk:
    """One `@@ -a,b +c,d @@` block."""

    old_start: int | None
    """Line number of the hunk's first old line (1-based; for a pure insertion, the line after which);
    None for a bare `@@` header without numbers: the hunk is then placed by its context alone."""
    old_count: int
    """Old lines the header claims (for messages only: models often get it wrong)."""
    lines: tuple[tuple[str, str], ...]
    """(op, text with its line ending): op ' ' context, '-' removed, '+' added."""


@dataclass(frozen=True)
class FilePatch:
    """The hunks for one file."""

    old_path: str | None
    """Path before, git's a/ prefix removed (None: the file is created)."""
    new_path: str | None
    """Path after, git's b/ prefix removed (None: the file is deleted)."""
    hunks: tuple[Hunk, ...]
    """In file order."""
    rename: bool = False
    """git's `rename from` / `rename to`: old_path moves to new_path."""
    executable: bool = False
    """git's `new file mode 100755`."""


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_BARE_HUNK = re.compile(r"^@@(?:\s.*)?$")
_GIT_META = ("new file mode", "deleted file mode", "rename from ", "rename to ", "index ", "similarity index",
             "dissimilarity index", "old mode", "new mode", "copy from ", "copy to ")


def _diff_path(raw: str, prefix: str) -> str | None:
    path = raw.split("\t", 1)[0].strip()
    if len(path) >= 2 and path[0] == path[-1] == '"':  # git C-quotes unusual names ("caf\\303\\251")
        try:
            path = path[1:-1].encode("latin-1").decode("unicode_escape").encode("latin-1").decode("utf-8")
        except UnicodeError:
            path = path[1:-1]
    if path == "/dev/null":
        return None
    return path[len(prefix):] if path.startswith(prefix) else path  # -p1 for git-style a/ b/ paths


class _Builder:
    """One file's headers and hunks while parsing."""

    def __init__(self) -> None:
        self.old: str | None = None
        self.new: str | None = None
        self.named = False
        self.headers = False
        self.hunks: list[Hunk] = []
        self.rename = self.executable = self.created = self.deleted = False

    def build(self) -> FilePatch | None:
        if not (self.hunks or self.created or self.deleted or self.rename):
            return None
        return FilePatch(None if self.created else self.old, None if self.deleted else self.new,
                         tuple(self.hunks), self.rename, self.executable)


def _parse_hunk(lines: list[str], i: int) -> tuple[list[tuple[str, str]], int]:
    """The body of the hunk whose header is lines[i-1]: (body, index of the first line after it)."""
    body: list[tuple[str, str]] = []
    blank_tail = 0  # trailing entries that came from empty lines (maybe just the patch's end)
    while i < len(lines):
        ln = lines[i]
        if ln.startswith("\\"):  # "\ No newline at end of file": the previous line has no EOL
            if body:
                op, t = body[-1]
                body[-1] = (op, t[:-1] if t.endswith("\n") else t)
            i += 1
            continue
        if ln.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            break
        if ln == "":
            body.append((" ", "\n"))
            blank_tail += 1
        elif ln[0] in " -+":
            body.append((ln[0], ln[1:] + "\n"))
            blank_tail = 0
        else:
            break
        i += 1
    if blank_tail:
        del body[-blank_tail:]
    return body, i


def parse_unified_diff(text: str) -> list[FilePatch]:
    """Parse a unified diff (plain or git-style, one or more files). Lenient where models slip: the
    hunk header's counts are not trusted (a hunk runs until a line that cannot belong to it), an
    empty line inside a hunk is a blank context line, trailing empty lines are dropped, and prose
    around the diff is ignored. Raises PatchError when no file change is found."""
    lines = text.split("\n")
    done: list[FilePatch] = []
    cur: _Builder | None = None

    def flush() -> None:
        built = cur.build() if cur is not None else None
        if built is not None:
            done.append(built)

    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            flush()
            cur = _Builder()
            m = re.match(r"diff --git a/(\S+) b/(\S+)\s*$", line)
            if m:
                cur.old, cur.new, cur.named = m.group(1), m.group(2), True
            i += 1
        elif cur is not None and not cur.hunks and line.startswith(_GIT_META):
            if line.startswith("new file mode"):
                cur.created, cur.executable = True, line.rstrip().endswith("755")
            elif line.startswith("deleted file mode"):
                cur.deleted = True
            elif line.startswith("rename from "):
                cur.rename, cur.old = True, line[len("rename from "):].strip()
            elif line.startswith("rename to "):
                cur.rename, cur.new = True, line[len("rename to "):].strip()
            i += 1
        elif line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            if cur is None or cur.hunks or cur.headers:
                flush()
                cur = _Builder()
            old, new = _diff_path(line[4:], "a/"), _diff_path(lines[i + 1][4:], "b/")
            cur.created, cur.deleted = cur.created or old is None, cur.deleted or new is None
            cur.old, cur.new = old if old is not None else cur.old, new if new is not None else cur.new
            if cur.old is None:
                cur.old = cur.new
            if cur.new is None:
                cur.new = cur.old
            cur.named = cur.headers = True
            i += 2
        elif _HUNK.match(line) or _BARE_HUNK.match(line):
            m = _HUNK.match(line)
            if cur is None or not cur.named:
                raise PatchError(f"patch line {i + 1}: hunk before any '--- FILE' / '+++ FILE' header")
            body, i = _parse_hunk(lines, i + 1)
            if not any(op in "-+" for op, _ in body):
                raise PatchError(f"patch line {i}: hunk '{line.strip()}' changes nothing")
            if m:
                cur.hunks.append(Hunk(int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1), tuple(body)))
            else:
                cur.hunks.append(Hunk(None, 0, tuple(body)))
        else:
            i += 1  # prose, "Index:" lines, blank lines between files
    flush()
    if not done:
        if "*** Begin Patch" in text:
            raise PatchError("this is a '*** Begin Patch' patch; apply_patch takes a unified diff "
                             "('--- a/FILE', '+++ b/FILE', '@@ -l,n +l,n @@' hunks)")
        raise PatchError("no file changes found; expected a unified diff ('--- a/FILE', '+++ b/FILE', '@@' hunks)")
    return done



def split_lines(text: str) -> list[str]:
    """`text` as lines, each with its line ending (a last line without one is kept)."""
    return re.findall(r"[^\n]*\n|[^\n]+\Z", text)


def _norm(line: str) -> str:
    return line.rstrip()


def _find(lines: list[str], old: list[str], expected: int, lo: int) -> int | None:
    """Where `old` occurs in lines[lo:], nearest to `expected`: exact first, then ignoring trailing
    whitespace and line endings (GNU patch -l style)."""
    n = len(old)
    last = len(lines) - n
    if last < lo:
        return None
    order = sorted(range(lo, last + 1), key=lambda p: (abs(p - expected), p))
    for same in ((lambda a, b: a == b), (lambda a, b: _norm(a) == _norm(b))):
        for p in order:
            if all(same(lines[p + k], old[k]) for k in range(n)):
                return p
    return None


def apply_unified_diff(text: str, hunks: Sequence[Hunk], path: str = "file") -> str:
    """Apply `hunks` (in order, non-overlapping) to `text`; PatchError names the hunk that does not fit.
    Each hunk is placed where its context and removed lines match, nearest to its header's line;
    context lines keep the file's own text."""
    lines = split_lines(text)
    out: list[str] = []
    pos = 0
    shift = 0  # how far earlier hunks landed from their headers: later ones are expected as far off
    for number, hunk in enumerate(hunks, 1):
        old = [t for op, t in hunk.lines if op != "+"]
        if old:
            at = _find(lines, old, pos if hunk.old_start is None else hunk.old_start - 1 + shift, pos)
        elif hunk.old_start is not None:  # a pure insertion goes after line old_start
            at = min(max(hunk.old_start + shift, pos), len(lines))
        elif not lines:
            at = 0
        else:
            raise PatchError(f"{path}: hunk {number} has neither line numbers nor context lines: "
                             "cannot tell where it goes")
        if at is None:
            first = next((t for op, t in hunk.lines if op != "+"), "").rstrip("\n")
            where = "@@" if hunk.old_start is None else f"@@ -{hunk.old_start},{hunk.old_count}"
            raise PatchError(f"{path}: hunk {number} ({where}) does not match the "
                             f"file: its context/removed lines (starting {first[:80]!r}) were not found"
                             + (" after the previous hunk" if number > 1 else ""))
        if old and hunk.old_start is not None:
            shift = at - (hunk.old_start - 1)
        out.extend(lines[pos:at])
        k = at
        for op, t in hunk.lines:
            if op == "-":
                k += 1
                continue
            piece = lines[k] if op == " " else t
            if op == " ":
                k += 1
            if out and not out[-1].endswith("\n"):
                out[-1] += "\n"  # a line gains a successor: it needs its newline back
            out.append(piece)
        pos = k
    rest = lines[pos:]
    if rest and out and not out[-1].endswith("\n"):
        out[-1] += "\n"
    return "".join(out + rest)


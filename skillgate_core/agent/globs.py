"""Globs for the find and grep tools, matched on the host in time and memory the pattern cannot blow up.

    expand_braces("*.{py,md}")                  # ['*.py', '*.md']  (GlobError past MAX_BRACE_EXPANSIONS)
    glob_matcher("src/**/*.py")("src/a/b.py")   # True
    find_superset("x/*a*b")                     # 'x/*b': what `find -path` pre-filters with

The model writes these patterns, and they are expanded and matched in the trainer's process, outside
every sandbox limit, so each step is bounded:
- brace expansion: the number of alternatives is counted first (linear in the pattern) and refused
  past MAX_BRACE_EXPANSIONS; `{a,b}` x 24 would otherwise be 16M strings (seen: 115 s, 5 GB);
- matching: a pattern is split into path parts; `**` as a whole part spans any number of folders
  (one or more when it is the last part, as in `src/**`), every other part is matched against one
  path part with fnmatch (atomic groups since Python 3.11: no catastrophic backtracking), and the
  parts are combined by a small table over (pattern part, path part). A single regex over the
  whole path backtracks exponentially on `**/**/**/...` or `*a*a*a...`;
- the command that lists candidates inside the sandbox gets a coarse superset with one `*`
  (`find_superset`), since find's own fnmatch backtracks on many stars too.
`**` inside a part (`a**b`) is a plain `*`, as in .gitignore.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable

__all__ = ["MAX_BRACE_EXPANSIONS", "MAX_GLOB_CHARS", "GlobError", "expand_braces", "find_superset", "glob_matcher"]

MAX_BRACE_EXPANSIONS = 256
"""Alternatives one pattern's braces may expand to (`{a,b,c}{x,y}` is 6)."""
MAX_GLOB_CHARS = 1024
"""Longest find pattern or grep glob (before brace expansion)."""
_WILD = re.compile(r"[*?\[]")


class GlobError(ValueError):
    """A pattern the tools refuse (too many brace alternatives); the message says what the limit is."""


def _first_group(pattern: str) -> tuple[int, int, list[str]] | None:
    """(start, end, options) of the first top-level `{...}` with two or more options (a group with one
    option, or an unmatched brace, is literal text), or None."""
    depth, start = 0, -1
    for i, ch in enumerate(pattern):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                inner, options, level, last = pattern[start + 1:i], [], 0, 0
                for j, c in enumerate(inner):
                    level += (c == "{") - (c == "}")
                    if c == "," and level == 0:
                        options.append(inner[last:j])
                        last = j + 1
                options.append(inner[last:])
                if len(options) > 1:
                    return start, i, options
    return None


def brace_count(pattern: str) -> int:
    """How many patterns `pattern` expands to, counted without expanding (options are balanced, so
    a group's options and what follows it multiply)."""
    group = _first_group(pattern)
    if group is None:
        return 1
    _, end, options = group
    return sum(brace_count(o) for o in options) * brace_count(pattern[end + 1:])


def expand_braces(pattern: str, limit: int = MAX_BRACE_EXPANSIONS) -> list[str]:
    """'*.{py,md}' -> ['*.py', '*.md'] (nested braces too; an unmatched brace is literal); GlobError when
    there would be more than `limit` alternatives."""
    count = brace_count(pattern)
    if count > limit:
        shown = f"{count:,}" if count < 10**12 else f"about 10^{len(str(count)) - 1}"
        raise GlobError(f"its braces expand to {shown} alternatives (at most {limit})")
    return _expand(pattern)


def _expand(pattern: str) -> list[str]:
    group = _first_group(pattern)
    if group is None:
        return [pattern]
    start, end, options = group
    head, tail = pattern[:start], pattern[end + 1:]
    return [x for opt in options for x in _expand(head + opt + tail)]


def _match_parts(pattern_parts: list[str], parts: list[str]) -> bool:
    """Whether the path parts match the pattern parts (`**` = any number of parts)."""
    reach = {0}  # how many path parts the pattern parts so far can have consumed
    last = len(pattern_parts) - 1
    for i, pat in enumerate(pattern_parts):
        if pat == "**":
            lo = min(reach) + (1 if i == last else 0)
            reach = set(range(lo, len(parts) + 1))
        else:
            reach = {j + 1 for j in reach if j < len(parts) and fnmatch.fnmatchcase(parts[j], pat)}
        if not reach:
            return False
    return len(parts) in reach


def glob_matcher(pattern: str, anchored: bool | None = None) -> Callable[[str], bool]:
    """A test for relative paths: `*`/`?`/`[...]` stay within one path part, `**` as a whole part spans
    any number of folders, `{a,b}` alternates. A pattern without '/' matches the last path part at any
    depth (like fd), unless `anchored` says it is matched against the whole relative path."""
    options = expand_braces(pattern)
    anchored = "/" in pattern if anchored is None else anchored
    if anchored:
        split = [o.split("/") for o in options]
        return lambda rel: any(_match_parts(s, rel.split("/")) for s in split)
    return lambda rel: any(fnmatch.fnmatchcase(rel.rsplit("/", 1)[-1], o) for o in options)


def find_superset(pattern: str, literal_prefix: str = "") -> str:
    """A pattern for find's -name / -path that every match of literal_prefix + `pattern` (one brace-free
    option) also matches: the literal head, one `*`, the literal tail (find's `*` crosses '/'),
    escaped for find."""
    first = _WILD.search(pattern)
    if first is None:
        return _find_escape(literal_prefix + pattern)
    last = max(pattern.rfind("*"), pattern.rfind("?"), pattern.rfind("]"))
    # A shorter tail still gives a superset; dropping its leading '/' lets `**/x` match `x` itself.
    tail = pattern[last + 1:].lstrip("/") if last >= first.start() else ""
    return _find_escape(literal_prefix + pattern[:first.start()]) + "*" + _find_escape(tail)


def _find_escape(text: str) -> str:
    """Literal text for find's -path / -name (its glob characters escaped)."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)

"""Facts about the running code and process that every run row carries: git sha, dirty flag, host.

    git_state()   # GitState(sha='04f3e7f...', dirty=True)

The sha is that of the checkout holding this package (not of the current directory). "dirty" means
`git status --porcelain` lists anything, untracked files included: code that is not in the commit
makes the result not reproducible from the commit alone. Outside a git checkout (an installed
wheel) the sha is 'unknown' and dirty is True. Computed once per process: a segment is one
process lifetime, and its code does not change under it.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = ["GitState", "REPO_ROOT", "git_state"]

REPO_ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class GitState:
    """The code version."""

    sha: str
    """Full commit sha of HEAD, or 'unknown'."""
    dirty: bool
    """True when the working tree differs from HEAD (or the state is unknown)."""


def _git(*args: str, root: Path) -> str:
    out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30, check=True)
    return out.stdout


@cache
def git_state(root: Path = REPO_ROOT) -> GitState:
    try:
        sha = _git("rev-parse", "HEAD", root=root).strip()
        dirty = bool(_git("status", "--porcelain", root=root).strip())
        return GitState(sha=sha, dirty=dirty)
    except (OSError, subprocess.SubprocessError):
        return GitState(sha="unknown", dirty=True)

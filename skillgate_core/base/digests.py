"""Content digests (sha256) of files and directory trees.

Stages exchange paths plus these digests, never live objects, so a stage's output can be checked
and its lineage keyed by content.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

__all__ = ["file_sha256", "path_sha256", "tree_manifest"]

_CHUNK = 1 << 20


def file_sha256(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def tree_manifest(root: str | os.PathLike[str]) -> dict[str, str]:
    """{relative posix path: sha256} for every regular file under `root`, sorted by path."""
    base = Path(root)
    files = sorted(p for p in base.rglob("*") if p.is_file() and not p.is_symlink())
    return {p.relative_to(base).as_posix(): file_sha256(p) for p in files}


def path_sha256(path: str | os.PathLike[str]) -> str:
    """sha256 of a file's bytes, or of a directory's manifest (paths + file digests, canonical JSON)."""
    p = Path(path)
    if p.is_file():
        return file_sha256(p)
    if p.is_dir():
        text = json.dumps(tree_manifest(p), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()
    raise FileNotFoundError(f"{p}: no such file or directory to digest")

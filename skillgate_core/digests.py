"""Content digests (sha256) of files and directory trees, and atomic writes.

Stages exchange paths plus these digests, never live objects, so a stage's output can be checked
and its lineage keyed by content.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write_json", "atomic_write_text", "file_sha256", "path_sha256", "tree_manifest"]

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


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write to a temp file in the same directory, fsync, then rename: readers never see half a file."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def atomic_write_json(path: str | os.PathLike[str], data: object) -> Path:
    return atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")

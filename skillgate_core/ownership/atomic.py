"""Atomic publication in the ownership layout: exclusive JSON creation, and the remains of killed builds.

Folders are published with skillgate_core.atomic_dirs.building_dir (build under a temp name, fsync,
rename): a reader (another process, `verify`, a listing) sees either nothing or the complete
artifact, and a process killed mid-build leaves only a `.tmp-NAME-PID-RANDOM` folder, which
listings skip and `remove_stale_builds` deletes once its PID is gone. JSON records go through
skillgate_core.digests.atomic_write_json (temp file + fsync + rename) for the same reason, or
`atomic_create_json` where creation must be exclusive.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from skillgate_core.atomic_dirs import TMP_PREFIX, temp_name
from skillgate_core.processes import pid_exists

__all__ = ["atomic_create_json", "link_tree", "read_json", "remove_stale_builds", "stale_builds"]


def read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def atomic_create_json(path: Path, data: Any) -> None:
    """Write `path` complete and only if it does not exist yet (FileExistsError otherwise).

    The JSON goes to a temp file first (fsynced), then `os.link` publishes it: link refuses an
    existing target, so creation is exclusive between processes and never half-written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / temp_name(path)
    try:
        with open(tmp, "x", encoding="utf-8") as fh:
            fh.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _pid_of(tmp: Path) -> int | None:
    try:
        return int(tmp.name.rsplit("-", 2)[-2])
    except (IndexError, ValueError):
        return None


# Alike in shape to stage_workdirs.dead_workdirs, whose owner files name more than a pid.
def stale_builds(parent: Path) -> list[Path]:
    """Temp build folders under `parent` whose creating process is gone (killed or crashed)."""
    if not parent.is_dir():
        return []
    out = []
    for p in sorted(parent.iterdir()):
        if p.name.startswith(TMP_PREFIX) and p.is_dir():
            pid = _pid_of(p)
            if pid is None or not pid_exists(pid):
                out.append(p)
    return out


def remove_stale_builds(parent: Path) -> list[Path]:
    """Delete the stale temp builds under `parent`; returns what was removed."""
    removed = stale_builds(parent)
    for p in removed:
        shutil.rmtree(p, ignore_errors=True)
    return removed


def link_tree(source: Path, target: Path) -> None:
    """Hard-link every file of `source` under `target` (a copy across filesystems): publishing a model
    dir a second time (a stage output, an export of an outside model) costs no disk."""
    for path in sorted(Path(source).rglob("*")):
        dest = Path(target) / path.relative_to(source)
        if path.is_dir():
            dest.mkdir(parents=True, exist_ok=True)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, dest)
        except OSError:
            shutil.copy2(path, dest)

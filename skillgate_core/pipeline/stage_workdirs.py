"""Temp output folders of stage runs: each records its owner process, so a killed run's folder is
found and removed once that process is gone (and never while it runs).

A stage builds its output in `artifacts/STAGE/.KEY.RANDOM/` and renames it to `artifacts/STAGE/KEY/`
when it is done (pipeline.py). Beside the folder sits `.KEY.RANDOM.owner.json` = {host, pid,
start} (skillgate_core.base.processes), written *before* the folder exists, so there is never a temp
folder without an owner to ask about. A SIGKILL between the two leaves at most an owner file with no
folder, which is removed the same way.

    work = new_workdir(layout.artifacts / "sft", key)    # .KEY.RANDOM, owner recorded
    ...build, rename...
    release_workdir(work)                                 # the owner file goes too
    remove_dead_workdirs(layout.artifacts)                # folders of runs whose process is gone
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import shutil
from pathlib import Path

from skillgate_core.base.atomic import atomic_write_json
from skillgate_core.base.dataclass_json import dataclass_from_json
from skillgate_core.base.processes import ProcessIdentity, current_process, process_state

__all__ = ["OWNER_SUFFIX", "dead_workdirs", "new_workdir", "release_workdir", "remove_dead_workdirs"]

OWNER_SUFFIX = ".owner.json"


def _owner_file(work: Path) -> Path:
    return work.with_name(work.name + OWNER_SUFFIX)


def new_workdir(parent: Path, key: str) -> Path:
    """Create `parent/.KEY.RANDOM/` with its owner file (this process) beside it."""
    parent.mkdir(parents=True, exist_ok=True)
    work = parent / f".{key}.{secrets.token_hex(4)}"
    atomic_write_json(_owner_file(work), dataclasses.asdict(current_process()))
    work.mkdir()
    return work


def release_workdir(work: Path) -> None:
    """Forget the temp folder `work` (renamed into place or removed by its run): drop its owner file."""
    _owner_file(work).unlink(missing_ok=True)


def _owner(owner_file: Path) -> ProcessIdentity | None:
    try:
        return dataclass_from_json(ProcessIdentity, json.loads(owner_file.read_text()), source=str(owner_file),
                                   strictness="exact")
    except (OSError, ValueError):
        return None


def dead_workdirs(artifacts: Path) -> list[Path]:
    """Temp folders (or lone owner files) under artifacts/STAGE/ whose owner process is gone."""
    if not artifacts.is_dir():
        return []
    dead = []
    for owner_file in sorted(artifacts.glob(f"*/.*{OWNER_SUFFIX}")):
        owner = _owner(owner_file)
        # Owner files are written atomically, so an unreadable one is not ours: leave it, never guess.
        if owner is not None and process_state(owner.host, owner.pid, owner.start) == "gone":
            dead.append(owner_file.with_name(owner_file.name[: -len(OWNER_SUFFIX)]))
    return dead


def remove_dead_workdirs(artifacts: Path) -> list[Path]:
    """Delete the temp folders of stage runs whose process is gone; returns the folders handled."""
    removed = dead_workdirs(artifacts)
    for work in removed:
        shutil.rmtree(work, ignore_errors=True)
        release_workdir(work)
    return removed

"""Paths as an artifact shows them: relative to the state dir, never the machine's absolute path.

An artifact is read in the Prefect UI, often on another machine than the one that ran the flow, so
`/root/...` or `/work/...` tells its reader nothing and leaks the runner's layout. Everything a stage
writes lives under SKILLGATE_HOME (`skillgate where` prints it there), so it is shown from there.

    shown_path(home / "artifacts/paper-tables/KEY/report/report.md")
    -> "SKILLGATE_HOME/artifacts/paper-tables/KEY/report/report.md"
"""

from __future__ import annotations

from pathlib import Path

from skillgate_core.base.paths import ENV_HOME, state_layout

__all__ = ["shown_path"]


def shown_path(path: str | Path, home: Path | None = None) -> str:
    """`path` as SKILLGATE_HOME/REL when it lies under the state dir; otherwise only its last two parts
    (a path the user gave from elsewhere: named, not laid out)."""
    path, home = Path(path), home or state_layout().home
    for inside, root in ((path, home), (path.resolve(), home.resolve())):  # as given, then links resolved
        if inside.is_relative_to(root):
            return f"{ENV_HOME}/{inside.relative_to(root).as_posix()}"
    return ".../" + "/".join(path.parts[-2:])

"""One folder holding several stage outputs of one role, for a stage that gathers them.

paper-tables compares every evaluation of a run: `eval70` and `eval70:mixed-task-reward` each write
an eval_rows folder, and the paper reads one folder (at any depth). The gathered folder is named by
the content of what it holds, so the same outputs gather into the same folder and the stage that
reads it is reused on the next run; files are hard-linked (no copy on the same filesystem).

    folder = gather_outputs({"eval70": rows_a, "eval70:mixed-task-reward": rows_b}, layout)
    # SKILLGATE_HOME/datasets/gathered/<sha>/eval70/..., .../eval70-mixed-task-reward/...
"""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path

from skillgate_core.base.atomic import link_tree
from skillgate_core.base.config import canonical_json
from skillgate_core.base.digests import path_sha256
from skillgate_core.base.paths import StateLayout

__all__ = ["gather_outputs", "gathered_path", "source_entry", "source_paths", "stage_inputs"]


def gathered_path(sources: Mapping[str, str | os.PathLike[str]], layout: StateLayout) -> Path:
    """Where `gather_outputs(sources)` puts its folder (named by the sources' content); reads only."""
    digests = {name: path_sha256(path) for name, path in sorted(sources.items())}
    return layout.datasets / "gathered" / hashlib.sha256(canonical_json(digests).encode()).hexdigest()[:16]


def gather_outputs(sources: Mapping[str, str | os.PathLike[str]], layout: StateLayout) -> Path:
    """The content-addressed folder with each source under its name (':' becomes '-')."""
    final = gathered_path(sources, layout)
    key = final.name
    if final.is_dir():
        return final
    work = final.parent / f".{key}.{uuid.uuid4().hex[:8]}.tmp"
    work.mkdir(parents=True)
    try:
        for name, path in sorted(sources.items()):
            target = work / name.replace(":", "-")
            src = Path(path)
            if src.is_dir():
                link_tree(src, target)
            else:
                target.mkdir()
                shutil.copy2(src, target / src.name)
        try:
            work.rename(final)
        except OSError:  # gathered by someone else meanwhile: same content by construction
            if not final.is_dir():
                raise
            shutil.rmtree(work, ignore_errors=True)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return final


def stage_inputs(
    sources: Mapping[str, tuple[str, ...]], outputs: Mapping[str, Mapping[str, str]], layout: StateLayout
) -> dict[str, str]:
    """Role -> path for one planned entry: "stage:ENTRY" sources read `outputs[ENTRY][role]` ("stage:ENTRY#OTHER",
    a recipe's wiring, reads `outputs[ENTRY][OTHER]`), paths stay paths, and a role with several sources is
    gathered into one folder."""
    resolved: dict[str, str] = {}
    for role, srcs in sources.items():
        paths = source_paths(role, srcs, outputs)
        resolved[role] = next(iter(paths.values())) if len(paths) == 1 else str(gather_outputs(paths, layout))
    return resolved


def source_entry(src: str) -> str:
    """The entry a "stage:ENTRY" / "stage:ENTRY#ROLE" source reads from ('' for a path)."""
    return src[len("stage:"):].partition("#")[0] if src.startswith("stage:") else ""


def source_paths(role: str, srcs: tuple[str, ...], outputs: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """Name -> path of each source of one input role (see stage_inputs); several are gathered."""
    paths = {}
    for src in srcs:
        entry = src[len("stage:"):] if src.startswith("stage:") else ""
        entry, _, other = entry.partition("#")
        paths[entry or Path(src).name] = outputs[entry][other or role] if entry else src
    return paths

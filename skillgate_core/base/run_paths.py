"""Which paths a run parameter may name: the state dir, the folders the worker lists, the catalog.

A recipe, a deployment's `overrides` and `recipe` parameters, the nightly's `bench`: whoever can start
a run (the Prefect API has no authentication) chooses them. A path among them is read by the run (an
input, a protocol spec, a recipe file), so it must lie, after every link is followed, inside

- the state dir (SKILLGATE_HOME: what the pipeline built and records),
- a folder the worker lists in SKILLGATE_INPUT_DIRS (os.pathsep-separated absolute paths: data the
  worker's operator brings, e.g. /data/benches:/models), or
- the catalog the caller names (the shipped recipes or protocol specs).

Anything else (`/etc`, `~/.ssh`, a link in the state dir to elsewhere) is refused before the run
starts, naming the parameter (docs/security.md, "Paths and ids from files and replies").

    path = check_run_path("/data/benches/b1", "inputs.bench")          # resolved, or OutsidePath
    path = check_run_path(text, "eval70.protocol", catalog=(SPECS_DIR,))
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from skillgate_core.base.paths import state_layout

__all__ = ["ENV_INPUT_DIRS", "OutsidePath", "check_run_path", "run_path_roots"]

ENV_INPUT_DIRS = "SKILLGATE_INPUT_DIRS"


class OutsidePath(ValueError):
    """A run parameter names a path outside every folder a run may read (the message names it)."""


def run_path_roots(catalog: Sequence[str | Path] = ()) -> tuple[Path, ...]:
    """The folders a run parameter's path may lie in (module docstring), each resolved."""
    listed = [p for p in os.environ.get(ENV_INPUT_DIRS, "").split(os.pathsep) if p.strip()]
    bad = [p for p in listed if not Path(p).is_absolute()]
    if bad:
        raise OutsidePath(f"{ENV_INPUT_DIRS}: {bad[0]!r} is not an absolute path (expected absolute folders "
                          f"separated by {os.pathsep!r})")
    return tuple(Path(p).expanduser().resolve() for p in [state_layout().home, *listed, *catalog])


def check_run_path(value: str | Path, field: str, *, catalog: Sequence[str | Path] = ()) -> Path:
    """`value` resolved (links followed, `..` gone) when it lies inside one of `run_path_roots(catalog)`;
    OutsidePath naming `field` otherwise. It need not exist."""
    path = Path(value).expanduser().resolve()
    roots = run_path_roots(catalog)
    if any(path.is_relative_to(root) for root in roots):
        return path
    shown = str(value) if str(value) == str(path) else f"{value} ({path})"
    raise OutsidePath(f"{field}: {shown} is outside the folders a run may read ({', '.join(map(str, roots))}); "
                      f"put it under the state dir, or list its folder in {ENV_INPUT_DIRS} where the worker runs")

"""Ray workers never touch the warehouse: facts travel back to the driver, which records them.

A Ray worker may run on another node (its SKILLGATE_HOME is not the driver's) and there may be
hundreds of them; so `record`, `ingest` and readers refuse to run inside one, with a message
saying what to do instead. The check only looks at Ray if Ray is already imported.
"""

from __future__ import annotations

import sys

__all__ = ["NotInRayWorker", "refuse_in_ray_worker"]


class NotInRayWorker(RuntimeError):
    """The warehouse was used from inside a Ray worker process."""


def _in_ray_worker() -> bool:
    ray = sys.modules.get("ray")
    if ray is None:
        return False
    try:
        from ray._private.worker import global_worker

        return global_worker.mode == ray.WORKER_MODE
    except Exception:  # an unexpected Ray layout: do not block the caller
        return False


def refuse_in_ray_worker(what: str) -> None:
    if _in_ray_worker():
        raise NotInRayWorker(
            f"warehouse {what} inside a Ray worker: return the facts (paths, digests, metrics) to the "
            "driver and record them there (docs/design.md, Embedded defaults: Ray workers never open the warehouse)"
        )

"""The sandboxes one batch started: each stopped exactly once, and every one of them stopped when the
batch ends, however it ends (a policy error, a tool or verifier bug, Ctrl-C).

A batch starts sandboxes on worker threads, so when the main thread gives up, some starts may still
be under way. `stop_all` closes the group: it stops every sandbox registered so far (in parallel:
removing a container takes ~0.3 s) and any sandbox registered later is stopped as it arrives. So a
caller can stop everything first, which also kills commands still running in them, and only then
wait for its worker threads, without waiting for a 60 s command to end on its own.

    group = SandboxGroup()
    try:
        box = group.add(start_sandbox(task))   # on a worker thread
        ...
        group.stop(box)                        # the normal end of one episode
    finally:
        group.stop_all()                       # whatever is left, and whatever starts after this
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from skillgate_core.envs.sandbox import Sandbox

__all__ = ["SandboxGroup"]

log = logging.getLogger(__name__)


class SandboxGroup:
    """Every sandbox of one batch (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._boxes: list[Sandbox] = []
        self._stopped: set[int] = set()
        self._closed = False

    def add(self, box: Sandbox) -> Sandbox:
        """Register a started sandbox; stopped at once if the group is already closed."""
        with self._lock:
            self._boxes.append(box)
            closed = self._closed
        if closed:
            self.stop(box)
        return box

    def _claim(self, box: Sandbox) -> bool:
        with self._lock:
            if id(box) in self._stopped:
                return False
            self._stopped.add(id(box))
            return True

    def stop(self, box: Sandbox) -> None:
        """Stop `box` unless it was stopped already."""
        if self._claim(box):
            box.stop()

    def stop_all(self, workers: int = 8) -> None:
        """Close the group and stop every sandbox not stopped yet; a failing stop does not spare the rest."""
        with self._lock:
            self._closed = True
            boxes = list(self._boxes)
        pending = [b for b in boxes if self._claim(b)]
        if not pending:
            return
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(pending)))) as pool:
            futures = [(b, pool.submit(b.stop)) for b in pending]
        for box, future in futures:
            exc = future.exception()
            if exc is not None:  # logged, not raised: the error that ended the batch is the one to see
                log.warning("sandbox %s did not stop cleanly: %s: %s", box.session_id, type(exc).__name__, exc)

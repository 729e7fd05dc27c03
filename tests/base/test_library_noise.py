"""Library chatter dropped where it is logged: Prefect's temporary-server advice and closing line, and
Ray's usage-stats notice (its own switch), while everything else those libraries say still shows."""

from __future__ import annotations

import logging
import os

from skillgate_core.base.library_noise import quiet_library_output


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_prefect_temporary_server_lines_keep_only_what_says_something(monkeypatch):
    from prefect.logging import get_logger

    monkeypatch.delenv("RAY_USAGE_STATS_ENABLED", raising=False)
    quiet_library_output()
    quiet_library_output()  # idempotent
    logger = get_logger()  # the logger Prefect's SubprocessASGIServer writes to
    kept, level = _Kept(), logger.level
    logger.addHandler(kept)
    logger.setLevel(logging.INFO)
    try:
        logger.info("Starting temporary server on http://127.0.0.1:8107\nSee https://www.prefect.io/docs/v3/concepts/"
                    "server#how-to-guides for more information on running a dedicated Prefect server.")
        logger.info("Stopping temporary server on http://127.0.0.1:8107")
        logger.info("a line of its own")
    finally:
        logger.removeHandler(kept)
        logger.setLevel(level)
    assert kept.messages == ["Starting temporary server on http://127.0.0.1:8107", "a line of its own"]
    assert os.environ["RAY_USAGE_STATS_ENABLED"] == "0"
    assert sum(getattr(f, "__name__", "") == "_drop_known_chatter" for f in logger.filters) == 1

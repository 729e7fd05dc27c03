"""A test session that says how far it is: the test count up front, then every tenth of the tests
(and at the end) how many ran, the time so far and an ETA at the pace so far.

`make test` runs `pytest -q`, whose dots and percentages tell neither how many tests there are nor
when the 20-odd minutes end. tests/conftest.py imports these hooks (the suite's one conftest at the
top of tests/). With pytest-xdist or --collect-only nothing changes.

    [suite] 1,226 tests to run
    [suite] 123/1,226 tests in 2 m 05 s; ETA 18 m 40 s at this pace
"""

from __future__ import annotations

import time
from typing import Any

import pytest

__all__ = ["pytest_collection_finish", "pytest_runtest_logfinish", "pytest_runtest_protocol", "pytest_sessionfinish"]

STEPS = 10
"""Progress lines in a whole session (one each tenth of the tests)."""

_state: dict[str, Any] = {"total": 0, "done": 0, "start": 0.0, "next": 0}


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes} m {secs:02d} s" if minutes else f"{secs} s"


def _say(config: pytest.Config, line: str) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    # after -q's dots the line is open (ensure_newline only knows about file names): close it first
    writer = getattr(reporter, "_tw", None)
    if writer is not None and writer.width_of_current_line:
        reporter.write("\n")
    reporter.write_line(f"[suite] {line}")


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    total = len(session.items)
    _state.update(total=total, done=0, start=time.monotonic(), next=max(1, total // STEPS))
    _say(session.config, f"{total:,} test{'s' if total != 1 else ''} to run")


def pytest_runtest_logfinish(nodeid: str, location: tuple[str, int | None, str]) -> None:  # noqa: ARG001
    _state["done"] += 1


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:  # noqa: ARG001
    yield
    done, total = _state["done"], _state["total"]
    if total and done >= _state["next"] and done < total:
        _state["next"] += max(1, total // STEPS)
        elapsed = time.monotonic() - _state["start"]
        eta = elapsed / done * (total - done)
        _say(item.config, f"{done:,}/{total:,} tests in {_duration(elapsed)}; ETA {_duration(eta)} at this pace")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:  # noqa: ARG001
    if _state["total"] and _state["done"]:
        _say(session.config, f"{_state['done']:,}/{_state['total']:,} tests in "
                             f"{_duration(time.monotonic() - _state['start'])}")

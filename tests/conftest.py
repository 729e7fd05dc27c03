"""Test-wide setup: a private SKILLGATE_HOME, and a real Prefect test server for flow tests.

SKILLGATE_HOME is set before any project module is imported, so nothing a test runs writes into
the developer's own state dir.
"""

from __future__ import annotations

import os
import tempfile

import pytest

_SESSION_HOME = tempfile.mkdtemp(prefix="skillgate-test-home-")
os.environ["SKILLGATE_HOME"] = _SESSION_HOME
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def prefect_server():
    """A real (temporary) Prefect server for the whole session; cold start on 2 cores can exceed 60 s."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=240):
        yield


@pytest.fixture
def skillgate_home(tmp_path, monkeypatch):
    """A fresh, empty SKILLGATE_HOME for one test."""
    home = tmp_path / "home"
    monkeypatch.setenv("SKILLGATE_HOME", str(home))
    return home

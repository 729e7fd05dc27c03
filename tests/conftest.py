"""Test-wide setup: a private SKILLGATE_HOME, the shared session fixtures, and a real Prefect test server
for flow tests.

SKILLGATE_HOME is set before any project module is imported, so nothing a test runs writes into
the developer's own state dir. Product-level runs carry the `e2e` marker (`make test-fast` leaves
them out; `make test` and .ci/run run them): every test that runs Prefect flows on the real test
server (the `prefect_server` fixture) gets it here; the deployment runs (tests/infra) and the GPU
benchmarks' smoke runs (tests/benchmarks/test_gpu_benchmarks.py) are marked where they are written.

The shared session fixtures of tests/support (the tiny models, the small bench, sandbox readiness) are
registered here and nowhere else: a session fixture imported into several folders' conftests (or test
modules) is one fixture per importer, set up again in each (the small bench was built 6 times a session,
the Docker readiness checked 3 times). Import them in a folder only to rename one (tests/envs: `backend`).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

_SESSION_HOME = tempfile.mkdtemp(prefix="skillgate-test-home-")
os.environ["SKILLGATE_HOME"] = _SESSION_HOME
# DeepSpeed compiles a small C++ op (shared-memory all-reduce) the first time it initialises on CPU (~55 s of
# 2 cores). Modules that import the CLI at collection point the library caches into the session's fresh
# SKILLGATE_HOME (apply_cache_env), so every session compiled it again, in the first test that trains
# (tests/infra/test_deployment_run.py: 148 s alone, 81 s with the cache warm). A stable temp folder instead
# (unless already set): only the first session on a machine pays; the services, flow runs and Ray workers
# the tests start inherit it.
os.environ.setdefault(
    "TORCH_EXTENSIONS_DIR", str(Path(tempfile.gettempdir()) / f"skillgate-torch-extensions-{os.getuid()}")
)
# The tests' endpoints are fakes: a developer's real key must never reach them, and a key set without its
# list of base URLs would be refused (skillgate_core/policy/endpoint_keys.py); tests set their own.
for _name in [k for k in os.environ if k == "OPENAI_API_KEY" or (k.startswith("SKILLGATE_") and k.endswith("_API_KEY"))]:
    del os.environ[_name]
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from support.sandbox_fixtures import bwrap_ready, docker_ready, sandbox_backend  # noqa: E402,F401  (fixtures)
from support.suite_progress import (  # noqa: E402,F401  (hooks: the count up front, progress with an ETA)
    pytest_collection_finish,
    pytest_runtest_logfinish,
    pytest_runtest_protocol,
    pytest_sessionfinish,
)
from support.tiny_fixtures import bench, tiny_llama_dir, tiny_model_dir, tiny_policy_dir  # noqa: E402,F401  (fixtures)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "prefect_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session", autouse=True)
def test_folders_are_input_dirs(tmp_path_factory):
    """The session's fixtures (the small bench, the tiny models, a test's recipe files) live in pytest's
    temp folders, outside each test's SKILLGATE_HOME: listed as the worker's input folders, as a user lists
    theirs (base.run_paths). tests/pipeline/test_run_paths.py unsets it to check the rule itself."""
    os.environ["SKILLGATE_INPUT_DIRS"] = str(tmp_path_factory.getbasetemp())


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

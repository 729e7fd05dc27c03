"""The paper report's figures are visible in the Prefect UI, in a real browser.

A real `prefect server start` (its UI included), the real `paper-tables` stage sub-flow publishing its
report artifact (tasks/paper.py), then headless Chromium on the artifact's page: the rendered DOM holds
each figure as an <img src="data:image/png..."> inside the artifact, and the screenshot shows it (the
figures' white plot area, which the dark UI has nowhere else). Figures used to be file:// links, which
a browser never loads from an http page: broken images.

Needs Chromium (`apt-get install -y chromium`); skipped without it, unless SKILLGATE_REQUIRE_CHROMIUM=1,
which makes a missing browser a failure. SKILLGATE_UI_SCREENSHOT=PATH keeps the screenshot there (how
docs/images/prefect-paper-report.png was made).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from paper_rows import write_synthetic_evals

pytestmark = pytest.mark.slow

WINDOW = (1280, 2000)


def _chromium() -> str:
    found = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
    if found is None:
        why = "Chromium is not installed (apt-get install -y chromium)"
        if os.environ.get("SKILLGATE_REQUIRE_CHROMIUM") == "1":
            pytest.fail(f"{why}, and SKILLGATE_REQUIRE_CHROMIUM=1 requires it")
        pytest.skip(f"{why}; SKILLGATE_REQUIRE_CHROMIUM=1 makes this a failure")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def ui_server(tmp_path):
    """A real Prefect server with its UI on a free port; the UI told where its API is."""
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_UI_API_URL": api,
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_API_URL": api}
    prefect = Path(sys.executable).with_name("prefect")
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen([str(prefect), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                              env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 240  # a cold start on 2 loaded cores
        while True:
            try:
                with urllib.request.urlopen(f"{api}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, (tmp_path / "server.log").read_text()
            time.sleep(1)
        yield api
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # the server we started and its children, nothing else
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


def _browse(chromium: str, url: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                           "--hide-scrollbars", f"--user-data-dir={profile}", f"--window-size={WINDOW[0]},{WINDOW[1]}",
                           "--virtual-time-budget=20000", *args, url],
                          capture_output=True, text=True, timeout=180)


def test_paper_report_figures_show_in_the_prefect_ui(ui_server, tmp_path, skillgate_home):
    from PIL import Image
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.stage_flows import STAGE_FLOWS
    from skillgate_core.base.config import config_to_dict
    from skillgate_core.evaluation.paper_config import PaperConfig

    chromium = _chromium()
    rows = write_synthetic_evals(tmp_path / "rows" / "eval_rows")
    with temporary_settings(updates={PREFECT_API_URL: ui_server}):
        result = STAGE_FLOWS["paper-tables"](config=config_to_dict(PaperConfig()), inputs={"eval_rows": str(rows)})
        with get_client(sync_client=True) as client:
            (artifact,) = client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["paper-report"])))
    figures = result["metrics"]["figures"]
    page = ui_server.removesuffix("/api") + f"/artifacts/artifact/{artifact.id}"

    dom = _browse(chromium, page, tmp_path / "profile-dom", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    rendered = dom.stdout[dom.stdout.find("artifact-data-markdown"):]
    assert "artifact-data-markdown" in dom.stdout, dom.stdout[:3000]
    images = re.findall(r'<img src="data:image/png;base64,[A-Za-z0-9+/=]+"[^>]*markdown-renderer__image', rendered)
    assert len(images) == figures and figures > 0

    def white_pixels(shot: Path, *args: str) -> int:
        taken = _browse(chromium, page, tmp_path / f"profile-{shot.stem}", f"--screenshot={shot}", *args)
        assert taken.returncode == 0 and shot.is_file(), taken.stderr[-2000:]
        with Image.open(shot) as picture:
            return int((np.asarray(picture.convert("RGB")).min(axis=2) >= 245).sum())

    # the figures' white plot areas; the same page with images off (what a broken image looks like) has
    # only the UI's white text
    shown, blank = white_pixels(tmp_path / "artifact.png"), white_pixels(tmp_path / "no-images.png",
                                                                        "--blink-settings=imagesEnabled=false")
    assert blank < 50_000 < 100_000 < shown, (shown, blank)
    if os.environ.get("SKILLGATE_UI_SCREENSHOT"):
        shutil.copyfile(tmp_path / "artifact.png", os.environ["SKILLGATE_UI_SCREENSHOT"])

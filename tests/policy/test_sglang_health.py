"""A server that accepts the connection and never answers /health is unhealthy within the health timeout
(10 s), not after the generation timeout (600 s by default): a GRPO run in server mode checks every server
before its first rollout, and sat in "still starting" for that long. A real local HTTP server that stalls."""

from __future__ import annotations

import threading
import time
import types
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from support.background_server import BackgroundServer

from skillgate_core.policy.sglang_client import SGLangClient, SGLangError

NO_TOKENIZER = types.SimpleNamespace(eos_token_id=0, unk_token_id=None, convert_tokens_to_ids=lambda token: None)


class Stalls(BackgroundServer):
    """Reads each request and answers nothing until told to stop."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                server.stop.wait(120)

        super().__init__(Handler)

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        super().__exit__(*exc)


def test_a_silent_health_check_fails_within_the_health_timeout():
    with Stalls() as server:
        url = f"http://127.0.0.1:{server.address[1]}"
        with SGLangClient(url, NO_TOKENIZER, timeout_s=40) as client:  # the default: 10 s, whatever timeout_s
            started = time.monotonic()
            with pytest.raises(SGLangError, match=r"gave no answer to GET /health within 10 s"):
                client.check_health()
            assert time.monotonic() - started < 20
        with SGLangClient(url, NO_TOKENIZER, timeout_s=40, health_timeout_s=2) as client:
            started = time.monotonic()
            with pytest.raises(SGLangError, match=r"within 2 s"):
                client.check_health()
            assert time.monotonic() - started < 10

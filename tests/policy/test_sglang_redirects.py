"""An SGLang server's redirect is an error, never a success and never followed: a 3xx used to pass as an
answer (a /health, a /flush_cache, a weight update whose body said success) although the server had
done nothing. Real local HTTP servers: one redirects, the other (the Location) records every request."""

from __future__ import annotations

import json
import types
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from support.background_server import BackgroundServer
from support.sglang_recorded_server import RecordedSGLang

from skillgate_core.policy.sglang_client import SGLangClient, SGLangError

# the client asks a tokenizer for its stop ids only; no call here decodes anything
NO_TOKENIZER = types.SimpleNamespace(eos_token_id=0, unk_token_id=None, convert_tokens_to_ids=lambda token: None)


class Redirector(BackgroundServer):
    """Every GET/POST: `status`, a Location on `target` with a query, and a body that claims success."""

    def __init__(self, status: int, target: str) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                body = json.dumps({"success": True, "message": "TARGET-TEXT"}).encode()
                self.send_response(status)
                self.send_header("Location", f"{target}{self.path}?token=abc")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer  # noqa: N815

        super().__init__(Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.address[1]}"


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_an_error_naming_the_origin_and_nothing_reaches_the_target(status: int):
    with RecordedSGLang() as target, Redirector(status, target.url) as server, \
            SGLangClient(server.url, NO_TOKENIZER, retry_wait_s=0.01) as client:
        for call, what in ((client.check_health, "GET /health"),
                           (lambda: client.update_weights_from_disk("/w/step-1"), "POST /update_weights_from_disk")):
            with pytest.raises(SGLangError) as err:
                call()
            message = str(err.value)
            assert f"answered HTTP {status} to {what}: a redirect to {target.url}, not followed" in message
            assert "token=abc" not in message and "TARGET-TEXT" not in message
    assert target.requests == []

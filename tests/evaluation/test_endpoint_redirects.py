"""An endpoint that answers with a redirect never gets the key sent anywhere else: the chat client refuses
every 3xx with an EndpointError naming the status and the Location's origin only, and what a server
answers that is not a chat completion is described (content type, size), never quoted into the error a
trial records. Real local HTTP servers: one redirects, a second one (the redirect's target) records
every request's headers."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from support.background_server import BackgroundServer

from skillgate_core.policy.openai_chat import EndpointError, OpenAIEndpoint, chat_completion

MESSAGES = [{"role": "user", "content": "hi"}]
MARKER = "TARGET-SAYS-QUOTE-ME"


class Recorder(BackgroundServer):
    """Answers every GET/POST with a valid chat completion whose text is MARKER; keeps each request's headers."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                with server._lock:
                    server.seen.append({"method": self.command, "path": self.path, **dict(self.headers.items())})
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                body = json.dumps({"choices": [{"message": {"content": MARKER}, "finish_reason": "stop"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer  # noqa: N815

        super().__init__(Handler)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.address[1]}"


class Redirector(BackgroundServer):
    """Answers every POST with `status` and `location`."""

    def __init__(self, status: int, location: str, body: bytes = MARKER.encode()) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers["Content-Length"]))
                self.send_response(status)
                self.send_header("Location", location)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        super().__init__(Handler)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.address[1]}/v1"


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_refused_and_the_key_goes_nowhere_else(status: int, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SKILLGATE_POLICY_API_KEY", "sk-secret-policy-key")
    with Recorder() as target:
        location = f"http://127.0.0.1:{target.address[1]}/v1/chat/completions?token=abc"
        with Redirector(status, location) as source:
            monkeypatch.setenv("SKILLGATE_POLICY_BASE_URLS", source.base_url)
            endpoint = OpenAIEndpoint(base_url=source.base_url, model="m", api_key_env="SKILLGATE_POLICY_API_KEY",
                                      retries=2)
            with pytest.raises(EndpointError) as err:
                chat_completion(endpoint, MESSAGES, temperature=1.0, max_tokens=4)
    message = str(err.value)
    assert target.seen == []  # never asked, so never given the key
    assert f"HTTP {status}" in message and "redirect" in message and "not followed" in message
    assert target.origin in message  # the Location's origin only:
    for leaked in ("token=abc", "/chat/completions?", MARKER):
        assert leaked not in message.replace(endpoint.url, "")


def test_a_relative_or_unreadable_location_is_named_safely(monkeypatch: pytest.MonkeyPatch):
    with Redirector(302, "/elsewhere/v1/chat/completions") as source:
        endpoint = OpenAIEndpoint(base_url=source.base_url, model="m", retries=0)
        with pytest.raises(EndpointError, match=rf"HTTP 302: a redirect to http://127\.0\.0\.1:{source.address[1]}, not followed"):
            chat_completion(endpoint, MESSAGES, temperature=1.0, max_tokens=4)
    with Redirector(307, "http://user:pw@127.0.0.1:9/x?token=abc") as source:
        endpoint = OpenAIEndpoint(base_url=source.base_url, model="m", retries=0)
        with pytest.raises(EndpointError) as err:
            chat_completion(endpoint, MESSAGES, temperature=1.0, max_tokens=4)
    assert "a redirect to http://127.0.0.1:9, not followed" in str(err.value)
    assert not any(s in str(err.value) for s in ("user", "pw", "token", "/x"))
    with Redirector(301, "\x1b[2Jjavascript:alert(1)") as source:
        endpoint = OpenAIEndpoint(base_url=source.base_url, model="m", retries=0)
        with pytest.raises(EndpointError) as err:
            chat_completion(endpoint, MESSAGES, temperature=1.0, max_tokens=4)
    assert "\x1b" not in str(err.value) and "alert" not in str(err.value) and "HTTP 301" in str(err.value)


class Answers(BackgroundServer):
    """Answers every POST with (status, content type, body)."""

    def __init__(self, status: int, content_type: str, body: bytes) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers["Content-Length"]))
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        super().__init__(Handler)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.address[1]}/v1"


@pytest.mark.parametrize(("status", "content_type", "body", "why"), [
    (200, "text/html; charset=utf-8", f"<html>{MARKER}</html>".encode(), "not JSON"),
    (200, "application/json", json.dumps({"detail": MARKER}).encode(), "not a chat completion"),
    (200, "application/json", json.dumps({"choices": [{"message": {"content": [MARKER]}}]}).encode(),
     "message.content is not text"),
    (200, "application/json", json.dumps({"choices": [{"message": {"content": "x"}}],
                                          "usage": {"prompt_tokens": MARKER}}).encode(), "usage"),
    (400, "application/json", json.dumps({"error": {"message": MARKER}}).encode(), "HTTP 400"),
    (500, "text/plain", MARKER.encode(), "HTTP 500"),
])
def test_what_is_not_a_chat_completion_is_described_not_quoted(status: int, content_type: str, body: bytes,
                                                               why: str):
    with Answers(status, content_type, body) as server:
        endpoint = OpenAIEndpoint(base_url=server.base_url, model="m", retries=0)
        with pytest.raises(EndpointError) as err:
            chat_completion(endpoint, MESSAGES, temperature=1.0, max_tokens=4)
    message = str(err.value)
    assert why in message and MARKER not in message
    assert content_type.partition(";")[0] in message and f"{len(body)} bytes" in message

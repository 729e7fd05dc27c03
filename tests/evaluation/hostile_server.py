"""A real local HTTP server that misbehaves as an OpenAI-compatible endpoint might (tests only).

    with HostileServer("drip") as server:       # server.base_url -> http://127.0.0.1:PORT/v1
        ...

Modes: huge (a 100 MB body, sent as fast as the client reads), drip (headers, then one byte every
0.1 s for a minute), not_utf8, deep (JSON nested 100,000 deep), not_json, bad_usage (token counts
that are not numbers), message_not_object, truncated (fewer bytes than Content-Length), long_reply
(a valid reply whose text is far longer than max_tokens allows)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

from support.background_server import BackgroundServer

MODES = ("huge", "drip", "not_utf8", "deep", "not_json", "bad_usage", "message_not_object", "truncated", "long_reply")


def _completion(content: Any, usage: Any = None, message: Any = None) -> bytes:
    return json.dumps({"choices": [{"index": 0, "finish_reason": "stop",
                                    "message": message if message is not None else {"role": "assistant",
                                                                                    "content": content}}],
                       "usage": usage if usage is not None else {"prompt_tokens": 3, "completion_tokens": 2}}).encode()


class HostileServer(BackgroundServer):
    def __init__(self, mode: str) -> None:
        assert mode in MODES, mode
        self.mode, self.requests = mode, 0
        self.stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers["Content-Length"]))
                server.requests += 1
                try:
                    self._answer(server.mode)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up: what a bounded client does

            def _raw(self, body: bytes, length: int | None = None) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body) if length is None else length))
                self.end_headers()
                self.wfile.write(body)

            def _answer(self, mode: str) -> None:
                if mode == "huge":
                    size, chunk = 100 * 2**20, b" " * 2**20
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()  # no Content-Length: the client learns the size only by reading
                    self.wfile.write(b'{"choices": [{"message": {"content": "')
                    for _ in range(size // len(chunk)):
                        self.wfile.write(chunk)
                elif mode == "drip":
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(b"{")
                    for _ in range(600):
                        if server.stop.wait(0.1):
                            return
                        self.wfile.write(b" ")
                        self.wfile.flush()
                elif mode == "not_utf8":
                    self._raw(b'{"choices": [{"message": {"content": "\xff\xfe\xfd"}}]}')
                elif mode == "deep":
                    self._raw(b"[" * 100_000 + b"]" * 100_000)
                elif mode == "not_json":
                    self._raw(b"<html>502 Bad Gateway</html>")
                elif mode == "bad_usage":
                    self._raw(_completion("hi", usage={"prompt_tokens": "lots", "completion_tokens": [1]}))
                elif mode == "message_not_object":
                    self._raw(_completion("", message=["not", "an", "object"]))
                elif mode == "truncated":
                    self._raw(_completion("hi")[:10], length=1000)
                elif mode == "long_reply":
                    self._raw(_completion(" ".join(["word"] * 5000), usage={"prompt_tokens": 3,
                                                                            "completion_tokens": 5000}))

        super().__init__(Handler)

    @property
    def base_url(self) -> str:
        host, port = self.address
        return f"http://{host}:{port}/v1"

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        time.sleep(0.05)
        super().__exit__(*exc)

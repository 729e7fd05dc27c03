"""A real local HTTP server for the length of a `with` block (tests only): ThreadingHTTPServer on
127.0.0.1 (port 0 = an ephemeral one) serving from a daemon thread. The fake endpoints build on it
(tests/evaluation/chat_server.py, sglang_recorded_server.py), each with its own request handler.

    with BackgroundServer(Handler) as server:
        host, port = server.address
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self

__all__ = ["BackgroundServer"]


class BackgroundServer:
    def __init__(self, handler: type[BaseHTTPRequestHandler], port: int = 0) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

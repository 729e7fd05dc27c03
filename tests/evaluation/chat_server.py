"""A real local HTTP server speaking OpenAI's /v1/chat/completions with scripted replies (tests only).

    with ChatServer(reply=lambda body: ("hello", "stop")) as server:
        server.base_url        # http://127.0.0.1:PORT/v1
        server.requests        # every request body received, in order

`reply(body)` returns (content, finish_reason) or an int HTTP status to answer with an error; `port`
serves on that port (0: an ephemeral one), e.g. where an evaluation met a dead endpoint before.
`reference_agent(oracles)` scripts the skill-following route over HTTP: read the task's oracle skill
(found by the task instruction), run the procedure the skill prescribes, answer.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler
from typing import Any

from support.background_server import BackgroundServer

from skillgate_core.skills import extract_procedure

Reply = Callable[[dict[str, Any]], "tuple[str, str] | int"]

_RESPONSE = re.compile(r"<tool_response name='([^']*)'>(.*?)</tool_response>", re.DOTALL)


def _call(name: str, **arguments: Any) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def reference_agent(oracles: Mapping[str, str]) -> Reply:
    """instruction text -> oracle skill name; plays read(oracle) -> exec(procedure) -> final answer."""

    def reply(body: dict[str, Any]) -> tuple[str, str]:
        messages = body["messages"]
        if len(messages) == 2:
            skill = oracles[messages[1]["content"]]
            return (f"<skill_reasoning>{skill} fits this task.</skill_reasoning>\n"
                    + _call("read", path=f"/skills/{skill}/SKILL.md"), "stop")
        found = _RESPONSE.findall(messages[-1]["content"])
        if len(messages) == 4 and found and found[0][0] == "read":
            procedure = extract_procedure(json.loads(found[0][1]).get("content", ""))
            if procedure:
                return "Following the skill.\n" + _call("exec", command=procedure), "stop"
        return "Done: the workspace holds the result.", "stop"

    return reply


class ChatServer(BackgroundServer):
    def __init__(self, reply: Reply, port: int = 0) -> None:
        self.reply, self.requests, self._lock = reply, [], threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
                if self.path != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                answer = server.reply(body)
                if isinstance(answer, int):
                    self._send(answer, {"error": {"message": f"scripted {answer}"}})
                    return
                content, finish = answer
                self._send(200, {
                    "id": "chatcmpl-test", "object": "chat.completion", "model": body["model"],
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                 "finish_reason": finish}],
                    "usage": {"prompt_tokens": sum(len(m["content"]) for m in body["messages"]) // 4,
                              "completion_tokens": len(content) // 4},
                })

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        super().__init__(Handler, port)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.address[1]}/v1"

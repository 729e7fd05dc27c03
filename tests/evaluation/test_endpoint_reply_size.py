"""A reply is bounded by what its max_tokens can take: a chat completion of 15 MB answering a turn of 1,024
tokens is refused after a bounded read (an EndpointError saying so), never decoded, parsed and tokenized
whole (which cost 3 GB of memory). A reply within the bound is still cut to the budget by the policy. A
real local HTTP server; the policy runs in a child process, whose peak memory is its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from support.background_server import BackgroundServer

from skillgate_core.policy.openai_chat import EndpointError, OpenAIEndpoint, chat_completion

REPO = Path(__file__).resolve().parents[2]


class Reply(BackgroundServer):
    """Answers every POST with a valid chat completion whose content is `words` words."""

    def __init__(self, words: int) -> None:
        body = json.dumps({"choices": [{"message": {"content": " ".join(["word"] * words)}, "finish_reason": "stop"}],
                           "usage": {"prompt_tokens": 3, "completion_tokens": words}}).encode()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers["Content-Length"]))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client stopped reading: what a bounded client does

        self.size = len(body)
        super().__init__(Handler)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.address[1]}/v1"


CHILD = """
import json, resource, sys, types
from transformers import AutoTokenizer
from skillgate_core.agent.openai_policy import OpenAIPolicy
from skillgate_core.policy.openai_chat import OpenAIEndpoint

tok = AutoTokenizer.from_pretrained(sys.argv[2])
policy = OpenAIPolicy(OpenAIEndpoint(base_url=sys.argv[1], model="m", retries=0), tok, max_new_tokens=1024)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
views = [types.SimpleNamespace(messages=[{"role": "user", "content": "x"}], max_new_tokens=1024, turn=0)] * 4
turns = policy.act(views)
print(json.dumps({"kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before,
                  "errors": [t.error for t in turns], "tokens": [len(t.token_ids) for t in turns]}))
"""


def _play(server: Reply, model_dir: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", CHILD, server.base_url, str(model_dir)], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_reply_far_longer_than_max_tokens_is_refused_in_bounded_memory(tiny_model_dir):
    with Reply(words=3_000_000) as server:  # ~15 MB: under the 16 MiB body limit, far over 1,024 tokens
        assert 14 * 2**20 < server.size < 16 * 2**20
        played = _play(server, tiny_model_dir)
    assert played["kib"] < 150 * 1024, played  # four such replies in flight: far below 3 GB
    assert all(e and "larger than" in e and "max_tokens 1024" in e for e in played["errors"]), played["errors"]


def test_a_reply_a_little_past_the_budget_is_still_cut_to_it(tiny_model_dir):
    with Reply(words=3000) as server:  # a server that ignored max_tokens, within the bound: cut, no error
        played = _play(server, tiny_model_dir)
    assert played["errors"] == [""] * 4 and played["tokens"] == [1024] * 4, played


def test_the_bound_follows_max_tokens_and_never_passes_max_reply_bytes():
    with Reply(words=20_000) as server:  # ~100 KB: within what 1,024 tokens may take, past what 8 may
        chat_completion(OpenAIEndpoint(base_url=server.base_url, model="m"), [], temperature=1.0, max_tokens=1024)
        with pytest.raises(EndpointError, match=r"reply is larger than \d+ bytes, the most max_tokens 8 allows"):
            chat_completion(OpenAIEndpoint(base_url=server.base_url, model="m", retries=0), [], temperature=1.0,
                            max_tokens=8)
        small = OpenAIEndpoint(base_url=server.base_url, model="m", retries=0, max_reply_bytes=1000)
        with pytest.raises(EndpointError, match=r"reply is larger than 1000 bytes"):
            chat_completion(small, [], temperature=1.0, max_tokens=100_000)

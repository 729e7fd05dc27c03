"""A real local HTTP server that answers like an SGLang server from recorded exchanges (tests only).

SGLang needs CUDA, so the client is tested against this: http.server in a thread on 127.0.0.1 with
an ephemeral port. It refuses a request the way SGLang would (HTTP 400, {"error": {"message": ..}}):
a /generate body may hold only GenerateReqInput fields, input_ids must be a list of token-id lists,
each sampling_params dict only SamplingParams fields (docs/basic_usage/sampling_params.md,
python/sglang/srt/managers/io_struct.py, python/sglang/srt/sampling/sampling_params.py); a weight
endpoint's body only its documented fields, the required ones present
(docs/advanced_features/sglang_for_rl.md). Every request is kept in `.requests` for assertions.

    with RecordedSGLang(generate=lambda body: recorded_answer) as server:
        SGLangClient(server.url, tok).generate(...)
        server.requests  # [("POST", "/generate", body), ...]
"""

from __future__ import annotations

import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from support.background_server import BackgroundServer

__all__ = ["GENERATE_FIELDS", "SAMPLING_FIELDS", "RecordedSGLang", "check_generate_body", "control_routes"]

GENERATE_FIELDS = frozenset({
    "text", "input_ids", "input_embeds", "image_data", "audio_data", "video_data", "sampling_params", "rid",
    "return_logprob", "logprob_start_len", "top_logprobs_num", "token_ids_logprob", "return_text_in_logprobs",
    "stream", "lora_path", "custom_logit_processor", "return_hidden_states", "session_params",
})
"""GenerateReqInput fields a client may send (the documented table plus session_params)."""
SAMPLING_FIELDS = frozenset({
    "max_new_tokens", "stop", "stop_token_ids", "temperature", "top_p", "top_k", "min_p", "frequency_penalty",
    "presence_penalty", "repetition_penalty", "min_new_tokens", "n", "json_schema", "regex", "ebnf",
    "structural_tag", "ignore_eos", "skip_special_tokens", "spaces_between_special_tokens", "no_stop_trim",
    "custom_params", "stream_interval", "logit_bias",
})
"""SamplingParams fields (sampling_params.md and sampling_params.py)."""
CONTROL_FIELDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "/update_weights_from_disk": (frozenset({"model_path"}), frozenset({
        "model_path", "load_format", "abort_all_requests", "weight_version", "is_async", "torch_empty_cache",
        "keep_pause", "recapture_cuda_graph", "token_step", "flush_cache"})),
    "/init_weights_update_group": (frozenset({"master_address", "master_port", "rank_offset", "world_size"}),
                                   frozenset({"master_address", "master_port", "rank_offset", "world_size",
                                              "group_name", "backend"})),
    "/update_weights_from_distributed": (frozenset({"names", "dtypes", "shapes"}), frozenset({
        "names", "dtypes", "shapes", "group_name", "flush_cache", "abort_all_requests", "weight_version",
        "load_format"})),
    "/destroy_weights_update_group": (frozenset(), frozenset({"group_name"})),
}
"""(required, allowed) body fields of each weight endpoint (sglang_for_rl.md)."""


def check_generate_body(body: Any) -> str | None:
    """Why SGLang would refuse this /generate body (None: it is well-formed)."""
    if not isinstance(body, dict):
        return "body must be a JSON object"
    unknown = set(body) - GENERATE_FIELDS
    if unknown:
        return f"unknown GenerateReqInput fields {sorted(unknown)}"
    ids = body.get("input_ids")
    if not (isinstance(ids, list) and ids and all(isinstance(p, list) and p and all(type(t) is int for t in p)
                                                   for p in ids)):
        return "input_ids must be a non-empty list of non-empty token-id lists"
    params = body.get("sampling_params", {})
    params = params if isinstance(params, list) else [params]
    if len(params) not in (1, len(ids)):
        return f"{len(params)} sampling_params for {len(ids)} prompts"
    for p in params:
        if not isinstance(p, dict):
            return "each sampling_params must be an object"
        if set(p) - SAMPLING_FIELDS:
            return f"unknown SamplingParams fields {sorted(set(p) - SAMPLING_FIELDS)}"
        if "max_new_tokens" in p and not (type(p["max_new_tokens"]) is int and p["max_new_tokens"] >= 0):
            return f"max_new_tokens must be an int >= 0, got {p['max_new_tokens']!r}"
        if "top_p" in p and not 0 < p["top_p"] <= 1:
            return f"top_p must be in (0, 1], got {p['top_p']}"
    return None


Handler = Callable[[Any], Any]
"""body -> JSON answer, or (status, JSON answer)."""


class RecordedSGLang(BackgroundServer):
    """The server (see the module docstring). `generate` answers /generate; `routes` maps
    (METHOD, path) to a handler or a fixed answer and overrides the defaults (health, flush, info,
    weight endpoints answering success); port 0 = an ephemeral one."""

    def __init__(self, generate: Handler | None = None, routes: dict[tuple[str, str], Any] | None = None,
                 port: int = 0) -> None:
        ok = {"success": True, "message": "Succeeded to update model weights."}
        self.routes: dict[tuple[str, str], Any] = {
            ("GET", "/health"): (200, ""),
            ("POST", "/flush_cache"): (200, "Cache flushed.\n"),
            ("GET", "/get_model_info"): {"model_path": "recorded", "is_generation": True},
            **{("POST", path): ok for path in CONTROL_FIELDS},
        }
        if generate is not None:
            self.routes[("POST", "/generate")] = generate
        self.routes.update(routes or {})
        self.requests: list[tuple[str, str, Any]] = []
        self.refusals: list[str] = []
        super().__init__(self._handler_class(), port)

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{host}:{port}"

    def _answer(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        self.requests.append((method, path, body))
        route = self.routes.get((method, path))
        if route is None:
            return 404, {"detail": "Not Found"}
        why = check_generate_body(body) if path == "/generate" else self._check_control(path, body)
        if why:
            self.refusals.append(why)
            return 400, {"error": {"message": why}}
        result = route(body) if callable(route) else route
        return result if isinstance(result, tuple) else (200, result)

    @staticmethod
    def _check_control(path: str, body: Any) -> str | None:
        if path not in CONTROL_FIELDS:
            return None
        required, allowed = CONTROL_FIELDS[path]
        if not isinstance(body, dict):
            return f"{path}: body must be a JSON object"
        if required - set(body):
            return f"{path}: missing fields {sorted(required - set(body))}"
        if set(body) - allowed:
            return f"{path}: unknown fields {sorted(set(body) - allowed)}"
        return None

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class _Handler(BaseHTTPRequestHandler):
            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    status, answer = 400, {"error": {"message": "body is not JSON"}}
                else:
                    status, answer = outer._answer(method, self.path, body)
                data = answer.encode() if isinstance(answer, str) else json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain" if isinstance(answer, str) else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                self._serve("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._serve("POST")

            def log_message(self, *args: Any) -> None:
                pass

        return _Handler


def control_routes(fixture: dict[str, Any]) -> dict[tuple[str, str], tuple[int, Any]]:
    """Routes from a recorded control-endpoint fixture: {"POST /flush_cache": {"status", "body"}, ...}
    (keys with a parenthesised note, like "(failed)", are alternatives a test picks itself)."""
    routes = {}
    for key, answer in fixture.items():
        if key.startswith("_") or "(" in key:
            continue
        method, path = key.split(" ", 1)
        routes[(method, path)] = (answer["status"], answer["body"])
    return routes

"""The SGLang client against recorded exchanges served by a real local HTTP server.

SGLang needs CUDA; tests/support/sglang_recorded_server.py answers in its documented format and refuses a
request SGLang would refuse. The recordings are tests/policy/fixtures/sglang_*.json.
"""

from __future__ import annotations

import copy
import json
import socket
import threading
from pathlib import Path

import pytest
from support.sglang_recorded_server import RecordedSGLang, control_routes

from skillgate_core.policy.local_sampler import SamplingConfig
from skillgate_core.policy.sglang_client import SGLangClient, SGLangError, parse_urls
from skillgate_core.policy.tiny_model import TinyModelConfig, build_tiny_model

FIXTURES = Path(__file__).parent / "fixtures"
GENERATE = json.loads((FIXTURES / "sglang_generate.json").read_text())
CONTROL = json.loads((FIXTURES / "sglang_control.json").read_text())


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from transformers import AutoTokenizer

    out = tmp_path_factory.mktemp("model")
    path = build_tiny_model(TinyModelConfig(**GENERATE["tokenizer"]), {}, out).outputs["base_model"]
    return AutoTokenizer.from_pretrained(path)


def _playback(recording: dict):
    """/generate handler: the recorded answer, if the request is exactly the recorded request."""
    def answer(body):
        if body != recording["request"]:
            return 400, {"error": {"message": f"not the recorded request: {json.dumps(body)[:300]}"}}
        return recording["response"]
    return answer


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_recorded_batch_maps_to_completions_exactly(tok):
    request, response = GENERATE["request"], GENERATE["response"]
    with RecordedSGLang(generate=_playback(GENERATE)) as server, SGLangClient(server.url, tok) as client:
        comps = client.generate(request["input_ids"], SamplingConfig(max_new_tokens=32), max_new_tokens=[32, 6])
    assert server.refusals == [] and [r[:2] for r in server.requests] == [("POST", "/generate")]
    assert [c.finish for c in comps] == ["stop", "length"]
    for comp, item in zip(comps, response, strict=True):
        triples = item["meta_info"]["output_token_logprobs"]
        assert comp.token_ids == tuple(t[1] for t in triples) == tuple(item["output_ids"])
        assert comp.logprobs == tuple(t[0] for t in triples)  # exact: the server's floats, untouched
        assert comp.text == item["text"] == tok.decode(list(comp.token_ids), skip_special_tokens=True)
    assert comps[0].token_ids[-1] == tok.convert_tokens_to_ids("<|im_end|>")  # the stop token is kept
    assert len(comps[1].token_ids) == 6


def test_request_pins_every_sampling_knob(tok):
    """Temperature and top-p as configured; top-k, min-p and penalties pinned off (a model's
    generation_config.json defaults must not leak in); the turn-end ids as stop ids."""
    with RecordedSGLang(generate=lambda body: GENERATE["response"][:1]) as server, \
            SGLangClient(server.url, tok) as client:
        client.generate(GENERATE["request"]["input_ids"][:1], SamplingConfig(temperature=0.7, max_new_tokens=9))
    ((_, _, body),) = server.requests
    assert body["return_logprob"] is True and body["logprob_start_len"] == -1
    assert body["sampling_params"] == [{
        "max_new_tokens": 9, "temperature": 0.7, "top_p": 1.0, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0,
        "frequency_penalty": 0.0, "presence_penalty": 0.0,
        "stop_token_ids": sorted({tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")}),
    }]


def test_batch_is_shared_across_servers_in_order(tok):
    stop = tok.convert_tokens_to_ids("<|im_end|>")

    def echo(body):  # answer i: ids [prompt length, stop], so order is visible
        return [{"text": "", "meta_info": {"finish_reason": {"type": "stop", "matched": stop},
                                           "completion_tokens": 2,
                                           "output_token_logprobs": [[-0.5, len(p), None], [-0.25, stop, None]]}}
                for p in body["input_ids"]]

    prompts = [[5] * n for n in range(1, 6)]
    with RecordedSGLang(generate=echo) as a, RecordedSGLang(generate=echo) as b, \
            SGLangClient(f"{a.url}, {b.url}/", tok) as client:
        comps = client.generate(prompts, SamplingConfig(max_new_tokens=4))
    assert [c.token_ids for c in comps] == [(n, stop) for n in range(1, 6)]
    assert [len(r[2]["input_ids"]) for r in a.requests] == [3] and [len(r[2]["input_ids"]) for r in b.requests] == [2]


@pytest.mark.parametrize("mutate, message", [
    (lambda r: r[0]["meta_info"].update(finish_reason={"type": "abort", "message": "aborted"}), "finish_reason"),
    (lambda r: r[0].update(output_ids=[1, 2, 3]), "disagree"),
    (lambda r: r[0]["meta_info"].update(completion_tokens=99), "completion_tokens"),
    (lambda r: r[0]["meta_info"].pop("output_token_logprobs"), "return_logprob"),
    (lambda r: r.pop(), "answered 1 items"),
])
def test_malformed_answers_are_refused_naming_the_server(tok, mutate, message):
    recording = copy.deepcopy(GENERATE)
    mutate(recording["response"])
    with RecordedSGLang(generate=_playback(recording)) as server, SGLangClient(server.url, tok) as client:
        with pytest.raises(SGLangError, match=message) as err:
            client.generate(GENERATE["request"]["input_ids"], SamplingConfig(max_new_tokens=32), max_new_tokens=[32, 6])
    assert server.url in str(err.value)


def test_server_error_is_raised_at_once_naming_the_url(tok):
    with RecordedSGLang(generate=lambda body: (500, {"error": {"message": "CUDA out of memory"}})) as server, \
            SGLangClient(server.url, tok, retry_wait_s=0.01) as client:
        with pytest.raises(SGLangError) as err:
            client.generate([[1, 2, 3]], SamplingConfig())
    assert f"SGLang server {server.url} answered HTTP 500 to POST /generate" in str(err.value)
    assert "CUDA out of memory" in str(err.value)
    assert len(server.requests) == 1  # an answered request is never re-sent


def test_unreachable_server_is_retried_then_named(tok):
    url = f"http://127.0.0.1:{_free_port()}"
    with SGLangClient(url, tok, connect_retries=2, retry_wait_s=0.01) as client:
        with pytest.raises(SGLangError, match="unreachable") as err:
            client.check_health()
    assert f"SGLang server {url} is unreachable (GET /health, 3 attempts)" in str(err.value)


def test_waiting_for_health_gives_up_naming_the_url(tok):
    url = f"http://127.0.0.1:{_free_port()}"
    with SGLangClient(url, tok, connect_retries=0) as client:
        with pytest.raises(SGLangError, match=f"SGLang server {url} is unreachable"):
            client.wait_until_healthy(timeout_s=0.3, poll_s=0.1)


def test_connection_errors_are_retried_until_the_server_is_up(tok):
    port = _free_port()
    server = RecordedSGLang(port=port)
    starter = threading.Timer(0.4, server.__enter__)
    starter.start()
    try:
        with SGLangClient(f"http://127.0.0.1:{port}", tok, connect_retries=4, retry_wait_s=0.2) as client:
            client.check_health()
    finally:
        starter.join()
        server.__exit__()
    assert [r[:2] for r in server.requests] == [("GET", "/health")]


def test_weight_update_from_disk_sends_the_documented_body_then_flushes(tok):
    routes = control_routes(CONTROL)
    with RecordedSGLang(routes=routes) as a, RecordedSGLang(routes=routes) as b, \
            SGLangClient([a.url, b.url], tok) as client:
        client.check_health()
        assert client.model_info()[0]["model_path"] == "/models/sft"
        answers = client.update_weights_from_disk("/weights/step-00000001")
    assert [x["message"] for x in answers] == ["Succeeded to update model weights."] * 2
    for server in (a, b):
        assert server.refusals == []
        assert server.requests == [("GET", "/health", None), ("GET", "/get_model_info", None),
                                   ("POST", "/update_weights_from_disk", {"model_path": "/weights/step-00000001"}),
                                   ("POST", "/flush_cache", None)]


def test_failed_weight_update_raises_with_the_servers_message(tok):
    failed = CONTROL["POST /update_weights_from_disk (failed)"]
    routes = {("POST", "/update_weights_from_disk"): (failed["status"], failed["body"])}
    with RecordedSGLang(routes=routes) as server, SGLangClient(server.url, tok) as client:
        with pytest.raises(SGLangError, match="repository not found") as err:
            client.update_weights_from_disk("/models/missing")
    assert server.url in str(err.value) and ("POST", "/flush_cache", None) not in server.requests


def test_distributed_weight_endpoints_send_documented_bodies(tok):
    """The HTTP half of the NCCL fast path (the broadcast itself needs GPUs and SGLang)."""
    with RecordedSGLang(routes=control_routes(CONTROL)) as server, SGLangClient(server.url, tok) as client:
        client.init_weights_update_group(server.url, master_address="10.0.0.2", master_port=29600, rank_offset=1,
                                         world_size=3, group_name="g")
        client.update_weights_from_distributed(server.url, names=["model.norm.weight"], dtypes=["bfloat16"],
                                               shapes=[[32]], group_name="g", flush_cache=False)
        client.destroy_weights_update_group(server.url, group_name="g")
    assert server.refusals == []
    assert [body for _, _, body in server.requests] == [
        {"master_address": "10.0.0.2", "master_port": 29600, "rank_offset": 1, "world_size": 3, "group_name": "g",
         "backend": "nccl"},
        {"names": ["model.norm.weight"], "dtypes": ["bfloat16"], "shapes": [[32]], "group_name": "g",
         "flush_cache": False},
        {"group_name": "g"},
    ]


def test_urls_are_parsed_and_checked():
    assert parse_urls(" http://a:1/, https://b:2 ,") == ("http://a:1", "https://b:2")
    with pytest.raises(ValueError, match="no SGLang server URL"):
        parse_urls(" , ")
    with pytest.raises(ValueError, match="must start with http"):
        parse_urls("a:30000")


class _Hostile:
    """A real HTTP server answering every request with `mode`: huge (100 MB), drip, deep (nested JSON)."""

    def __init__(self, mode: str) -> None:
        from http.server import BaseHTTPRequestHandler

        from support.background_server import BackgroundServer

        stop = self.stop = threading.Event()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                try:
                    if mode == "deep":
                        body = b"[" * 100_000 + b"]" * 100_000
                        self.send_header("Content-Length", str(len(body)))
                        self.end_headers()
                        self.wfile.write(body)
                        return
                    self.end_headers()
                    for _ in range(100 if mode == "huge" else 600):
                        if mode == "drip" and stop.wait(0.1):
                            return
                        self.wfile.write(b" " * (2**20 if mode == "huge" else 1))
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = BackgroundServer(Handler)

    def __enter__(self) -> str:
        self.server.__enter__()
        host, port = self.server.address
        return f"http://{host}:{port}"

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.server.__exit__(*exc)


@pytest.mark.parametrize(("mode", "message"), [("huge", "larger than 4194304 bytes"),
                                               ("drip", "within the deadline of 1.5 s"), ("deep", "non-JSON")])
def test_a_hostile_server_costs_bounded_bytes_and_time_and_a_clear_error(tok, mode: str, message: str):
    import time

    with _Hostile(mode) as url:
        client = SGLangClient(url, tok, timeout_s=30.0, deadline_s=1.5, max_reply_bytes=4 * 2**20)
        started = time.monotonic()
        with pytest.raises(SGLangError, match=message):
            client.generate([[1, 2, 3]], SamplingConfig(max_new_tokens=4))
        assert time.monotonic() - started < 5

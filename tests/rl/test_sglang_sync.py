"""Server-mode GRPO: the weight push to SGLang servers (a local server answering in SGLang's format).

- the disk path: the folder is complete and loadable by transformers at the moment the servers are
  told to load it, holds the engine's current weights, earlier pushes are pruned;
- the fast path's group join and bucketed broadcast, over gloo, with a stand-in receiver process
  playing an SGLang server's side (its join is SGLang's construction; NCCL and SGLang itself are
  not exercised here);
- the config fields.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import socket
import threading
from pathlib import Path

import pytest
import torch
from support.sglang_recorded_server import RecordedSGLang, control_routes

from skillgate_core.policy.local_sampler import SamplingConfig
from skillgate_core.policy.sglang_client import SGLangClient, SGLangError, worker_sglang_urls
from skillgate_core.rl.grpo_config import GRPOConfig
from skillgate_core.rl.sglang_sync import (
    WEIGHTS_MARKER,
    NCCLWeightBroadcast,
    ServerRollouts,
    push_weights_from_disk,
)

CONTROL = json.loads((Path(__file__).parents[1] / "policy" / "fixtures" / "sglang_control.json").read_text())


def shifted_model_and_tok(model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    with torch.no_grad():  # the push must carry the engine's weights, not the base model's
        for p in model.parameters():
            p.add_(0.25)
    return model, AutoTokenizer.from_pretrained(model_dir)


@pytest.fixture()
def model_and_tok(tiny_model_dir):
    return shifted_model_and_tok(tiny_model_dir)


def test_disk_push_writes_loadable_weights_before_the_servers_load_them(tiny_policy_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    tiny_model_dir = tiny_policy_dir  # both shapes: Qwen2 and Llama (SmolLM2's)
    model, tok = shifted_model_and_tok(tiny_model_dir)
    expected = model.state_dict()
    seen, loading = [], threading.Lock()

    def update(body):  # what a server would find at model_path when told to load it
        path = Path(body["model_path"])
        with loading:  # both servers answer in threads of this process; transformers' loading is not thread-safe
            loaded = AutoModelForCausalLM.from_pretrained(path).state_dict()
        seen.append((path.name, sorted(p.name for p in path.iterdir()),
                     all(torch.equal(loaded[k], v) for k, v in expected.items())))
        return CONTROL["POST /update_weights_from_disk"]["body"]

    weights = tmp_path / "weights"
    (weights / "notes").mkdir(parents=True)  # not a pushed folder: pruning leaves it alone
    routes = {**control_routes(CONTROL), ("POST", "/update_weights_from_disk"): update}
    with RecordedSGLang(routes=routes) as a, RecordedSGLang(routes=routes) as b, \
            SGLangClient([a.url, b.url], tok) as client:
        first = push_weights_from_disk(model, client, base_model_dir=tiny_model_dir, weights_dir=weights,
                                       tag="step-00000001")
        second = push_weights_from_disk(model, client, base_model_dir=tiny_model_dir, weights_dir=weights,
                                        tag="step-00000002")
    for server in (a, b):
        assert server.refusals == []
        assert server.requests == [("POST", "/update_weights_from_disk", {"model_path": first}),
                                   ("POST", "/flush_cache", None),
                                   ("POST", "/update_weights_from_disk", {"model_path": second}),
                                   ("POST", "/flush_cache", None)]
    assert [(name, same) for name, _, same in seen] == [("step-00000001", True)] * 2 + [("step-00000002", True)] * 2
    files = seen[0][1]
    assert {"model.safetensors", "config.json", "tokenizer.json", WEIGHTS_MARKER} <= set(files)
    assert not any(f.endswith(".bin") for f in files) and files.count("model.safetensors") == 1
    assert sorted(p.name for p in weights.iterdir()) == ["notes", "step-00000002"]  # step 1 pruned, no temp left


def test_failed_push_raises_naming_the_server(tiny_model_dir, model_and_tok, tmp_path):
    model, tok = model_and_tok
    failed = CONTROL["POST /update_weights_from_disk (failed)"]
    with RecordedSGLang(routes={("POST", "/update_weights_from_disk"): (failed["status"], failed["body"])}) as server, \
            SGLangClient(server.url, tok) as client:
        with pytest.raises(SGLangError, match="repository not found") as err:
            push_weights_from_disk(model, client, base_model_dir=tiny_model_dir, weights_dir=tmp_path, tag="step-1")
    assert server.url in str(err.value)


def test_server_rollouts_from_the_grpo_config(tiny_model_dir, model_and_tok, tmp_path, monkeypatch):
    model, tok = model_and_tok
    with RecordedSGLang(routes=control_routes(CONTROL)) as server:
        monkeypatch.setenv("SKILLGATE_SGLANG_URLS", server.url + "/")
        cfg = GRPOConfig(rollout_source="sglang", sglang_timeout_s=30)
        servers = ServerRollouts(cfg, tok, urls=worker_sglang_urls(), model_dir=tiny_model_dir,
                                 weights_dir=tmp_path / "w")
        servers.check_health()
        assert servers.push(model, steps_done=3) == str(tmp_path / "w" / "step-00000003")
        policy = servers.policy(SamplingConfig(max_new_tokens=8))
        servers.close()
    assert (policy.name, policy.client.urls, policy.client.timeout_s) == ("policy", (server.url,), 30)


def test_sglang_rollout_source_needs_the_workers_valid_urls(monkeypatch):
    monkeypatch.delenv("SKILLGATE_SGLANG_URLS", raising=False)
    with pytest.raises(ValueError, match="SKILLGATE_SGLANG_URLS is not set"):
        GRPOConfig(rollout_source="sglang")
    monkeypatch.setenv("SKILLGATE_SGLANG_URLS", "localhost:30000")
    with pytest.raises(ValueError, match="SKILLGATE_SGLANG_URLS: SGLang server URL 'localhost:30000' must start with http"):
        GRPOConfig(rollout_source="sglang")
    monkeypatch.setenv("SKILLGATE_SGLANG_URLS", "http://a:1,http://b:2")
    assert GRPOConfig(rollout_source="sglang").rollout_source == "sglang"
    assert worker_sglang_urls() == ("http://a:1", "http://b:2")


def _stand_in_server(inbox, outbox) -> None:
    """An SGLang server's side of the weight group (spawned process, group rank 1): join on the
    init request, then receive each announced bucket by broadcast from rank 0, in order."""
    from skillgate_core.rl.sglang_sync import join_weight_group

    init = inbox.get(timeout=120)
    group = join_weight_group(init["master_address"], init["master_port"], world_size=init["world_size"],
                              rank=init["rank_offset"], group_name=init["group_name"], backend=init["backend"],
                              timeout_s=120)
    outbox.put("joined")
    while (bucket := inbox.get(timeout=120)) is not None:
        received = {}
        for name, dtype, shape in zip(bucket["names"], bucket["dtypes"], bucket["shapes"], strict=True):
            tensor = torch.empty(shape, dtype=getattr(torch, dtype))
            torch.distributed.broadcast(tensor, group=group, group_src=0)
            received[name] = tensor
        outbox.put(received)
    torch.distributed.destroy_process_group(group)


def test_fast_path_broadcasts_every_bucket_to_the_group_over_gloo(model_and_tok):
    model, tok = model_and_tok
    ctx = mp.get_context("spawn")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    peer = ctx.Process(target=_stand_in_server, args=(inbox, outbox), daemon=True)
    peer.start()
    received: dict[str, torch.Tensor] = {}

    def init(body):  # like SGLang, answer once the group has formed
        inbox.put(body)
        assert outbox.get(timeout=120) == "joined"
        return CONTROL["POST /init_weights_update_group"]["body"]

    def update(body):  # like SGLang, answer once the bucket has arrived
        inbox.put(body)
        received.update(outbox.get(timeout=120))
        return CONTROL["POST /update_weights_from_distributed"]["body"]

    def destroy(body):
        inbox.put(None)
        return CONTROL["POST /destroy_weights_update_group"]["body"]

    routes = {**control_routes(CONTROL), ("POST", "/init_weights_update_group"): init,
              ("POST", "/update_weights_from_distributed"): update, ("POST", "/destroy_weights_update_group"): destroy}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:
        with RecordedSGLang(routes=routes) as server, SGLangClient(server.url, tok) as client:
            sync = NCCLWeightBroadcast(client, master_address="127.0.0.1", master_port=port, backend="gloo",
                                       ranks_per_server=[1], bucket_bytes=64 * 1024, timeout_s=120)
            sync.connect()
            sync.push(model)
            sync.close()
        peer.join(timeout=60)
    finally:
        if peer.is_alive():
            peer.kill()
    assert peer.exitcode == 0 and server.refusals == []
    params = dict(model.named_parameters())
    assert set(received) == set(params)
    assert all(torch.equal(received[n], p.detach()) for n, p in params.items())
    paths = [path for _, path, _ in server.requests]
    assert paths[0] == "/init_weights_update_group" and paths[-2:] == ["/flush_cache", "/destroy_weights_update_group"]
    buckets = [body for _, path, body in server.requests if path == "/update_weights_from_distributed"]
    assert len(buckets) > 1 and all(b["dtypes"] == ["float32"] * len(b["names"]) and b["flush_cache"] is False
                                    for b in buckets)
    assert server.requests[0][2] == {"master_address": "127.0.0.1", "master_port": port, "rank_offset": 1,
                                     "world_size": 2, "group_name": "skillgate_weights", "backend": "gloo"}

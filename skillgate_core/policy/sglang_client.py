"""A typed HTTP client for one or more SGLang servers: server-mode rollouts and weight pushes.

An SGLang server (`infra/sglang_server.sh`, CUDA machines only) serves the policy. We send token
ids, never text, and ask for per-token log-probs, so a server completion is the same record the
local sampler produces (`Completion`): the sampled ids (the stop token included), log p of each
under the tempered sampling distribution, the text decoded from those ids with special tokens
removed, and stop / length. Nothing is re-tokenized (docs/method.md 2).

    client = SGLangClient("http://10.0.0.5:30000,http://10.0.0.6:30000", tokenizer)
    client.check_health()
    c1, c2 = client.generate([ids1, ids2], SamplingConfig(max_new_tokens=256), max_new_tokens=[256, 40])
    client.update_weights_from_disk("/mnt/weights/step-00000003")   # a folder the servers can read

A batch is split into one contiguous share per server, sent concurrently, and reassembled in order.

Wire formats, as SGLang documents them (docs/basic_usage/sampling_params.md, native_api.ipynb,
docs/advanced_features/sglang_for_rl.md; python/sglang/srt/managers/io_struct.py):

    POST /generate  {"input_ids": [[...], ...], "sampling_params": [{...}, ...],
                     "return_logprob": true, "logprob_start_len": -1}
      -> [{"text": ..., "output_ids": [...], "meta_info": {"finish_reason": {"type": "stop", "matched": ID}
           | {"type": "length", "length": N}, "completion_tokens": N,
           "output_token_logprobs": [[logprob, token_id, null], ...], ...}}, ...]   (one per prompt, in order)
    POST /update_weights_from_disk         {"model_path": DIR} -> {"success": bool, "message": str, ...}
    POST /init_weights_update_group        {"master_address", "master_port", "rank_offset", "world_size",
                                            "group_name", "backend"} -> {"success", "message"}
    POST /update_weights_from_distributed  {"names", "dtypes", "shapes", "group_name", "flush_cache"}
    POST /destroy_weights_update_group     {"group_name"}
    POST /flush_cache;  GET /health;  GET /get_model_info;  GET /get_server_info

Sampling: every knob that shapes the distribution is sent explicitly (top_k -1, min_p 0, no
penalties), so a model's generation_config.json defaults, which SGLang applies by default
(`--sampling-defaults model`), never leak into rollouts. SGLang's log-prob of a sampled token is
log softmax(logits / temperature), taken before top-p / top-k filtering (layers/sampler.py), the
same quantity the local sampler records and the trainer recomputes. A server started with
SGLANG_RETURN_ORIGINAL_LOGPROB=1 returns pre-temperature values instead (the same only at
temperature 1.0): leave it unset. Server sampling is not seeded per request, so a resumed run does
not redraw the same tokens.

A server is not trusted to be well-behaved: an answer is read in chunks up to `max_reply_bytes`, a
request ends at `deadline_s` however slowly bytes arrive, and a malformed answer (not JSON, nested
too deep, wrong shapes) is an SGLangError. Errors name the server URL. A redirect (3xx) is an
SGLangError naming its status and the Location's origin: never followed, never taken for success. Only connection failures (the request never reached the server) are
retried; a timeout or an error answer is raised at once, since the server may have acted on it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import httpx

from skillgate_core.policy.http_answers import redirect_origin
from skillgate_core.policy.local_sampler import Completion, SamplingConfig, stop_token_ids

__all__ = ["ENV_SGLANG_URLS", "SGLangClient", "SGLangError", "parse_urls", "worker_sglang_urls"]


class SGLangError(RuntimeError):
    """An SGLang server could not be reached, answered with an error, or answered something malformed."""


def parse_urls(urls: str | Sequence[str]) -> tuple[str, ...]:
    """'http://a:30000, http://b:30000' (or a list) -> the server base URLs, without trailing '/'."""
    items = urls.split(",") if isinstance(urls, str) else list(urls)
    out = tuple(u.strip().rstrip("/") for u in items if u.strip())
    if not out:
        raise ValueError("no SGLang server URL given (expected 'http://host:port[,http://host2:port2...]')")
    for url in out:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"SGLang server URL {url!r} must start with http:// or https://")
    return out


ENV_SGLANG_URLS = "SKILLGATE_SGLANG_URLS"
"""The SGLang servers a worker's GRPO runs sample from and push weights to: worker configuration (an
environment variable where the worker runs), never a run parameter, which anyone who can start a run sets."""


def worker_sglang_urls() -> tuple[str, ...]:
    """The servers SKILLGATE_SGLANG_URLS lists (parse_urls); ValueError naming the variable when it is
    unset or malformed."""
    raw = os.environ.get(ENV_SGLANG_URLS, "")
    if not raw.strip():
        raise ValueError(f"{ENV_SGLANG_URLS} is not set where the worker runs: set it to the SGLang servers' base "
                         "URLs, comma-separated (e.g. http://127.0.0.1:30000; infra/sglang_server.sh starts one)")
    try:
        return parse_urls(raw)
    except ValueError as exc:
        raise ValueError(f"{ENV_SGLANG_URLS}: {exc}") from None


def _shares(n: int, k: int) -> list[tuple[int, int]]:
    """[start, end) of n items split into at most k contiguous, near-equal, non-empty shares."""
    k = max(1, min(k, n))
    base, extra = divmod(n, k)
    bounds, start = [], 0
    for i in range(k):
        end = start + base + (1 if i < extra else 0)
        bounds.append((start, end))
        start = end
    return bounds


class SGLangClient:
    """Talks to the SGLang servers at `urls`; `tokenizer` decodes completions and names the stop ids."""

    def __init__(
        self,
        urls: str | Sequence[str],
        tokenizer: Any,
        *,
        timeout_s: float = 600.0,
        connect_timeout_s: float = 10.0,
        connect_retries: int = 3,
        retry_wait_s: float = 1.0,
        deadline_s: float = 1800.0,
        max_reply_bytes: int = 1 << 30,
        health_timeout_s: float = 10.0,
    ) -> None:
        self.urls = parse_urls(urls)
        # /health answers at once or not at all: a server that took the connection and stays silent is not
        # healthy, and must not hold a run's start (every rank checks before its first rollout) for timeout_s
        self.health_timeout_s = health_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.tokenizer = tokenizer
        self.stop_ids = stop_token_ids(tokenizer)
        self.timeout_s = timeout_s
        self.connect_retries = connect_retries
        self.retry_wait_s = retry_wait_s
        self.deadline_s = deadline_s
        self.max_reply_bytes = max_reply_bytes
        # follow_redirects=False (httpx's default, said here): a 3xx is an error (_request), never followed
        self._http = httpx.Client(timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s), follow_redirects=False)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SGLangClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transport -------------------------------------------------------------------------------

    def _request(self, url: str, method: Literal["GET", "POST"], path: str, body: object = None,
                 timeout_s: float | None = None) -> httpx.Response:
        """One HTTP exchange (waiting `timeout_s`, default the client's timeout_s, for each part of the answer);
        retried only while the connection itself fails; errors name the URL."""
        attempts = self.connect_retries + 1
        wait = self.timeout_s if timeout_s is None else timeout_s
        for attempt in range(attempts):
            try:
                response = self._bounded(url, method, path, body, wait)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                if attempt + 1 == attempts:
                    raise SGLangError(f"SGLang server {url} is unreachable ({method} {path}, {attempts} attempts): "
                                      f"{exc}. Is it running? infra/sglang_server.sh starts one.") from exc
                time.sleep(self.retry_wait_s * 2**attempt)
                continue
            except httpx.TimeoutException as exc:
                raise SGLangError(f"SGLang server {url} gave no answer to {method} {path} within "
                                  f"{wait:g} s: {exc!r}") from exc
            except httpx.HTTPError as exc:
                raise SGLangError(f"SGLang server {url}: {method} {path} failed: {exc!r}") from exc
            if 300 <= response.status_code < 400:  # httpx follows none; a 3xx is no answer to act on either
                raise SGLangError(f"SGLang server {url} answered HTTP {response.status_code} to {method} {path}: a "
                                  f"redirect to {redirect_origin(url + path, response.headers.get('Location'))}, "
                                  "not followed (requests go to the configured servers only)")
            if response.status_code >= 400:
                raise SGLangError(f"SGLang server {url} answered HTTP {response.status_code} to {method} {path}: "
                                  f"{response.text[:500]}")
            return response
        raise AssertionError("unreachable")

    def _bounded(self, url: str, method: Literal["GET", "POST"], path: str, body: object,
                 timeout_s: float) -> httpx.Response:
        """One exchange whose answer is read in chunks: at most max_reply_bytes, never past deadline_s."""
        deadline = time.monotonic() + self.deadline_s
        timeout = httpx.Timeout(timeout_s, connect=self.connect_timeout_s)
        with self._http.stream(method, url + path, json=body, timeout=timeout) as response:
            chunks, size = [], 0
            for chunk in response.iter_bytes():  # decoded: what the answer costs in memory
                size += len(chunk)
                if size > self.max_reply_bytes:
                    raise SGLangError(f"SGLang server {url}: {method} {path} answer is larger than "
                                      f"{self.max_reply_bytes} bytes; read no further")
                if time.monotonic() > deadline:
                    raise SGLangError(f"SGLang server {url}: {method} {path} gave no complete answer within "
                                      f"the deadline of {self.deadline_s:g} s")
                chunks.append(chunk)
            headers = {k: v for k, v in response.headers.items() if k.lower() not in ("content-encoding", "content-length")}
            return httpx.Response(response.status_code, headers=headers, content=b"".join(chunks),
                                  request=response.request)

    def _json(self, url: str, method: Literal["GET", "POST"], path: str, body: object = None) -> Any:
        response = self._request(url, method, path, body)
        try:
            return response.json()
        except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than Python parses
            raise SGLangError(f"SGLang server {url}: {method} {path} answered non-JSON: {response.text[:200]!r}") from exc

    def _each(self, fn: Callable[[str], Any], urls: Sequence[str] | None = None) -> list[Any]:
        """fn(url) for every server, concurrently; results in URL order; the first error is raised."""
        urls = list(urls or self.urls)
        if len(urls) == 1:
            return [fn(urls[0])]
        with ThreadPoolExecutor(max_workers=len(urls)) as pool:
            return [f.result() for f in [pool.submit(fn, u) for u in urls]]

    def _control(self, url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """A weight-control POST: answered {"success": bool, "message": str}; success=false is an error."""
        answer = self._json(url, "POST", path, body)
        if not isinstance(answer, dict) or answer.get("success") is not True:
            raise SGLangError(f"SGLang server {url}: POST {path} did not succeed: {answer!r}")
        return answer

    # -- health and info -------------------------------------------------------------------------

    def check_health(self) -> None:
        """GET /health on every server, each given health_timeout_s to answer; raises SGLangError naming the
        first one that is not healthy."""
        self._each(lambda url: self._request(url, "GET", "/health", timeout_s=self.health_timeout_s))

    def wait_until_healthy(self, timeout_s: float = 600.0, poll_s: float = 2.0) -> None:
        """Poll /health until every server answers (a server loading a large model takes minutes)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return self.check_health()
            except SGLangError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(poll_s)

    def model_info(self) -> list[dict[str, Any]]:
        """GET /get_model_info of every server (model_path, tokenizer_path, weight_version, ...)."""
        return self._each(lambda url: self._json(url, "GET", "/get_model_info"))

    def server_info(self) -> list[dict[str, Any]]:
        """GET /get_server_info of every server (its launch arguments: tp_size, dp_size, ...)."""
        return self._each(lambda url: self._json(url, "GET", "/get_server_info"))

    # -- generation ------------------------------------------------------------------------------

    def sampling_params(self, config: SamplingConfig, max_new_tokens: int) -> dict[str, Any]:
        """One prompt's `sampling_params` (see the module docstring for why each knob is explicit)."""
        return {
            "max_new_tokens": int(max_new_tokens),
            "temperature": config.temperature,
            "top_p": config.top_p,
            "top_k": -1,
            "min_p": 0.0,
            "repetition_penalty": 1.0,
            "frequency_penalty": 0.0,
            "presence_penalty": 0.0,
            "stop_token_ids": list(self.stop_ids),
        }

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        config: SamplingConfig,
        max_new_tokens: Sequence[int] | None = None,
    ) -> list[Completion]:
        """One completion per prompt (token ids), in order. `max_new_tokens` gives each prompt its own
        budget (default: config.max_new_tokens for all)."""
        if not prompts:
            return []
        budgets = [config.max_new_tokens] * len(prompts) if max_new_tokens is None else list(max_new_tokens)
        if len(budgets) != len(prompts):
            raise ValueError(f"{len(prompts)} prompts but {len(budgets)} max_new_tokens")
        if min(budgets) < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {min(budgets)}")
        shares = _shares(len(prompts), len(self.urls))

        def run(i: int) -> list[Completion]:
            start, end = shares[i]
            return self._generate_on(self.urls[i], prompts[start:end], config, budgets[start:end])

        if len(shares) == 1:
            return run(0)
        with ThreadPoolExecutor(max_workers=len(shares)) as pool:
            parts = [f.result() for f in [pool.submit(run, i) for i in range(len(shares))]]
        return [c for part in parts for c in part]

    def _generate_on(self, url: str, prompts: Sequence[Sequence[int]], config: SamplingConfig,
                     budgets: Sequence[int]) -> list[Completion]:
        body = {
            "input_ids": [[int(t) for t in p] for p in prompts],  # a list of lists: always a batch answer
            "sampling_params": [self.sampling_params(config, n) for n in budgets],
            "return_logprob": True,
            "logprob_start_len": -1,  # log-probs of the output tokens only
        }
        answer = self._json(url, "POST", "/generate", body)
        if not isinstance(answer, list) or len(answer) != len(prompts):
            got = f"{len(answer)} items" if isinstance(answer, list) else type(answer).__name__
            raise SGLangError(f"SGLang server {url}: POST /generate for {len(prompts)} prompts answered {got}")
        return [self._completion(url, item) for item in answer]

    def _completion(self, url: str, item: Any) -> Completion:
        """One /generate answer -> Completion; ids and log-probs both come from output_token_logprobs."""
        try:
            meta = item["meta_info"]
            triples = meta["output_token_logprobs"]
            ids = tuple(int(t[1]) for t in triples)
            logprobs = tuple(float(t[0]) for t in triples)
            reason = meta.get("finish_reason") or {}
            expected = meta.get("completion_tokens")
            output_ids = item.get("output_ids")
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            raise SGLangError(f"SGLang server {url}: malformed /generate answer (was return_logprob honoured?): "
                              f"{exc!r} in {str(item)[:300]}") from exc
        kind = reason.get("type") if isinstance(reason, dict) else None
        if kind not in ("stop", "length"):
            raise SGLangError(f"SGLang server {url}: generation ended with finish_reason {reason!r}")
        finish: Literal["stop", "length"] = kind
        matched = reason.get("matched")
        if finish == "stop" and isinstance(matched, int) and (not ids or ids[-1] != matched):
            raise SGLangError(f"SGLang server {url}: finish_reason matched token {matched} but the last "
                              f"sampled token is {ids[-1] if ids else None}")
        if expected is not None and expected != len(ids):
            raise SGLangError(f"SGLang server {url}: completion_tokens = {expected} but "
                              f"{len(ids)} output_token_logprobs")
        # Some SGLang versions trim the matched stop token from output_ids; the log-prob triples keep it.
        if output_ids is not None and list(output_ids) not in (list(ids), list(ids[:-1]) if finish == "stop" else None):
            raise SGLangError(f"SGLang server {url}: output_ids {list(output_ids)[:20]} disagree with the "
                              f"output_token_logprobs ids {list(ids)[:20]}")
        return Completion(
            token_ids=ids,
            logprobs=logprobs,
            text=self.tokenizer.decode(list(ids), skip_special_tokens=True),
            finish=finish,
        )

    # -- weights ---------------------------------------------------------------------------------

    def flush_cache(self) -> None:
        """POST /flush_cache on every server (the radix cache holds KV of the old weights)."""
        self._each(lambda url: self._request(url, "POST", "/flush_cache"))

    def update_weights_from_disk(self, model_path: str, *, flush_cache: bool = True) -> list[dict[str, Any]]:
        """Every server loads the weights in `model_path` (an HF model dir it can read at that path),
        then drops its prefix cache. The portable path: works wherever the servers see the folder."""
        answers = self._each(lambda url: self._control(url, "/update_weights_from_disk", {"model_path": model_path}))
        if flush_cache:
            self.flush_cache()
        return answers

    def init_weights_update_group(self, url: str, *, master_address: str, master_port: int, rank_offset: int,
                                  world_size: int, group_name: str, backend: str = "nccl") -> dict[str, Any]:
        """Ask server `url` to join a process group (its GPUs take ranks rank_offset..). It answers only
        once every member joined, so call it from a thread while the trainer joins too."""
        return self._control(url, "/init_weights_update_group", {
            "master_address": master_address, "master_port": int(master_port), "rank_offset": int(rank_offset),
            "world_size": int(world_size), "group_name": group_name, "backend": backend,
        })

    def update_weights_from_distributed(self, url: str, *, names: Sequence[str], dtypes: Sequence[str],
                                        shapes: Sequence[Sequence[int]], group_name: str,
                                        flush_cache: bool = True) -> dict[str, Any]:
        """Ask server `url` to receive these tensors (broadcast from group rank 0, in this order) and
        load them; it answers once they arrived, so call it from a thread while rank 0 broadcasts."""
        return self._control(url, "/update_weights_from_distributed", {
            "names": list(names), "dtypes": list(dtypes), "shapes": [[int(d) for d in s] for s in shapes],
            "group_name": group_name, "flush_cache": flush_cache,
        })

    def destroy_weights_update_group(self, url: str, *, group_name: str) -> dict[str, Any]:
        """Ask server `url` to leave the weight-update group."""
        return self._control(url, "/destroy_weights_update_group", {"group_name": group_name})

"""The OpenAI-compatible `/v1/chat/completions` client (urllib, no SDK): for policies served over
HTTP, and for SkillGym's builder/reviewer model (benchgen.skillgym.ChatClient, fixed settings over it).

Tools are not sent as the API's `tools` field: the system prompt already holds the tool schemas as
text in our prompt format, and the reply's text is parsed by the shared tool-call parser, exactly
as for a local model. What the server returns is kept as text (`ChatTurn.text`); token ids are made
from it once, by the caller, with the policy tokenizer, only where ids are needed.

    endpoint = OpenAIEndpoint(base_url="http://127.0.0.1:8000/v1", model="qwen3.5-9b")
    turn = chat_completion(endpoint, messages, temperature=1.0, top_p=1.0, max_tokens=1024, seed=7)
    turn.text, turn.finish, turn.completion_tokens

POST {base_url}/chat/completions with {model, messages, temperature, max_tokens} and top_p and seed
when given. What is retried (with backoff) is what the server cannot still be working on: a request
it answered with 429 or a 5xx other than 504, and one that was never wholly sent (connection refused,
reset while sending). A request that was sent and then timed out (or whose connection closed, or a
504 from a proxy that gave up waiting) is never sent again: the server may still be generating it,
and a re-send would pile a second generation onto a server that is already too slow. Anything that
is not retried raises EndpointError naming the URL and why (a timeout says so and says it was not
re-sent).

The endpoint is not trusted: a reply is read in chunks up to what its max_tokens can need
(`reply_limit`: 256 bytes a token + 64 KiB) and never past `max_reply_bytes` (never the whole body
at once), one call ends at `deadline_s` whatever the server drips (retries included), and a
body that is not UTF-8, not JSON, nested too deep or shaped wrong is an EndpointError, never a raw
exception (docs/security.md). A redirect (any 3xx) is never followed: it is an EndpointError naming
the status and the Location's origin, so the request and its bearer token reach the configured URL
only. What the server answers that is not a chat completion (an HTTP error, a body that is not one)
is described by its content type and size, never quoted: the error is stored with the trial.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from skillgate_core.base.config_ranges import NonNegativeInt, PositiveFloat, PositiveInt, check_ranges
from skillgate_core.policy.endpoint_keys import KeyDestinationError, check_api_key_env, sendable_key
from skillgate_core.policy.http_answers import described, redirect_origin

__all__ = ["ChatTurn", "EndpointError", "OpenAIEndpoint", "chat_completion", "reply_limit"]

class EndpointError(RuntimeError):
    """The endpoint failed or answered something that is not a chat completion."""


# A declaration, not logic: each field documented where it is declared (docs/design.md, Style).
@dataclass(frozen=True)
class OpenAIEndpoint:
    """Where the policy is served and how to ask it."""

    base_url: str
    """API root, e.g. http://127.0.0.1:8000/v1 (/chat/completions is appended)."""
    model: str
    """Model name sent with every request."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the bearer token (unset or empty: no Authorization header); only
    OPENAI_API_KEY or SKILLGATE_<NAME>_API_KEY (check_api_key_env), and sent only to an origin its
    PREFIX_BASE_URLS lists (policy.endpoint_keys)."""
    timeout_s: PositiveFloat = 600.0
    """Request timeout: the longest wait for the server to answer or send more bytes. A server that does
    not stream sends nothing until the whole turn is generated, so set this above the slowest turn
    expected (`skillgate eval run --request-timeout`). A request that times out is not sent again: its
    turn fails, and its trial is recorded as an error saying so."""
    slow_request_s: PositiveFloat = 120.0
    """A request still unanswered after this many seconds is reported once per policy (one warning
    line: the endpoint, the requests waiting, the timeout), so a slow server is visible long before
    the timeout."""
    retries: NonNegativeInt = 4
    """Extra attempts after a 429, a 5xx other than 504, or a request that could not be sent (module
    docstring: what is never re-sent)."""
    deadline_s: PositiveFloat = 900.0
    """Total time of one call, every attempt and the reading of the reply included: a server that
    drips bytes cannot hold an episode (or a SIGTERM) longer than this."""
    max_reply_bytes: PositiveInt = 16 * 2**20
    """Largest reply body read, whatever max_tokens; a longer one is an error, read no further. A call reads at
    most what its max_tokens can need (reply_limit) when that is less."""
    concurrency: PositiveInt = 16
    """Requests in flight at once (one per active episode, up to this many)."""

    def __post_init__(self) -> None:
        check_ranges(self)
        check_api_key_env(self.api_key_env)
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {self.base_url!r}")
        if not self.model:
            raise ValueError("model must name the served model")

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"


@dataclass(frozen=True)
class ChatTurn:
    """One assistant reply."""

    text: str
    """choices[0].message.content, exactly as returned ('' when null)."""
    finish: Literal["stop", "length"]
    """length when the server says finish_reason=length, else stop."""
    prompt_tokens: int
    """usage.prompt_tokens (0 when not reported)."""
    completion_tokens: int
    """usage.completion_tokens (0 when not reported)."""
    seconds: float
    """Wall time, retries included."""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Every 3xx stays an answer (an HTTPError): following it would send the request, and urllib copies
    the Authorization header with it, to whatever host the Location names."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


def _parse(url: str, data: Any, what: str) -> tuple[str, str, int, int]:
    """(text, finish_reason, prompt_tokens, completion_tokens) of a decoded reply; `what` describes the
    body (http_answers.described) in an error, which never quotes it."""
    try:
        choice = data["choices"][0]
        text = choice["message"].get("content") or ""
        reason = str(choice.get("finish_reason") or "stop")
    except (KeyError, IndexError, TypeError, AttributeError):
        raise EndpointError(f"{url}: not a chat completion ({what})") from None
    if not isinstance(text, str):
        raise EndpointError(f"{url}: message.content is not text but {type(text).__name__} ({what})")
    usage = data.get("usage") or {}
    counts = [usage.get(k) or 0 for k in ("prompt_tokens", "completion_tokens")] if isinstance(usage, dict) else [None]
    if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
        raise EndpointError(f"{url}: usage is not a pair of token counts ({what})")
    return text, reason, int(counts[0] or 0), int(counts[1] or 0)


def _remaining(deadline: float, url: str, budget: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise EndpointError(f"{url}: no complete reply within the deadline of {budget:g} s")
    return left


REPLY_BYTES_PER_TOKEN = 256
"""Reply bytes a completion token may take, JSON escaping included (a long token of \\uXXXX-escaped
characters): with REPLY_BYTES_OVERHEAD, the most a reply of `max_tokens` tokens can need."""
REPLY_BYTES_OVERHEAD = 64 * 2**10
"""Reply bytes besides the completion's text (ids, usage, a reasoning field's framing, whitespace)."""


def reply_limit(endpoint: OpenAIEndpoint, max_tokens: int) -> tuple[int, str]:
    """(the most bytes a reply to `max_tokens` is read to, why that many). A server that ignores max_tokens
    by far is refused after that many bytes: never read, decoded, parsed and tokenized whole (a 15 MB reply
    to a 1,024-token turn cost 3 GB of memory, to keep 1,024 tokens of it)."""
    need = REPLY_BYTES_OVERHEAD + max(1, int(max_tokens)) * REPLY_BYTES_PER_TOKEN
    if need < endpoint.max_reply_bytes:
        return need, f", the most max_tokens {int(max_tokens)} allows ({REPLY_BYTES_PER_TOKEN} a token)"
    return endpoint.max_reply_bytes, ""


def _read_bounded(response: Any, endpoint: OpenAIEndpoint, deadline: float, max_tokens: int) -> bytes:
    """The body, read in chunks: at most reply_limit's bytes, and never past the deadline."""
    (limit, why), url = reply_limit(endpoint, max_tokens), endpoint.url
    declared = response.headers.get("Content-Length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise EndpointError(f"{url}: reply is larger than {limit} bytes{why} (Content-Length {declared})")
    sock = getattr(getattr(response.fp, "raw", None), "_sock", None)  # to shorten its timeout to the deadline
    chunks: list[bytes] = []
    size = 0
    while True:
        left = _remaining(deadline, url, endpoint.deadline_s)
        if isinstance(sock, socket.socket):
            sock.settimeout(min(endpoint.timeout_s, left))
        chunk = response.read1(65536)
        if not chunk:
            if declared is not None and declared.isdigit() and size < int(declared):
                raise EndpointError(f"{url}: the reply ended early ({size} of {declared} bytes)")
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise EndpointError(f"{url}: reply is larger than {limit} bytes{why}; read no further")
        chunks.append(chunk)


def _decode(url: str, body: bytes, what: str) -> Any:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EndpointError(f"{url}: the reply is not UTF-8 ({exc.reason} at byte {exc.start}; {what})") from None
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:  # RecursionError: nested deeper than Python parses
        raise EndpointError(f"{url}: the reply is not JSON ({type(exc).__name__}; {what})") from None


def chat_completion(
    endpoint: OpenAIEndpoint,
    messages: Sequence[Mapping[str, str]],
    *,
    temperature: float,
    max_tokens: int,
    top_p: float | None = None,
    seed: int | None = None,
    api_key: str | None = None,
) -> ChatTurn:
    """One chat completion (module docstring). `api_key`: the bearer token itself, for a caller that
    holds one and has checked where it goes ("" sends none); None reads the environment variable the
    endpoint names, and refuses a base URL that variable's PREFIX_BASE_URLS does not list."""
    body: dict[str, Any] = {"model": endpoint.model, "messages": [dict(m) for m in messages],
                            "temperature": temperature, "max_tokens": int(max_tokens)}
    if top_p is not None:
        body["top_p"] = top_p
    if seed is not None:
        body["seed"] = int(seed) % (2**31)  # servers take a 32-bit seed
    payload = json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    try:  # a key set on the worker goes to the base URLs listed beside it only (policy.endpoint_keys)
        key = sendable_key(endpoint.api_key_env, endpoint.base_url) if api_key is None else api_key
    except KeyDestinationError as exc:
        raise EndpointError(f"{endpoint.url}: not sent: {exc}") from None
    if key:
        headers["Authorization"] = f"Bearer {key}"
    start = time.perf_counter()
    deadline = time.monotonic() + endpoint.deadline_s
    body_bytes, reply_headers = b"", None
    for attempt in range(endpoint.retries + 1):
        request = urllib.request.Request(endpoint.url, data=payload, headers=headers, method="POST")
        try:
            timeout = min(endpoint.timeout_s, _remaining(deadline, endpoint.url, endpoint.deadline_s))
            with _OPENER.open(request, timeout=timeout) as response:
                body_bytes, reply_headers = _read_bounded(response, endpoint, deadline, max_tokens), response.headers
            break
        except urllib.error.HTTPError as exc:
            exc.close()  # its body is never read: an error names what it was, not what it said
            if 300 <= exc.code < 400:
                raise EndpointError(f"{endpoint.url}: HTTP {exc.code}: a redirect to "
                                    f"{redirect_origin(endpoint.url, exc.headers.get('Location'))}, not followed (the request "
                                    "and its key go to the configured URL only)") from None
            # 504: a proxy stopped waiting, the model behind it may still be generating (never re-sent)
            if (exc.code == 429 or (exc.code >= 500 and exc.code != 504)) and attempt < endpoint.retries:
                _backoff(attempt, deadline)
                continue
            raise EndpointError(f"{endpoint.url}: HTTP {exc.code} ({described(exc.headers)})") from None
        except http.client.IncompleteRead as exc:
            raise EndpointError(f"{endpoint.url}: the reply ended early ({len(exc.partial)} bytes, "
                                f"{exc.expected} more expected)") from None
        except urllib.error.URLError as exc:  # urllib wraps what fails while sending: the server has no request
            if time.monotonic() >= deadline:
                raise EndpointError(f"{endpoint.url}: no complete reply within the deadline of "
                                    f"{endpoint.deadline_s:g} s ({exc})") from None
            if attempt < endpoint.retries:
                _backoff(attempt, deadline)
                continue
            raise EndpointError(f"{endpoint.url}: {exc} (after {attempt + 1} attempts)") from exc
        except (TimeoutError, ConnectionError, http.client.HTTPException) as exc:
            # Sent, then no (whole) reply: the server may still be running it, so it is never sent again.
            if time.monotonic() >= deadline:
                raise EndpointError(f"{endpoint.url}: no complete reply within the deadline of "
                                    f"{endpoint.deadline_s:g} s ({exc}); not sent again") from None
            if isinstance(exc, TimeoutError):
                raise EndpointError(f"{endpoint.url}: request timed out: no reply within the request timeout "
                                    f"of {endpoint.timeout_s:g} s; not sent again (the server may still be "
                                    "generating it)") from None
            raise EndpointError(f"{endpoint.url}: the connection ended before a reply ({type(exc).__name__}: "
                                f"{exc}); not sent again: the server may still be running it") from None
    what = described(reply_headers, len(body_bytes))
    text, reason, prompt_tokens, completion_tokens = _parse(endpoint.url, _decode(endpoint.url, body_bytes, what), what)
    return ChatTurn(text=text, finish="length" if reason == "length" else "stop", prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens, seconds=round(time.perf_counter() - start, 3))


def _backoff(attempt: int, deadline: float) -> None:
    time.sleep(max(0.0, min(30.0, 0.5 * 2**attempt, deadline - time.monotonic())))

"""What an untrusted HTTP answer was, in words that quote none of it: for the endpoint clients' errors.

An error about an endpoint's answer is stored with the trial (or the run) and shown in the warehouse
and the Prefect UI, so it names what the answer was (its status, content type and size, a redirect's
origin) and never a byte of what it said: the server chooses those bytes (docs/security.md).

    described(response.headers, size=812)      # 'text/html, 812 bytes'
    redirect_origin(url, headers["Location"])  # 'https://elsewhere.example:8443' (no path, query, user info)
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Protocol

__all__ = ["Headers", "described", "redirect_origin"]

_MEDIA_TYPE = re.compile(r"[A-Za-z0-9!#$&^_.+-]{1,64}/[A-Za-z0-9!#$&^_.+-]{1,64}")
_HOST = re.compile(r"[A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]")


class Headers(Protocol):
    """What is read of an answer's headers: urllib's message, httpx's headers or a plain dict."""

    def get(self, name: str, /) -> object: ...


def described(headers: Headers | None, size: int | None = None) -> str:
    """'MEDIA/TYPE, N bytes': the Content-Type's media type when it is one (else said so) and `size`
    (the bytes read) or else the declared Content-Length."""
    raw = str(headers.get("Content-Type") or "").partition(";")[0].strip() if headers is not None else ""
    media = raw.lower() if _MEDIA_TYPE.fullmatch(raw) else ("no content type" if not raw else "an unnamed content type")
    declared = str(headers.get("Content-Length") or "").strip() if headers is not None else ""
    if size is None and declared.isdigit():
        size = int(declared)
    return f"{media}, {size} bytes" if size is not None else f"{media}, length not declared"


def redirect_origin(base: str, location: object) -> str:
    """scheme://host[:port] of a redirect's Location (resolved against `base`), or what it is when that is
    not an http(s) URL with a plain host name. Path, query and user info are left out: they may carry
    the target's tokens."""
    if not isinstance(location, str) or not location.strip():
        return "no location"
    try:
        parts = urllib.parse.urlsplit(urllib.parse.urljoin(base, location.strip()))
        port = parts.port
    except ValueError:
        return "an unreadable location"
    netloc = parts.netloc.rpartition("@")[2]
    host = netloc.rsplit(":", 1)[0] if port is not None else netloc
    if parts.scheme not in ("http", "https") or not _HOST.fullmatch(host):
        return "a location that is not an http(s) URL"
    return f"{parts.scheme}://{host.lower()}" + (f":{port}" if port is not None else "")

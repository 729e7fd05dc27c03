"""Which key an endpoint request carries, and where a key may go: the worker decides both.

Which variable: a run parameter (a recipe, a deployment's overrides, a CLI flag) names the variable
whose value is sent as the bearer token (`api_key_env`), so it may only name a key meant for an
endpoint: OPENAI_API_KEY or SKILLGATE_<NAME>_API_KEY, never HOME, a cloud credential or any other
secret of the worker (`check_api_key_env`).

Where: the same run parameters name the endpoint, so the worker lists, beside each key, the base
URLs that key is for: PREFIX_API_KEY -> PREFIX_BASE_URLS, comma-separated http(s) URLs
(OPENAI_API_KEY -> OPENAI_BASE_URLS, SKILLGATE_TEACHER_API_KEY -> SKILLGATE_TEACHER_BASE_URLS).
A URL's origin (scheme, host, port) is what is compared: a path of a listed origin is that server.
A key that is set goes to a listed origin only; a base URL outside the list (or a key without a
list) is refused where the config is built, naming the parameter (`check_key_destination`), and
again by the client before anything is sent (`sendable_key`): never a silent call without the key.
A key variable that is unset or empty sends no key, to any URL.

    check_key_destination("OPENAI_API_KEY", "https://api.openai.com/v1", "teacher_base_url")
    key = sendable_key("OPENAI_API_KEY", url)   # '' when unset; KeyDestinationError when not listed
"""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Mapping

__all__ = [
    "API_KEY_ENV_RULE",
    "KeyDestinationError",
    "base_urls_env",
    "check_api_key_env",
    "check_key_destination",
    "sendable_key",
]

_API_KEY_ENV = re.compile(r"OPENAI_API_KEY|SKILLGATE_[A-Z0-9]+(?:_[A-Z0-9]+)*_API_KEY")
API_KEY_ENV_RULE = "OPENAI_API_KEY or SKILLGATE_<NAME>_API_KEY (<NAME>: A-Z, 0-9, single underscores)"
_DEFAULT_PORTS = {"http": 80, "https": 443}


class KeyDestinationError(ValueError):
    """A key set on the worker would go to a base URL its list does not name (the message says which)."""


def check_api_key_env(name: object, field: str = "api_key_env") -> str:
    """`name` if it is on the allow-list of key variables, else ValueError naming `field`."""
    if not isinstance(name, str) or not _API_KEY_ENV.fullmatch(name):
        raise ValueError(f"{field}: {name!r} may not be sent to an endpoint; expected {API_KEY_ENV_RULE}, "
                         "set where the worker runs")
    return name


def base_urls_env(api_key_env: str) -> str:
    """The variable listing where the key in `api_key_env` may go: OPENAI_API_KEY -> OPENAI_BASE_URLS."""
    return check_api_key_env(api_key_env).removesuffix("_API_KEY") + "_BASE_URLS"


def _origin(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an http(s) URL, ports defaulted, case folded; None when it is not one."""
    try:
        parts = urllib.parse.urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port if port is not None else _DEFAULT_PORTS[scheme]


def _shown(origin: tuple[str, str, int]) -> str:
    scheme, host, port = origin
    return f"{scheme}://{host}" + ("" if _DEFAULT_PORTS[scheme] == port else f":{port}")


def _refusal(api_key_env: str, base_url: str, environ: Mapping[str, str]) -> str | None:
    """Why the key in `api_key_env` may not go to `base_url` (None: it may, or there is no key)."""
    if not environ.get(api_key_env, ""):
        return None
    listing = base_urls_env(api_key_env)
    target = _origin(base_url)
    if target is None:
        return f"{base_url!r} is not an http(s) URL"
    raw = environ.get(listing, "")
    allowed = []
    for entry in (e.strip() for e in raw.split(",")):
        if not entry:
            continue
        origin = _origin(entry)
        if origin is None:
            return f"{listing}: {entry!r} is not an http(s) URL (expected comma-separated base URLs)"
        allowed.append(origin)
    if not allowed:
        return (f"{api_key_env} is set on this worker but {listing} is not set, so its key goes nowhere; "
                f"list the base URLs it is for in {listing} where the worker runs")
    if target in allowed:
        return None
    return (f"{api_key_env} is set on this worker and may only go to the origins in {listing} "
            f"({', '.join(_shown(o) for o in allowed)}), not to {_shown(target)}; add it there where the "
            "worker runs, or name a key variable meant for it")


def check_key_destination(api_key_env: str, base_url: str, field: str,
                          environ: Mapping[str, str] | None = None) -> None:
    """KeyDestinationError naming `field` when the key `api_key_env` names is set here and `base_url` is
    not one of its listed origins (module docstring)."""
    why = _refusal(api_key_env, base_url, os.environ if environ is None else environ)
    if why is not None:
        raise KeyDestinationError(f"{field}: {why}")


def sendable_key(api_key_env: str, base_url: str) -> str:
    """The key to send to `base_url` ('' when `api_key_env` is unset or empty); KeyDestinationError when
    the key is set and `base_url` is not one of its listed origins."""
    check_key_destination(api_key_env, base_url, "base_url")
    return os.environ.get(api_key_env, "")

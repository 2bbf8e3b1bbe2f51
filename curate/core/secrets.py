"""Keep secrets out of what a run writes: the parameters in run.json, a marker's identity, a report.

Core writes those files, so the masking they need lives here, below every stage and backend:
``mask_secrets`` masks a parameter named like a key and a URL's credentials, query and fragment
(``http://user:key@host/v1?api_key=…#key=…``); ``safe_url`` does it for one URL, wherever one is
shown or written. ``curate.llm.redact`` builds its scrubbing of failure texts on these.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
SECRET_NAMES = frozenset({"api_key", "apikey", "key", "token", "access_token", "auth_token", "password",
                          "secret"})  # a parameter so named is never written
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S*\Z")  # one URL, not a text that mentions one


def safe_url(url: str) -> str:
    """The URL with its secrets masked, for showing to people: the netloc's credentials, every
    query value and the fragment's values (a key can hide under any parameter name)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # not a URL one can take apart (a bad port): show nothing that may be secret
        return MASK
    netloc = parts.netloc
    if parts.username or parts.password:
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{MASK}@{host}" + (f":{port}" if port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, _masked(parts.query), _masked(parts.fragment)))


def _masked(text: str) -> str:
    """A query or fragment with its names kept and its values masked."""
    if not text:
        return text
    if "=" not in text:
        return MASK
    return "&".join(f"{name}={MASK}" if sep else name
                    for name, sep, _ in (p.partition("=") for p in text.split("&")))


def mask_secrets(value: Any) -> Any:
    """``value`` (parameters about to be written to run.json or a report) with the secrets it may
    carry masked: a URL's credentials, query and fragment (``http://h/v1?api_key=…``, e.g. a
    judge's ``base_url`` in a recipe), and any value under a name such as ``api_key``."""
    if isinstance(value, Mapping):
        return {k: MASK if v and isinstance(k, str) and k.lower() in SECRET_NAMES else mask_secrets(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [mask_secrets(v) for v in value]
    if isinstance(value, str) and _URL.match(value):
        return safe_url(value)
    return value

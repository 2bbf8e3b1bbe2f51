"""Keep credentials out of everything curate writes or prints.

The API key and any secret in a server URL can come back inside a server's error text or an
exception message; every failure note passes through ``Scrubber`` before it reaches
``failed.jsonl``, a log or the console. A URL carries secrets in three places: a password in
its netloc (``http://user:key@host/v1``), its query (``?api_key=sk-…``, which some gateways
take) and its fragment (``#key=…``); ``safe_url`` (``curate.core.secrets``, with ``mask_secrets``
for the parameters core writes) masks all three wherever a URL is shown or written.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from curate.core.secrets import MASK

MIN_QUERY_SECRET = 8  # shorter query values (a version, "json") are not keys and would garble every note
# a token as sent in an Authorization header, which a careless server repeats in its error text; one
# with a digit, so that prose ("Bearer instruments") is left alone
_BEARER = re.compile(r"\bBearer\s+(?=[A-Za-z0-9._~+/=-]*\d)[A-Za-z0-9._~+/=-]{7,}[A-Za-z0-9_~+/=-]")


def url_secrets(url: str) -> list[str]:
    """The credentials a URL carries, as written and as sent: its netloc's user and password
    (and their HTTP basic auth form, which a server may echo back in its error text), and the
    values of its query and fragment."""
    parts = urlsplit(url)
    found = []
    if parts.username or parts.password:
        user, password = unquote(parts.username or ""), unquote(parts.password or "")
        basic = base64.b64encode(f"{user}:{password}".encode()).decode()
        found += [parts.password, password, parts.username, user, basic]
    for text in (parts.query, parts.fragment):
        for value in _values(text):
            if len(unquote(value)) >= MIN_QUERY_SECRET:
                found += [value, unquote(value), unquote(value.replace("+", " "))]
    return [s for s in found if s]


def _values(text: str) -> list[str]:
    """The values of a query or fragment (``a=1&b=2``), as written; a fragment without ``=`` is one value."""
    if not text:
        return []
    pairs = [p.partition("=") for p in text.replace(";", "&").split("&")]
    return [value if sep else name for name, sep, value in pairs]


@dataclass
class Scrubber:
    """Masks the configured key and the URLs' secrets in any text, and a token after ``Bearer``:
    an echoed header may carry a key curate was never told about (a gateway's own)."""

    secrets: list[str] = field(default_factory=list)

    @classmethod
    def for_config(cls, api_key: str | None, base_urls: list[str]) -> Scrubber:
        found = [api_key] if api_key else []
        for url in base_urls:
            found += url_secrets(url)
        # longest first, so a key that contains a shorter secret is masked whole
        return cls(sorted({s for s in found if len(s) >= 3}, key=len, reverse=True))

    def __call__(self, text):
        if not isinstance(text, str):
            return text
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        return _BEARER.sub(f"Bearer {MASK}", text)

"""Keep credentials out of everything curate writes or prints.

The API key and any password in a server URL (``http://user:key@host/v1``) can come back
inside a server's error text or an exception message; every failure note passes through
``Scrubber`` before it reaches ``failed.jsonl``, a log or the console.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit, urlunsplit

MASK = "***"


def url_secrets(url: str) -> list[str]:
    """The credentials a URL carries, as written and as sent (HTTP basic auth, which a server
    may echo back in its error text)."""
    parts = urlsplit(url)
    if not (parts.username or parts.password):
        return []
    user, password = unquote(parts.username or ""), unquote(parts.password or "")
    basic = base64.b64encode(f"{user}:{password}".encode()).decode()
    return [s for s in (parts.password, password, parts.username, user, basic) if s]


def safe_url(url: str) -> str:
    """The URL with its credentials masked, for showing to people."""
    parts = urlsplit(url)
    if not (parts.username or parts.password):
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, f"{MASK}@{host}", parts.path, parts.query, parts.fragment))


@dataclass
class Scrubber:
    secrets: list[str] = field(default_factory=list)

    @classmethod
    def for_config(cls, api_key: str | None, base_urls: list[str]) -> Scrubber:
        found = [api_key] if api_key else []
        for url in base_urls:
            found += url_secrets(url)
        # longest first, so a key that contains a shorter secret is masked whole
        return cls(sorted({s for s in found if len(s) >= 3}, key=len, reverse=True))

    def __call__(self, text):
        if not isinstance(text, str) or not self.secrets:
            return text
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        return text

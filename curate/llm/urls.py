"""Server URLs as users give them: the one reader of ``--base-url``, ``--teacher-base-url`` and
``curate serve --urls-file`` values, and the one way a request path is joined to a base URL.

A value is a URL (it has ``scheme://``) or a file of URLs, one a line (what ``curate serve
--replicas`` writes); a file may hold ``# comments`` and blank lines. A file that names no URL,
or is not text, is an error naming it: an empty file silently falling back to another backend
would run a different model than the one asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from curate.core.errors import CurateError


def read_urls(values: Sequence[str]) -> list[str]:
    """Base URLs as given; a value that is a file (``--urls-file`` of ``curate serve``) gives its lines."""
    out: list[str] = []
    for value in values:
        value = value.strip()
        if "://" in value:
            out.append(value)
        else:
            out += _urls_in_file(value)
    return out


def _urls_in_file(name: str) -> list[str]:
    """The URLs a file lists, one a line, ``#`` comments and blank lines skipped."""
    from curate.core.secrets import safe_url

    path = Path(name)
    if not path.is_file():
        what = "a folder" if path.is_dir() else "no such file"
        raise CurateError(f"{name}: {what}; give a server URL (http://HOST:PORT/v1) or a file of them, one a line")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise CurateError(f"{name}: not a text file of URLs (byte 0x{e.object[e.start]:02x} at offset {e.start}); "
                          f"give one URL a line") from None
    except OSError as e:
        raise CurateError(f"{name}: cannot read it ({e.strerror or e})") from None
    urls = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "://" not in line or "\x00" in line:
            raise CurateError(f"{name}:{number}: not a URL: {safe_url(_short(line))!r}; give one URL a line "
                              "(http://HOST:PORT/v1), # for a comment")
        urls.append(line)
    if not urls:
        raise CurateError(f"{name}: no URL in it (a file of server URLs, one a line); start the servers "
                          "(curate serve --replicas N --urls-file FILE) or give --base-url URL")
    return urls


def split_query(url: str) -> tuple[str, dict[str, str]]:
    """(the URL without query and fragment, its query's parameters). A client joins request
    paths to the first and sends the second with every request, so ``http://h/v1?key=K``
    asks ``http://h/v1/chat/completions?key=K`` (the fragment is never sent)."""
    parts = urlsplit(url)
    base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    return base, dict(parse_qsl(parts.query, keep_blank_values=True))


def url_join(url: str, path: str) -> str:
    """``path`` (``models``, ``chat/completions``) under the base URL, its query kept after the path."""
    parts = urlsplit(url)
    joined = parts.path.rstrip("/") + "/" + path.lstrip("/")
    return urlunsplit((parts.scheme, parts.netloc, joined, parts.query, ""))


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"

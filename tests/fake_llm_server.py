"""A scripted, local, OpenAI-compatible chat server for fault-injection tests.

Stdlib only (``http.server.ThreadingHTTPServer``), bound to 127.0.0.1 on a free port and
served from a background thread::

    with fake_llm_server() as srv:
        run_cli(["--base-url", srv.base_url, ...])   # srv.base_url == "http://127.0.0.1:PORT/v1"
        assert srv.count_for("FAULTS[500]") == 3

Endpoints: ``GET /v1/models``, ``GET /health``, ``POST /v1/chat/completions``,
``POST /v1/embeddings`` (the ``/v1`` prefix is optional).

Embeddings: the marker goes in one of the input texts (its key: the marker and the rest of
that text's line). ``ok`` answers one vector of ``embed_dim`` numbers per text, the same for
the same text in any request; the transport actions (``429``, status codes, ``timeout``,
``drop``, ``emptybody``, ``html``, ``trickle``, ``echokey``) work as for chat; ``wrongdim``
answers vectors one number longer, ``short`` one vector fewer than the texts. Vectors no
teacher should cache, every vector of the reply alike: ``zeros`` all 0.0, ``bools`` true/false
instead of numbers, ``strings`` the numbers as JSON strings, ``nan`` and ``inf`` one NaN / one
Infinity each (non-standard JSON, as Python writes it), ``huge`` 1e300 everywhere, ``hugeN``
1eN everywhere (``huge30``: each number fits a float32, the vector's length does not).

Behaviour is picked per request from the prompt text, never from arrival order across
different prompts, so concurrency does not change what a given item sees.  A user message
may carry a marker ``FAULTS[a,b,c]``; the server keeps one counter per *marker key* (the
marker plus the rest of the line it sits on, i.e. the marker and the task text) and answers
the Nth request with that key with action N; the last action repeats once the list runs
out.  Without a marker the action is ``ok``.  The last user message is searched first, then
the earlier ones, so re-ask turns appended after the original prompt keep their marker.

Actions:

``ok``         200, content is a JSON object satisfying ``response_format.json_schema.schema``
``429``        429 with ``Retry-After: 1``; ``429sN`` sends ``Retry-After: N`` (``429s0`` -> 0)
``500``/``503`` that status with an OpenAI-style error JSON body (any 3-digit status works,
               e.g. ``400`` or ``404``)
``timeout``    sleeps ``timeout_sleep`` seconds (30 by default, cut short when the server
               stops), then answers like ``ok``; ``timeoutN`` sleeps N seconds
``slowN``      a slow ``ok``: sleeps N seconds (0.5 without N), then answers like ``ok``
``drop``       closes the connection without sending anything
``malformed``  200, content is prose that is not JSON
``truncated``  200, content is a valid answer's JSON cut in half, finish_reason "stop"
``length``     200, content cut in half, finish_reason "length"
``badschema``  200, valid JSON missing required keys
``empty``      200, content is the empty string
``blank``      200, a valid answer whose strings are all a single space
``emptybody``  200 with a JSON content type and a body of zero bytes
``html``       200 with an HTML error page as the body (a proxy's answer)
``trickle``    200 headers announcing a full body, then one byte a second until the server stops
``echokey``    400 whose error message repeats the request's ``Authorization`` header

Enum answers: an ``ok`` answer takes the first value of an ``enum``. A user message may also
carry ``VERDICT[a,b,c]``: the answer's top-level ``verdict`` field is then set to ``a`` for the
first request with that marker key (marker plus the rest of its line), ``b`` for the second,
and so on, the last value repeating; counted separately from ``FAULTS``, and only for
requests that are answered with content.

Per-request answers from code: ``FakeLLMServer(responder=fn)`` calls ``fn(body)`` (the parsed
request) for every request answered with content; a dict it returns is the answer (the actions
above still apply to it: ``malformed`` still sends prose), ``None`` keeps the built one. A bench
can so answer a judge from its own labels, e.g. a relabel verdict looked up in qrels from the
texts in the prompt.

A server with a capacity: ``FakeLLMServer(capacity=N)`` (``--capacity N`` on the command line)
works on at most N chat and embeddings requests at once, from arrival to the answer (a ``slowN``
sleep included); the others wait for a place, in arrival order, so latency grows with the requests
in flight beyond N, as at a vLLM server whose batch is full. Unset (the default), every request
is worked on at once.

Whole-server faults, whatever the markers say (chat and embeddings): ``silent=True`` reads
every request and never answers it (the connection stays open until the server stops), a
server that is up but answers nothing; ``api_key="K"`` refuses every request whose
``Authorization`` is not ``Bearer K`` with a 401 whose error message repeats the header it got,
as a careless gateway would.

Every request is recorded (:class:`Req`: time, path, headers, parsed body, marker key,
action, sequence number within the key) in ``server.requests``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import random
import re
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

MARKER_RE = re.compile(r"FAULTS\[([^\]]*)\]")
VERDICT_RE = re.compile(r"VERDICT\[([^\]]*)\]")
ACTION_RE = re.compile(
    r"^(ok|429(s\d+(\.\d+)?)?|\d{3}|timeout(\d+(\.\d+)?)?|slow(\d+(\.\d+)?)?|drop|malformed|truncated|length|badschema|empty|blank|emptybody|html|trickle|echokey|wrongdim|short|zeros|bools|strings|nan|inf|huge(\d+)?)$"
)

MALFORMED_TEXT = "Sure! here is your data: {oops"

_WORDS = (
    "river stone lattice amber harbor quiet orbit meadow signal copper lantern velvet "
    "granite willow beacon cipher falcon glacier hollow ivory juniper kernel lumen marble "
    "nectar opal prism quartz raven saffron timber umber vector walnut yonder zephyr "
    "anchor bramble cobalt delta ember fjord garnet hazel indigo jasper kelp lichen "
    "mosaic nimbus ochre pepper quill russet sienna thistle ultra verdant wicker xenon "
    "yarrow zinnia atlas basalt cedar dune estuary fern grove heath inlet jetty knoll "
    "ledge mesa notch oasis plateau quarry ridge savanna tundra upland valley wetland "
    "archive ballad census charter dialect edict folio glossary hymnal index journal "
    "ledger manual notice omnibus pamphlet quarto register satire treatise volume"
).split()

_TASK_QUERIES = (
    "short health question", "product complaint", "name of a historical event",
    "legal term", "programming error message", "recipe ingredient", "travel destination",
    "math concept", "sports rule", "chemical compound", "tax question", "gardening problem",
    "car symptom", "music genre", "species name", "court case name", "software library name",
)
_TASK_DOCS = (
    "encyclopedia passages", "help-desk articles", "forum answers", "textbook sections",
    "news reports", "manual pages", "government guidance pages", "blog posts",
    "scientific abstracts", "product reviews", "lecture notes", "FAQ entries",
)


def parse_actions(marker_body: str) -> list[str]:
    actions = [a.strip().lower() for a in marker_body.split(",") if a.strip()]
    for a in actions:
        if not ACTION_RE.match(a):
            raise ValueError(f"unknown fault action {a!r} in FAULTS[{marker_body}]")
    return actions or ["ok"]


def _text_of(content: Any) -> str:
    """A message's content as text (plain string or a list of content parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, dict) and isinstance(p.get("text"), str):
                parts.append(p["text"])
            elif isinstance(p, str):
                parts.append(p)
        return "\n".join(parts)
    return ""


def find_marker(messages: Any, pattern: re.Pattern = MARKER_RE) -> tuple[str | None, list[str]]:
    """(marker key, actions) from the newest user message carrying a marker, else (None, ["ok"])."""
    if not isinstance(messages, list):
        return None, ["ok"]
    for msg in reversed(messages):
        if not isinstance(msg, dict) or msg.get("role") != "user":
            continue
        text = _text_of(msg.get("content"))
        m = pattern.search(text)
        if m:
            line_end = text.find("\n", m.end())
            rest = text[m.end(): line_end if line_end >= 0 else len(text)].strip()
            key = f"{m.group(0)} {rest}".strip()
            if pattern is not MARKER_RE:
                return key, [v.strip() for v in m.group(1).split(",") if v.strip()]
            return key, parse_actions(m.group(1))
    return None, ["ok"]


# --------------------------------------------------------------------------- schema walking


def _resolve(schema: Any, root: dict) -> Any:
    seen = 0
    while isinstance(schema, dict) and "$ref" in schema and seen < 20:
        ref = schema["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return {}
        node: Any = root
        for part in ref[2:].split("/"):
            node = node.get(part, {}) if isinstance(node, dict) else {}
        schema = node
        seen += 1
    return schema


def _words(rng: random.Random, target: int, min_len: int, max_len: int | None) -> str:
    out: list[str] = []
    length = 0
    while length < target:
        w = rng.choice(_WORDS)
        out.append(w)
        length += len(w) + 1
    s = " ".join(out)
    s = s[0].upper() + s[1:] if s else s
    if max_len is not None and len(s) > max_len:
        s = s[:max_len].rstrip()
    while len(s) < min_len:
        s += "x"
    return s


def _task_sentences(rng: random.Random, n: int, min_len: int, max_len: int | None) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        w = [rng.choice(_WORDS) for _ in range(6)]
        s = (
            f"Given a {rng.choice(_TASK_QUERIES)} about {w[0]} {w[1]} {w[2]}, find "
            f"{rng.choice(_TASK_DOCS)} from {w[3]} {w[4]} {w[5]} sources that answer it."
        )
        if max_len is not None and len(s) > max_len:
            s = s[:max_len].rstrip()
        while len(s) < min_len:
            s += "."
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


def build_instance(
    schema: Any,
    rng: random.Random,
    root: dict | None = None,
    *,
    name: str = "",
    in_array: bool = False,
    index: int = 0,
) -> Any:
    """A value that satisfies ``schema`` (the subset curate's specs use, plus a little more).

    Integers take the maximum at the top level and fall by one per array index inside arrays,
    booleans are true at the top level and false inside arrays, so a generated example has a
    top-scoring, answerable positive and lower-scoring, unanswerable negatives.
    """
    root = root if root is not None else (schema if isinstance(schema, dict) else {})
    schema = _resolve(schema, root)
    if not isinstance(schema, dict) or not schema:
        return _words(rng, 40, 1, None)
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for comb in ("anyOf", "oneOf"):
        if isinstance(schema.get(comb), list) and schema[comb]:
            options = [s for s in schema[comb] if _resolve(s, root).get("type") != "null"] or schema[comb]
            return build_instance(options[0], rng, root, name=name, in_array=in_array, index=index)
    if isinstance(schema.get("allOf"), list) and schema["allOf"]:
        merged: dict = {}
        for s in schema["allOf"]:
            s = _resolve(s, root)
            if isinstance(s, dict):
                for k, v in s.items():
                    if k in ("properties",) and isinstance(v, dict):
                        merged.setdefault("properties", {}).update(v)
                    elif k == "required" and isinstance(v, list):
                        merged.setdefault("required", []).extend(v)
                    else:
                        merged[k] = v
        rest = {k: v for k, v in schema.items() if k != "allOf"}
        merged.update(rest)
        return build_instance(merged, rng, root, name=name, in_array=in_array, index=index)

    typ = schema.get("type")
    if isinstance(typ, list):
        typ = next((t for t in typ if t != "null"), typ[0] if typ else None)
    if typ is None:
        if "properties" in schema:
            typ = "object"
        elif "items" in schema:
            typ = "array"
        else:
            typ = "string"

    if typ == "object":
        props = schema.get("properties") or {}
        required = schema.get("required")
        keys = list(required) if isinstance(required, list) else list(props)
        return {
            k: build_instance(props.get(k, {}), rng, root, name=k, in_array=in_array, index=index)
            for k in keys
        }
    if typ == "array":
        lo = int(schema.get("minItems", 0) or 0)
        hi = schema.get("maxItems")
        items = schema.get("items", {})
        if name == "tasks":
            n = int(hi) if hi is not None else max(lo, 5)
            n = max(n, lo, 1)
            item_schema = _resolve(items, root) if isinstance(items, dict) else {}
            return _task_sentences(
                rng, n, int(item_schema.get("minLength", 0) or 0), item_schema.get("maxLength")
            )
        n = max(lo, 1)
        if hi is not None:
            n = min(n, int(hi))
        return [build_instance(items, rng, root, name=name, in_array=True, index=i) for i in range(n)]
    if typ == "string":
        lo = int(schema.get("minLength", 0) or 0)
        hi = schema.get("maxLength")
        hi = int(hi) if hi is not None else None
        target = 30 if (hi is not None and hi <= 400) else 240
        target = max(target, lo)
        if hi is not None:
            target = min(target, hi)
        return _words(rng, target, lo, hi)
    if typ in ("integer", "number"):
        lo = schema.get("minimum")
        hi = schema.get("maximum")
        if lo is None and "exclusiveMinimum" in schema:
            lo = schema["exclusiveMinimum"] + 1
        if hi is None and "exclusiveMaximum" in schema:
            hi = schema["exclusiveMaximum"] - 1
        if hi is not None:
            v = hi - (1 + index if in_array else 0)
        elif lo is not None:
            v = lo + (index if in_array else 5)
        else:
            v = 5 - index if in_array else 7
        if lo is not None:
            v = max(v, lo)
        if hi is not None:
            v = min(v, hi)
        return int(v) if typ == "integer" else float(v)
    if typ == "boolean":
        return not in_array
    if typ == "null":
        return None
    return _words(rng, 40, 1, None)


def _blanked(obj: Any) -> Any:
    if isinstance(obj, str):
        return " "
    if isinstance(obj, dict):
        return {k: _blanked(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_blanked(v) for v in obj]
    return obj


def drop_required(obj: Any, schema: Any) -> Any:
    """``obj`` with the schema's required keys removed (all but the first one, at least one)."""
    if not isinstance(obj, dict):
        return {"unexpected": "shape"}
    schema = schema if isinstance(schema, dict) else {}
    required = [k for k in (schema.get("required") or []) if k in obj]
    if not required:
        return {"unexpected": "shape"}
    to_drop = required[1:] if len(required) > 1 else required
    return {k: v for k, v in obj.items() if k not in to_drop}


def request_schema(body: dict) -> dict:
    rf = body.get("response_format")
    if isinstance(rf, dict):
        js = rf.get("json_schema")
        if isinstance(js, dict) and isinstance(js.get("schema"), dict):
            return js["schema"]
    return {}


# --------------------------------------------------------------------------- server


@dataclass
class Req:
    seq: int  # global arrival number, from 0
    t: float  # time.monotonic() at arrival
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    key: str | None = None  # marker key (None: no marker)
    n: int = 0  # 1-based number of this request within its key
    action: str = "ok"
    status: int | None = None  # status sent (None: dropped / nothing sent)
    content: str | None = None  # message content sent, if any
    finish_reason: str | None = None
    t_done: float | None = None  # time.monotonic() just before the answer (or the drop) went out
    answered: str | None = None  # what was sent in the end: 'timeout'/'slow' that answered give 'ok'

    @property
    def last_user(self) -> str:
        msgs = self.body.get("messages") if isinstance(self.body, dict) else None
        for m in reversed(msgs or []):
            if isinstance(m, dict) and m.get("role") == "user":
                return _text_of(m.get("content"))
        return ""


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024  # hundreds of clients connect at once in the throughput bench
    fake: "FakeLLMServer"

    def handle_error(self, request, client_address):  # noqa: D401 - quiet on client aborts
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeLLM/1.0"
    timeout = 120  # idle keep-alive connections end eventually

    def log_message(self, format, *args):  # noqa: A002 - silence default stderr logging
        pass

    @property
    def fake(self) -> "FakeLLMServer":
        return self.server.fake  # type: ignore[attr-defined]

    # -- plumbing
    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0] or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _mark_done(self) -> None:
        req = getattr(self, "_req", None)
        if req is not None and req.t_done is None:
            req.t_done = time.monotonic()

    def _send_json(self, status: int, obj: Any, extra_headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj).encode("utf-8")
        self._mark_done()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (extra_headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _drop(self) -> None:
        self._mark_done()
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.connection.close()

    # -- verbs
    def do_GET(self) -> None:  # noqa: N802
        self._req = None
        path = self.path.split("?", 1)[0].rstrip("/")
        req = self.fake._record("GET", path, dict(self.headers), None)
        if path in ("/health", "/v1/health"):
            req.status = 200
            self._send_json(200, {"status": "ok"})
        elif path in ("/v1/models", "/models"):
            req.status = 200
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": m, "object": "model", "created": 0, "owned_by": self.fake.owned_by}
                        for m in self.fake.models
                    ],
                },
            )
        else:
            req.status = 404
            self._send_json(404, _error(404, f"no route {path}"))

    def do_POST(self) -> None:  # noqa: N802
        self._req = None
        path = self.path.split("?", 1)[0].rstrip("/")
        raw = self._read_body()
        try:
            body = json.loads(raw.decode("utf-8")) if raw else {}
        except (UnicodeDecodeError, json.JSONDecodeError):
            body = None
        if path in ("/v1/embeddings", "/embeddings") and isinstance(body, dict):
            texts = body.get("input")
            texts = [texts] if isinstance(texts, str) else texts if isinstance(texts, list) else []
            key, actions = find_marker([{"role": "user", "content": t} for t in reversed(texts) if isinstance(t, str)])
            req = self.fake._record("POST", path, dict(self.headers), body, key=key, actions=actions)
            self._req = req
            with self.fake._working():
                self._embeddings(req, body, [t for t in texts if isinstance(t, str)])
            return
        if path not in ("/v1/chat/completions", "/chat/completions"):
            req = self.fake._record("POST", path, dict(self.headers), body)
            req.status = 404
            self._send_json(404, _error(404, f"no route {path}"))
            return
        if not isinstance(body, dict):
            req = self.fake._record("POST", path, dict(self.headers), body)
            req.status = 400
            self._send_json(400, _error(400, "body is not a JSON object"))
            return
        try:
            key, actions = find_marker(body.get("messages"))
        except ValueError as e:
            req = self.fake._record("POST", path, dict(self.headers), body)
            req.status = 400
            self._send_json(400, _error(400, str(e)))
            return
        req = self.fake._record("POST", path, dict(self.headers), body, key=key, actions=actions)
        self._req = req
        with self.fake._working():
            self._chat(req, body)

    def _embeddings(self, req: Req, body: dict, texts: list[str]) -> None:
        action = self._transport(req)
        if action is None:
            return
        dim = self.fake.embed_dim + (action == "wrongdim")
        vectors = [_bad_vector(action, _vector(t, dim)) for t in texts]
        if action == "short":
            vectors = vectors[:-1]
        req.status = 200
        req.answered = action
        self._send_json(200, {"object": "list", "model": body.get("model") or "fake",
                              "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
                              "usage": {"prompt_tokens": sum(len(t.split()) for t in texts),
                                        "total_tokens": sum(len(t.split()) for t in texts)}})

    def _transport(self, req: Req) -> str | None:
        """Answer the transport faults (a status, a dropped connection, a body that is not JSON,
        a wait); returns the action still to answer with content, or None when it was answered."""
        action = req.action
        fake = self.fake
        if fake.silent:  # never answers: holds the request until the server stops
            req.answered = "silent"
            fake._stop.wait()
            self._drop()
            return None
        if fake.api_key is not None and self.headers.get("Authorization") != f"Bearer {fake.api_key}":
            req.status = 401
            req.answered = "refused"
            self._send_json(401, _error(401, f"invalid API key in {self.headers.get('Authorization')}"))
            return None
        if action == "drop":
            self._drop()
            return None
        if action.startswith("429"):
            retry_after = action[4:] if action.startswith("429s") else "1"
            req.status = 429
            self._send_json(429, _error(429, "rate limited"), {"Retry-After": retry_after})
            return None
        if re.fullmatch(r"\d{3}", action):
            status = int(action)
            req.status = status
            self._send_json(status, _error(status, f"scripted status {status}"))
            return None
        if action in ("emptybody", "html", "trickle"):
            self._raw_reply(req, action)
            return None
        if action == "echokey":
            req.status = 400
            self._send_json(400, _error(400, f"bad credentials: {self.headers.get('Authorization')}"))
            return None
        if action.startswith("timeout"):
            secs = float(action[7:]) if len(action) > 7 else fake.timeout_sleep
            if fake._stop.wait(secs):  # server stopping: give up quietly
                self._drop()
                return None
            action = "ok"
        if action.startswith("slow"):
            if fake._stop.wait(float(action[4:]) if len(action) > 4 else 0.5):
                self._drop()
                return None
            action = "ok"
        return action

    def _chat(self, req: Req, body: dict) -> None:
        fake = self.fake
        action = self._transport(req)
        if action is None:
            return
        schema = request_schema(body)
        rng = random.Random(_seed_for(req))
        answer = build_instance(schema, rng) if schema else {"text": _words(rng, 60, 1, None)}
        vkey, verdicts = find_marker(body.get("messages"), VERDICT_RE)
        if vkey is not None and verdicts and isinstance(answer, dict) and "verdict" in answer:
            answer["verdict"] = fake._next_verdict(vkey, verdicts)
        if fake.responder is not None:
            scripted = fake.responder(body)
            if scripted is not None:
                answer = scripted
        full = json.dumps(answer, ensure_ascii=False)
        finish = "stop"
        if action == "ok":
            content = full
        elif action == "malformed":
            content = MALFORMED_TEXT
        elif action == "truncated":
            content = full[: len(full) // 2]
        elif action == "length":
            content = full[: len(full) // 2]
            finish = "length"
        elif action == "badschema":
            content = json.dumps(drop_required(answer, schema), ensure_ascii=False)
        elif action == "empty":
            content = ""
        elif action == "blank":
            content = json.dumps(_blanked(answer), ensure_ascii=False)
        else:  # pragma: no cover - ACTION_RE guards this
            content = full
        req.status = 200
        req.answered = action
        req.content = content
        req.finish_reason = finish
        prompt_tokens = sum(
            len(_text_of(m.get("content")).split()) for m in body.get("messages") or [] if isinstance(m, dict)
        )
        completion_tokens = max(1, len(content) // 4)
        model = body.get("model") or "fake"
        if body.get("stream"):
            self._stream(req, model, content, finish, prompt_tokens, completion_tokens)
            return
        self._send_json(
            200,
            {
                "id": f"chatcmpl-fake-{req.seq}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "system_fingerprint": "fake-llm",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": finish,
                        "logprobs": None,
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            },
        )

    def _raw_reply(self, req: Req, action: str) -> None:
        """Replies that are not OpenAI-shaped: an empty body, an HTML page, a body that trickles."""
        body = {"emptybody": b"", "html": b"<html><body><h1>502 Bad Gateway</h1></body></html>",
                "trickle": b'{"id": "x", "choices": []}' + b" " * 4096}[action]
        req.status = 200
        req.answered = action
        self._mark_done()
        self.send_response(200)
        self.send_header("Content-Type", "text/html" if action == "html" else "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if action != "trickle":
            self.wfile.write(body)
            self.wfile.flush()
            return
        for i in range(len(body)):
            if self.fake._stop.wait(1.0):
                self._drop()
                return
            try:
                self.wfile.write(body[i:i + 1])
                self.wfile.flush()
            except OSError:
                return

    def _stream(self, req: Req, model: str, content: str, finish: str, pt: int, ct: int) -> None:
        base = {"id": f"chatcmpl-fake-{req.seq}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": model}
        events = [
            {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": content},
                                  "finish_reason": None}]},
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
            {**base, "choices": [], "usage": {"prompt_tokens": pt, "completion_tokens": ct,
                                              "total_tokens": pt + ct}},
        ]
        data = b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"
        self._mark_done()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


def _vector(text: str, dim: int) -> list[float]:
    """A fixed vector for a text: the same in every request, different for different texts."""
    rng = random.Random(hashlib.sha256(text.encode("utf-8")).digest())
    return [round(rng.gauss(0.0, 1.0), 6) for _ in range(dim)]


def _bad_vector(action: str, vec: list[float]) -> list:
    """``vec`` spoiled as an embeddings action asks (``zeros``, ``bools``, ...); as is otherwise."""
    if action == "zeros":
        return [0.0] * len(vec)
    if action == "bools":
        return [x > 0 for x in vec]
    if action == "strings":
        return [str(x) for x in vec]
    if action in ("nan", "inf"):
        return [float(action)] + vec[1:]
    if action.startswith("huge"):
        return [float(f"1e{action[4:] or 300}")] * len(vec)
    return vec


def _error(status: int, message: str) -> dict:
    kind = {429: "rate_limit_error", 400: "invalid_request_error", 401: "authentication_error",
            404: "not_found_error"}.get(
        status, "server_error"
    )
    return {"error": {"message": message, "type": kind, "param": None, "code": str(status)}}


def _seed_for(req: Req) -> int:
    blob = f"{req.key}|{req.n}|{req.seq}|{req.last_user}".encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big")


class FakeLLMServer:
    """The fake server; use as a context manager or call :meth:`start` / :meth:`stop`."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, timeout_sleep: float = 30.0,
                 models: tuple[str, ...] = ("fake",), healthy: bool = False,
                 responder: Callable[[dict], dict | None] | None = None, embed_dim: int = 8,
                 owned_by: str = "fake", capacity: int | None = None, silent: bool = False,
                 api_key: str | None = None) -> None:
        self.host = host
        self.silent = silent  # True: no request is ever answered (see the module's docstring)
        self.api_key = api_key  # set: a request without "Bearer <api_key>" gets a 401 echoing its header
        # requests worked on at once (None: all); the rest wait for a place (see the module's docstring)
        self.capacity = capacity
        self._places = threading.Semaphore(capacity) if capacity else None
        self.embed_dim = embed_dim  # length of the vectors /v1/embeddings answers
        self.owned_by = owned_by  # what /v1/models says owns each model ("vllm": as vLLM says)
        self.healthy = healthy  # True: every chat request is answered 'ok', markers or not
        self.responder = responder  # answers from code, per request (see the module's docstring)
        self.port = port
        self.timeout_sleep = timeout_sleep
        self.models = list(models)
        self.requests: list[Req] = []
        self.counts: Counter[str] = Counter()  # marker key -> requests seen
        self.verdict_counts: Counter[str] = Counter()  # VERDICT marker key -> answers given
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle
    def start(self) -> "FakeLLMServer":
        self._stop.clear()
        self._httpd = _HTTPServer((self.host, self.port), _Handler)
        self._httpd.fake = self
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
            name=f"fake-llm-{self.port}", daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()  # wakes sleeping 'timeout' handlers
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "FakeLLMServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    # -- recording
    def _record(self, method: str, path: str, headers: dict[str, str], body: Any, *,
                key: str | None = None, actions: list[str] | None = None) -> Req:
        with self._lock:
            req = Req(seq=len(self.requests), t=time.monotonic(), method=method, path=path,
                      headers={k.lower(): v for k, v in headers.items()}, body=body, key=key)
            if actions is not None:
                if key is not None:
                    self.counts[key] += 1
                    req.n = self.counts[key]
                    req.action = "ok" if self.healthy else actions[min(req.n, len(actions)) - 1]
                else:
                    req.n = 1
                    req.action = "ok"
            else:
                req.action = "-"
            self.requests.append(req)
            return req

    def _working(self) -> contextlib.AbstractContextManager:
        """Hold one of the ``capacity`` places while a request is worked on (waiting for one first)."""
        return self._places if self._places is not None else contextlib.nullcontext()

    def _next_verdict(self, key: str, values: list[str]) -> str:
        with self._lock:
            self.verdict_counts[key] += 1
            return values[min(self.verdict_counts[key], len(values)) - 1]

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.counts.clear()
            self.verdict_counts.clear()

    # -- queries for assertions
    @property
    def chat_requests(self) -> list[Req]:
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def requests_for(self, needle: str) -> list[Req]:
        """Chat requests whose marker key contains ``needle`` (e.g. a task's unique tag)."""
        return [r for r in self.chat_requests if r.key is not None and needle in r.key]

    def count_for(self, needle: str) -> int:
        with self._lock:
            return sum(c for k, c in self.counts.items() if needle in k)

    def actions_for(self, needle: str) -> list[str]:
        return [r.action for r in self.requests_for(needle)]

    def times_for(self, needle: str) -> list[float]:
        return [r.t for r in self.requests_for(needle)]

    def max_inflight(self, client_timeout: float | None = None) -> int:
        """Most chat requests the server was working on at once.

        A request counts from arrival until just before its answer went out, so this never
        exceeds the client's own in-flight count. A ``timeout`` request counts until
        ``0.9 * client_timeout`` after arrival (the client has given up by then).
        """
        events = []
        for r in self.chat_requests:
            end = r.t_done if r.t_done is not None else float("inf")
            if r.action.startswith("timeout") and client_timeout is not None:
                end = min(end, r.t + 0.9 * client_timeout)
            events += [(r.t, 1), (end, -1)]
        peak = cur = 0
        for _, d in sorted(events, key=lambda e: (e[0], e[1])):
            cur += d
            peak = max(peak, cur)
        return peak


@contextlib.contextmanager
def fake_llm_server(**kwargs: Any) -> Iterator[FakeLLMServer]:
    """``with fake_llm_server() as srv: ... srv.base_url ...``"""
    srv = FakeLLMServer(**kwargs)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def serve_forever(srv: FakeLLMServer) -> None:  # pragma: no cover - manual use
    """Keep a started server answering until Ctrl-C (or the process is killed)."""
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.stop()


def main() -> None:  # pragma: no cover - manual use
    ap = argparse.ArgumentParser(description="Run the fake OpenAI-compatible server.")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--timeout-sleep", type=float, default=30.0)
    ap.add_argument("--capacity", type=int, default=None, help="Requests worked on at once; the rest wait.")
    args = ap.parse_args()
    srv = FakeLLMServer(host=args.host, port=args.port, timeout_sleep=args.timeout_sleep,
                        capacity=args.capacity).start()
    print(f"fake LLM server on {srv.base_url}", flush=True)
    serve_forever(srv)


if __name__ == "__main__":  # pragma: no cover
    main()

"""A scripted OpenAI files + batches API in front of the scripted chat server, for batch tests.

    with fake_llm_server() as chat, fake_batch_server(chat) as srv:
        run(["--base-url", srv.base_url, "--batch", "api", ...])
        assert srv.created == 1

Endpoints: ``POST /v1/files`` (multipart upload), ``GET /v1/files/ID/content``, ``POST /v1/batches``,
``GET /v1/batches`` (newest first), ``GET /v1/batches/ID``; anything else is passed to the chat server (``/v1/models``, chat).

Each retrieve moves a batch one state on: ``validating`` -> ``in_progress`` -> ``completed``. On
completing, every line is answered by sending its body to the chat server, so that server's
``FAULTS`` markers script a line's fate: a non-200 answer is a failed line (the error file).
``hold=K``: a batch stays ``in_progress`` for K more retrieves (settable while it runs). ``expire={N}``: the Nth batch created ends ``expired`` with only its first half of lines
answered, the rest in the error file as ``batch_expired``, as OpenAI's expired batches do.

Fault knobs, each settable while the server runs:

``dead``          every batch created from now on ends without a single answer: ``"expired"`` (every
                  line in the error file as ``batch_expired``), ``"failed"`` (status failed, no files),
                  ``"cancelled"``, or ``"allfailed"`` (completed, every line failed with a 500)
``garble={N: L}`` line L of the Nth batch's output file is not JSON (a cut line)
``duplicate``     the Nth batches (a set) whose output answers its first line twice, the second
                  answer different (its strings prefixed with ``SECOND``)
``refuse_key``    every request is answered 401, the error text echoing the ``Authorization`` header
``lost``          a retrieve answers 404 (the server does not know the batch)

``stop()`` closes the port as a crashed server would (the batches are kept); ``start()`` opens
the same port again.
"""

from __future__ import annotations

import contextlib
import json
import threading
from email.parser import BytesParser
from email.policy import default as email_policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import httpx

STATES = ("validating", "in_progress", "completed")


class FakeBatchServer:
    def __init__(self, chat_base_url: str, expire: set[int] = frozenset(), hold: int = 0, dead: str | None = None,
                 garble: dict[int, int] | None = None, duplicate: set[int] = frozenset(), refuse_key: bool = False,
                 lost: bool = False):
        self.chat = chat_base_url.rstrip("/")
        self.expire = set(expire)
        self.hold = hold  # retrieves a batch stays in_progress before it finishes
        self.dead = dead
        self.garble = dict(garble or {})
        self.duplicate = set(duplicate)
        self.refuse_key = refuse_key
        self.lost = lost
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.created = 0  # batches created
        self.retrieves = 0
        self.lock = threading.Lock()
        self.port = 0
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        """Listen (again: on the same port once it had one), answering from a background thread."""
        self._httpd = ThreadingHTTPServer(("127.0.0.1", self.port), _handler(self))
        self.port = self._httpd.server_address[1]
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        """Close the port: a client's next request is refused, as by a server that went away."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def add_file(self, data: bytes) -> str:
        with self.lock:
            fid = f"file-{len(self.files) + 1}"
            self.files[fid] = data
        return fid

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.created += 1
            bid = f"batch_{self.created}"
            lines = [json.loads(x) for x in self.files[body["input_file_id"]].decode().splitlines() if x.strip()]
            self.batches[bid] = {"id": bid, "object": "batch", "endpoint": body["endpoint"], "errors": None,
                                 "input_file_id": body["input_file_id"], "completion_window": body["completion_window"],
                                 "status": STATES[0], "created_at": 0, "metadata": body.get("metadata"),
                                 "output_file_id": None, "error_file_id": None,
                                 "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                                 "_lines": lines, "_n": self.created, "_dead": self.dead}
            return self.public(bid)

    def public(self, bid: str) -> dict[str, Any]:
        return {k: v for k, v in self.batches[bid].items() if not k.startswith("_")}

    def retrieve(self, bid: str) -> dict[str, Any]:
        with self.lock:
            self.retrieves += 1
            b = self.batches[bid]
            if b["status"] == "validating":
                b["status"] = "in_progress"
            elif b["status"] == "in_progress":
                b["_held"] = b.get("_held", 0) + 1
                if b["_held"] > self.hold:
                    self._finish(b)
            return self.public(bid)

    def _finish(self, b: dict[str, Any]) -> None:
        lines, dead = b["_lines"], b["_dead"]
        if dead in ("failed", "cancelled"):  # no files at all
            b["status"] = dead
            failed = 0 if dead == "cancelled" else len(lines)
            b["request_counts"] = {"total": len(lines), "completed": 0, "failed": failed}
            return
        expired = b["_n"] in self.expire or dead == "expired"
        answered = [] if dead else lines[: len(lines) // 2] if expired else lines
        out, err = [], []
        for line in lines:
            row = {"id": f"req-{line['custom_id'][:8]}", "custom_id": line["custom_id"]}
            if dead == "allfailed":
                error = {"error": {"message": "scripted failure", "code": "server_error"}}
                err.append({**row, "response": {"status_code": 500, "request_id": row["id"], "body": error},
                            "error": None})
                continue
            if line not in answered:
                err.append({**row, "response": None, "error": {"code": "batch_expired",
                                                                "message": "not answered before the window closed"}})
                continue
            r = httpx.post(self.chat + "/chat/completions", json=line["body"], timeout=30)
            try:
                body = r.json()
            except ValueError:
                body = {"error": {"message": r.text[:100]}}
            answer = {**row, "response": {"status_code": r.status_code, "request_id": row["id"], "body": body},
                      "error": None}
            (out if r.status_code == 200 else err).append(answer)
        b["status"] = "expired" if expired else "completed"
        b["request_counts"] = {"total": len(lines), "completed": len(out), "failed": len(err)}
        texts = [json.dumps(x) for x in out]
        if b["_n"] in self.duplicate and out:
            texts.insert(1, json.dumps(_second(out[0])))
        cut = self.garble.get(b["_n"])
        if cut and cut <= len(texts):
            texts[cut - 1] = texts[cut - 1][: len(texts[cut - 1]) // 2]
        dump = lambda rows: "".join(json.dumps(x) + "\n" for x in rows).encode()  # noqa: E731
        fids = [f"file-{len(self.files) + 1}", f"file-{len(self.files) + 2}"]
        self.files[fids[0]] = "".join(t + "\n" for t in texts).encode()
        b["output_file_id"] = fids[0] if out else None
        if err:
            self.files[fids[1]] = dump(err)
            b["error_file_id"] = fids[1]


def _second(row: dict[str, Any]) -> dict[str, Any]:
    """Another answer to the same ``custom_id``: every string of its JSON content prefixed with ``SECOND``."""
    row = json.loads(json.dumps(row))
    message = row["response"]["body"]["choices"][0]["message"]
    content = json.loads(message["content"])
    message["content"] = json.dumps({k: f"SECOND {v}" if isinstance(v, str) else v for k, v in content.items()})
    return row


def _handler(srv: FakeBatchServer):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def _json(self, status: int, obj: Any) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _forward(self, method: str, body: bytes | None = None) -> None:
            path = self.path.split("/v1", 1)[-1]
            r = httpx.request(method, srv.chat + path, content=body, timeout=60,
                              headers={"Content-Type": self.headers.get("Content-Type", "application/json")})
            self.send_response(r.status_code)
            self.send_header("Content-Type", r.headers.get("content-type", "application/json"))
            self.send_header("Content-Length", str(len(r.content)))
            self.end_headers()
            self.wfile.write(r.content)

        def _refused(self) -> bool:
            """With ``refuse_key``: a 401 whose text repeats the key, as a careless gateway's does."""
            if srv.refuse_key:
                self._json(401, {"error": {"message": f"bad key {self.headers.get('Authorization')}",
                                           "type": "invalid_request_error", "code": "invalid_api_key"}})
            return srv.refuse_key

        def do_GET(self):  # noqa: N802
            if self._refused():
                return None
            parts = self.path.split("?")[0].rstrip("/").split("/")
            if parts[-1] == "batches":  # newest first, as OpenAI lists them
                with srv.lock:
                    data = [srv.public(b) for b in reversed(list(srv.batches))]
                return self._json(200, {"object": "list", "data": data, "has_more": False,
                                        "first_id": data[0]["id"] if data else None,
                                        "last_id": data[-1]["id"] if data else None})
            if parts[-2] == "batches":
                if srv.lost or parts[-1] not in srv.batches:
                    return self._json(404, {"error": {"message": f"No batch found with id '{parts[-1]}'.",
                                                      "type": "invalid_request_error", "code": None}})
                return self._json(200, srv.retrieve(parts[-1]))
            if parts[-1] == "content" and parts[-3] == "files":
                data = srv.files[parts[-2]]
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                return self.wfile.write(data)
            return self._forward("GET")

        def do_POST(self):  # noqa: N802
            path = self.path.split("?")[0].rstrip("/")
            body = self._body()
            if self._refused():
                return None
            if path.endswith("/files"):
                head = f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode()
                message = BytesParser(policy=email_policy).parsebytes(head + body)
                upload = next(p for p in message.iter_parts() if p.get_param("name", header="content-disposition")
                              == "file")
                data = upload.get_payload(decode=True)
                fid = srv.add_file(data)
                return self._json(200, {"id": fid, "object": "file", "bytes": len(data), "created_at": 0,
                                        "filename": upload.get_filename(), "purpose": "batch", "status": "processed"})
            if path.endswith("/batches"):
                return self._json(200, srv.create(json.loads(body)))
            return self._forward("POST", body)

    return Handler


@contextlib.contextmanager
def fake_batch_server(chat, **kwargs: Any) -> Iterator[FakeBatchServer]:
    srv = FakeBatchServer(chat.base_url, **kwargs)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()

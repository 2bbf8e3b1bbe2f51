"""``curate data get`` against a local HTTP server that serves a tiny BEIR zip: checksums, a
resumed download (HTTP Range), a bad checksum, no network, a zip placed by hand, a hostile zip."""

from __future__ import annotations

import hashlib
import io
import json
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from curate.core.errors import CurateError
from curate.datasets.beir import load_beir
from curate.datasets.fetch import COLLECTIONS, DONE, Collection, collection, get
from tests.helpers import assert_one_line_error, run_curate


@contextmanager
def http_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A threaded HTTP server on 127.0.0.1 (a free port) for one test: yields its base URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()

CORPUS = [{"_id": f"d{i}", "title": f"Doc {i}", "text": f"Passage number {i} about topic {i % 3}. " * 40}
          for i in range(40)]  # big enough that half the zip is a real part
QUERIES = [{"_id": f"q{i}", "text": f"What about topic {i}?"} for i in range(3)]


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


TINY = _zip({"tiny/corpus.jsonl": "".join(json.dumps(d) + "\n" for d in CORPUS).encode(),
             "tiny/queries.jsonl": "".join(json.dumps(q) + "\n" for q in QUERIES).encode(),
             "tiny/qrels/test.tsv": b"query-id\tcorpus-id\tscore\r\nq0\td0\t1\r\nq1\td4\t1\r\nq2\td8\t2\r\n"})
SHA = hashlib.sha256(TINY).hexdigest()


@pytest.fixture
def server():
    """Serves ``state["body"]`` at /tiny.zip, honouring Range; ``state["cut"]``: the next answer
    stops after that many bytes (a connection that breaks). Records each request's Range."""
    state = {"body": TINY, "cut": None, "ranges": [], "sent": 0}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            if self.path != "/tiny.zip":
                self.send_error(404)
                return
            body, start = state["body"], 0
            rng = self.headers.get("Range")
            state["ranges"].append(rng)
            if rng:
                start = int(rng.split("=")[1].split("-")[0])
                if start >= len(body):
                    self.send_error(416)
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            else:
                self.send_response(200)
            self.send_header("Content-Length", str(len(body) - start))
            self.end_headers()
            chunk = body[start:]
            if state["cut"] is not None:
                chunk, state["cut"] = chunk[:state["cut"]], None
            self.wfile.write(chunk)
            state["sent"] += len(chunk)

        def log_message(self, *args):
            pass

    with http_server(Handler) as base:
        state["url"] = f"{base}/tiny.zip"
        yield state


def _get(url, tmp_path, *extra):
    return run_curate("data", "get", "tiny", "--url", url, "--sha256", SHA, "--dir", str(tmp_path / "data"), *extra)


def test_a_collection_lands_as_a_beir_folder_and_a_second_run_keeps_it(server, tmp_path):
    proc = _get(server["url"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    folder = tmp_path / "data" / "tiny"
    assert f"tiny: downloaded {server['url']} -> {folder}" in proc.stdout
    assert sorted(p.name for p in folder.iterdir()) == [DONE, "corpus.jsonl", "qrels", "queries.jsonl"]
    assert b"\r" not in (folder / "qrels" / "test.tsv").read_bytes()  # one line ending
    data = load_beir(folder, "test")  # what mine and eval read
    assert len(data.corpus) == 40 and data.qrels["q2"] == {"d8": 2}
    assert not list((tmp_path / "data").glob("*.zip*")), "the download is not left behind"
    again = _get(server["url"], tmp_path)
    assert again.returncode == 0 and "already there" in again.stdout and len(server["ranges"]) == 1


def test_a_broken_download_resumes_where_it_stopped(server, tmp_path):
    server["cut"] = len(TINY) // 2
    first = _get(server["url"], tmp_path)
    assert_one_line_error(first, "the download broke off", "run the same command again")
    part = tmp_path / "data" / "tiny.zip.part"
    assert part.stat().st_size == len(TINY) // 2 and not (tmp_path / "data" / "tiny").exists()
    second = _get(server["url"], tmp_path)
    assert second.returncode == 0, second.stderr
    assert server["ranges"] == [None, f"bytes={len(TINY) // 2}-"], "only the rest was asked for"
    assert server["sent"] == len(TINY), "no byte sent twice"
    assert (tmp_path / "data" / "tiny" / "corpus.jsonl").exists()


def test_a_bad_checksum_unpacks_nothing(server, tmp_path):
    server["body"] = TINY.replace(b"Passage number 3", b"Passage number X")
    proc = _get(server["url"], tmp_path)
    assert_one_line_error(proc, "is not the published", SHA, "run the same command again")
    assert list((tmp_path / "data").iterdir()) == [], "neither the folder nor the bad file stays"


def test_without_network_it_says_where_to_put_the_zip_and_then_uses_it(tmp_path):
    proc = _get("http://127.0.0.1:9/tiny.zip", tmp_path)  # the discard port: nothing listens
    where = tmp_path / "data" / "tiny.zip"
    assert_one_line_error(proc, "cannot reach http://127.0.0.1:9/tiny.zip", f"place it at {where}")
    where.write_bytes(TINY)  # fetched on another machine
    again = _get("http://127.0.0.1:9/tiny.zip", tmp_path)
    assert again.returncode == 0 and f"unpacked {where}" in again.stdout
    assert (tmp_path / "data" / "tiny" / "queries.jsonl").exists() and where.exists(), "a placed zip is kept"


def test_unknown_names_and_hostile_zips_are_refused(tmp_path):
    assert_one_line_error(run_curate("data", "get", "scifcat", "--dir", str(tmp_path)),
                          "unknown collection 'scifcat'", "scifact")
    evil = _zip({"../outside.txt": b"x", "corpus.jsonl": b"{}", "queries.jsonl": b"{}"})
    (tmp_path / "evil.zip").write_bytes(evil)
    with pytest.raises(CurateError, match="outside"):
        get(collection("evil", "http://unused", hashlib.sha256(evil).hexdigest()), tmp_path)
    assert not (tmp_path.parent / "outside.txt").exists() and not (tmp_path / "evil").exists()


def test_the_shipped_collections_are_https_with_a_checksum_and_listed():
    for c in COLLECTIONS.values():
        assert c.url.startswith("https://") and (c.sha256 or c.md5)
    listed = run_curate("data", "list")
    assert listed.returncode == 0 and all(name in listed.stdout for name in ("scifact", "nfcorpus", "nq-utd"))


def test_the_cocktail_layout_becomes_the_beir_folder_the_tests_read(tmp_path):
    """NQ-UTD's zip (Cocktail) keeps its corpus at corpus/human.jsonl beside an LLM-rewritten one,
    with CRLF qrels; unpacked, it is the BEIR folder the tests read from ../shared/data, byte for
    byte. The zip is rebuilt here in that layout from the shared copy (the real one is checked by
    its SHA-256 when fetched)."""
    from tests.helpers import SHARED_DATA

    shared = SHARED_DATA / "nq-utd"
    if not shared.exists():
        pytest.skip("needs ../shared/data/nq-utd")
    qrels = (shared / "qrels" / "test.tsv").read_bytes()
    cocktail = _zip({"qrels/test.tsv": qrels.replace(b"\n", b"\r\n"), "queries.jsonl": (shared / "queries.jsonl").read_bytes(),
                     "corpus/llama-2-7b-chat-tmp0.2.jsonl": b'{"_id": "x", "text": "rewritten"}\n',
                     "corpus/human.jsonl": (shared / "corpus.jsonl").read_bytes()})
    (tmp_path / "nq-utd.zip").write_bytes(cocktail)
    nq = COLLECTIONS["nq-utd"]
    folder, how = get(Collection(nq.name, nq.url, nq.about, rename=nq.rename, skip=nq.skip), tmp_path)  # no checksum
    assert how.startswith("unpacked")
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == [
        DONE, "corpus.jsonl", "qrels/test.tsv", "queries.jsonl"], "the rewritten corpus is left out"
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        assert (folder / name).read_bytes() == (shared / name).read_bytes(), name

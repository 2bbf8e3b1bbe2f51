"""``curate data get`` when the name, the folder, the URL, the server or the zip is not what it
should be: it refuses in one line (exit 2), removes nothing it did not make, shows no secret,
and never leaves a half-written DIR/NAME. Every zip is built here and served from 127.0.0.1."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import struct
import tracemalloc
import warnings
import zipfile
from http.server import BaseHTTPRequestHandler

import pytest
from click.testing import CliRunner

from curate.datasets.fetch import DONE, MAX_MEMBER_ENV, STAGING_MARK
from tests.datasets.test_fetch import http_server
from tests.helpers import assert_one_line_error, run_curate

DOCS = [{"_id": f"d{i}", "title": f"Doc {i}", "text": f"Passage {i} about topic {i % 3}."} for i in range(12)]
QUERIES = [{"_id": "q0", "text": "What about topic 0?"}]
QRELS = b"query-id\tcorpus-id\tscore\nq0\td0\t1\n"
TOKEN, SIGNATURE, PASSWORD = "sk-secret-abcdef123456", "deadbeefcafe0123456789", "hunter2-password"


def _jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def _zip(members: list[tuple[str, bytes]], method: int = zipfile.ZIP_STORED) -> bytes:
    """A zip of ``members`` in order; a name may come twice (zipfile only warns about it)."""
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with zipfile.ZipFile(buf, "w", method) as z:
            for name, data in members:
                z.writestr(name, data)
    return buf.getvalue()


def _beir(*extra: tuple[str, bytes], corpus: bytes | None = None, method: int = zipfile.ZIP_STORED) -> bytes:
    """A small BEIR zip (one top folder, as BEIR's own) with ``extra`` members after it."""
    return _zip([("tiny/corpus.jsonl", _jsonl(DOCS) if corpus is None else corpus),
                 ("tiny/queries.jsonl", _jsonl(QUERIES)), ("tiny/qrels/test.tsv", QRELS), *extra], method)


GOOD = _beir()


def _sha(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def _patch_member(body: bytes, name: str, flags: int | None = None, method: int | None = None) -> bytes:
    """``body`` with the general-purpose flags or the compression method of member ``name`` set
    in both its local header and its central-directory entry (what an encrypting or exotic
    archiver writes)."""
    data = bytearray(body)
    info = zipfile.ZipFile(io.BytesIO(body)).getinfo(name)
    local = info.header_offset
    central = next(i for i in _find_all(data, b"PK\x01\x02")
                   if data[i + 46:i + 46 + struct.unpack_from("<H", data, i + 28)[0]] == name.encode())
    for offset, value in ((6, flags), (8, method)):
        if value is not None:
            struct.pack_into("<H", data, local + offset, value)
            struct.pack_into("<H", data, central + offset + 2, value)
    return bytes(data)


def _find_all(data: bytearray, needle: bytes) -> list[int]:
    found, at = [], data.find(needle)
    while at >= 0:
        found.append(at)
        at = data.find(needle, at + 1)
    return found


def _broken_deflate(name: str) -> bytes:
    """A deflated BEIR zip whose member ``name`` starts with a block of the reserved type
    (BTYPE 11): zlib stops on it with an error."""
    body = bytearray(_beir(method=zipfile.ZIP_DEFLATED))
    info = zipfile.ZipFile(io.BytesIO(bytes(body))).getinfo(name)
    name_len, extra_len = struct.unpack_from("<HH", body, info.header_offset + 26)
    body[info.header_offset + 30 + name_len + extra_len] = 0b111  # BFINAL 1, BTYPE 11
    return bytes(body)


@pytest.fixture
def server():
    """Serves ``state["routes"][path]`` (a dict: ``body``, optional ``length`` for the
    Content-Length header as sent, optional ``user``/``password`` the request must carry);
    any query is ignored. Records every request's path and headers. Unknown paths get a 404
    whose reason is ``state["reason"]`` (a server that echoes what it was sent)."""
    state = {"routes": {}, "requests": [], "reason": None}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            state["requests"].append((self.path, dict(self.headers)))
            route = state["routes"].get(self.path.split("?", 1)[0])
            if route is None:
                self.send_error(404, state["reason"])
                return
            if "user" in route:
                want = "Basic " + base64.b64encode(f"{route['user']}:{route['password']}".encode()).decode()
                if self.headers.get("Authorization") != want:
                    self.send_error(401)
                    return
            self.send_response(200)
            self.send_header("Content-Length", route.get("length", str(len(route["body"]))))
            self.end_headers()
            self.wfile.write(route["body"])

        def log_message(self, *args):
            pass

    with http_server(Handler) as base:
        state["base"] = base
        yield state


def _serve(server, body: bytes, path: str = "/tiny.zip", **route) -> str:
    server["routes"][path] = {"body": body, **route}
    return server["base"] + path


def _get(tmp_path, url: str, sha: str, name: str = "tiny", env: dict | None = None):
    return run_curate("data", "get", name, "--url", url, "--sha256", sha, "--dir", str(tmp_path / "data"), env=env)


def _refused(proc, *needles: str) -> None:
    """One line, exit 2 (a CurateError), no traceback."""
    assert_one_line_error(proc, *needles)
    assert proc.returncode == 2, proc.stderr


def _nothing_half_written(tmp_path) -> None:
    data = tmp_path / "data"
    assert not (data / "tiny").exists() and not (data / ".tiny.unpacking").exists(), sorted(data.iterdir())


# -- NAME is a name --------------------------------------------------------------------------

@pytest.mark.parametrize("name", [".", "", "../victim", "ABSOLUTE", "tiny/sub", "..", ".hidden"])
def test_a_name_that_is_a_path_is_refused_before_anything_is_touched(server, tmp_path, name):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "mine.txt").write_text("mine")
    name = str(victim) if name == "ABSOLUTE" else name
    proc = _get(tmp_path, _serve(server, GOOD), _sha(GOOD), name=name)
    _refused(proc, "is not a collection name", "never a path")
    assert (victim / "keep.txt").read_text() == "mine" and sorted(p.name for p in victim.iterdir()) == ["keep.txt"]
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["mine.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "victim"]
    assert server["requests"] == [], "refused before any download"


def test_every_name_is_checked_before_the_first_is_fetched(tmp_path):
    proc = run_curate("data", "get", "scifact", "../x", "--dir", str(tmp_path / "data"))
    _refused(proc, "'../x' is not a collection name")
    assert not (tmp_path / "data").exists()


# -- only curate's own folders are removed ---------------------------------------------------

def test_a_users_folder_of_that_name_is_refused_not_deleted(server, tmp_path):
    mine = tmp_path / "data" / "tiny"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("my own work")
    proc = _get(tmp_path, _serve(server, GOOD), _sha(GOOD))
    _refused(proc, str(mine), "exists and is not curate's", "move it away")
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"] and server["requests"] == []


def test_a_users_file_of_that_name_is_refused_not_deleted(server, tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "tiny").write_text("a file, not a folder")
    proc = _get(tmp_path, _serve(server, GOOD), _sha(GOOD))
    _refused(proc, "exists and is not curate's")
    assert (tmp_path / "data" / "tiny").read_text() == "a file, not a folder"


def test_a_staging_folder_is_removed_only_when_it_is_curates(server, tmp_path):
    staging = tmp_path / "data" / ".tiny.unpacking"
    staging.mkdir(parents=True)
    (staging / "notes.txt").write_text("not curate's")
    url = _serve(server, GOOD)
    _refused(_get(tmp_path, url, _sha(GOOD)), str(staging), "is not curate's staging folder")
    assert (staging / "notes.txt").read_text() == "not curate's"
    (staging / "notes.txt").unlink()
    (staging / STAGING_MARK).touch()  # what an interrupted run of curate leaves behind
    (staging / "corpus.jsonl").write_text("half")
    proc = _get(tmp_path, url, _sha(GOOD))
    assert proc.returncode == 0, proc.stderr
    assert not staging.exists()
    folder = tmp_path / "data" / "tiny"
    assert sorted(p.name for p in folder.iterdir()) == [DONE, "corpus.jsonl", "qrels", "queries.jsonl"]


def test_another_checksum_on_a_finished_folder_is_refused_with_the_way_out(server, tmp_path):
    first = _get(tmp_path, _serve(server, GOOD), _sha(GOOD))
    assert first.returncode == 0, first.stderr
    other = _beir(corpus=_jsonl(DOCS[:3]))
    proc = _get(tmp_path, _serve(server, other, "/other.zip"), _sha(other))
    _refused(proc, "already holds a collection from another zip", _sha(GOOD), _sha(other), "remove that folder")
    folder = tmp_path / "data" / "tiny"
    assert len((folder / "corpus.jsonl").read_text().splitlines()) == 12, "the first collection stays"
    assert json.loads((folder / DONE).read_text())["sha256"] == _sha(GOOD)
    again = _get(tmp_path, server["base"] + "/tiny.zip", _sha(GOOD).upper())
    assert again.returncode == 0 and "already there" in again.stdout, "the same checksum is still fine"


# -- no secret printed or stored -------------------------------------------------------------

def test_a_signed_query_is_masked_in_the_output_and_the_record(server, tmp_path):
    url = _serve(server, GOOD) + f"?X-Amz-Signature={SIGNATURE}&api_key={TOKEN}"
    proc = _get(tmp_path, url, _sha(GOOD))
    assert proc.returncode == 0, proc.stderr
    record = (tmp_path / "data" / "tiny" / DONE).read_text()
    for text in (proc.stdout + proc.stderr, record):
        assert SIGNATURE not in text and TOKEN not in text
    assert "X-Amz-Signature=***&api_key=***" in proc.stdout
    assert json.loads(record)["url"] == server["base"] + "/tiny.zip?X-Amz-Signature=***&api_key=***"
    assert server["requests"][0][0].endswith(f"api_key={TOKEN}"), "the real URL is what is fetched"


def test_secrets_are_masked_in_error_lines_even_when_the_server_echoes_them(server, tmp_path):
    server["reason"] = f"no object for key {TOKEN}"
    proc = _get(tmp_path, server["base"] + f"/missing.zip?api_key={TOKEN}", _sha(GOOD))
    _refused(proc, "404", "/missing.zip?api_key=***", "no object for key ***")
    assert TOKEN not in proc.stderr + proc.stdout


def test_a_password_in_the_url_is_sent_as_basic_auth_and_never_shown(server, tmp_path):
    url = _serve(server, GOOD, user="bob", password=PASSWORD).replace("http://", f"http://bob:{PASSWORD}@")
    proc = _get(tmp_path, url, _sha(GOOD))
    assert proc.returncode == 0, proc.stderr
    assert PASSWORD not in proc.stdout + proc.stderr and "http://***@127.0.0.1" in proc.stdout
    assert PASSWORD not in (tmp_path / "data" / "tiny" / DONE).read_text()
    wrong = url.replace(PASSWORD, PASSWORD + "-old")
    failed = run_curate("data", "get", "other", "--url", wrong, "--sha256", _sha(GOOD), "--dir", str(tmp_path / "data"))
    _refused(failed, "401", "http://***@127.0.0.1")
    assert PASSWORD not in failed.stderr and "bob" not in failed.stderr
    unreachable = run_curate("data", "get", "third", "--url", f"http://bob:{PASSWORD}@127.0.0.1:9/x.zip",
                             "--sha256", _sha(GOOD), "--dir", str(tmp_path / "data"))
    _refused(unreachable, "cannot reach http://***@127.0.0.1:9/x.zip")
    assert PASSWORD not in unreachable.stderr


# -- a zip that would unpack to something else than it says ----------------------------------

def test_a_member_twice_in_the_zip_is_refused_naming_it(server, tmp_path):
    twice = _beir(("tiny/corpus.jsonl", _jsonl(DOCS[:1])))  # 12 documents, then 1 under the same name
    proc = _get(tmp_path, _serve(server, twice), _sha(twice))
    _refused(proc, "'tiny/corpus.jsonl'", "twice")
    _nothing_half_written(tmp_path)


def test_a_renamed_member_colliding_with_another_is_refused(tmp_path):
    """NQ-UTD's corpus/human.jsonl becomes corpus.jsonl: a zip with both would lose one."""
    both = _zip([("corpus.jsonl", b"{}\n"), ("corpus/human.jsonl", b"{}\n"), ("queries.jsonl", b"{}\n"),
                 ("qrels/test.tsv", QRELS)])
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "nq-utd.zip").write_bytes(both)
    proc = run_curate("data", "get", "nq-utd", "--url", "http://127.0.0.1:9/unused", "--sha256", _sha(both),
                      "--dir", str(tmp_path / "data"))
    _refused(proc, "'corpus/human.jsonl'", "twice")
    assert not (tmp_path / "data" / "nq-utd").exists()


def test_a_member_past_the_size_limit_is_refused_naming_it(server, tmp_path):
    big = _beir(corpus=b'{"_id": "d", "text": "same words again"}\n' * 100_000, method=zipfile.ZIP_DEFLATED)
    assert len(big) < 100_000  # 4 MB of corpus in a small zip
    proc = _get(tmp_path, _serve(server, big), _sha(big), env={MAX_MEMBER_ENV: "1000000"})
    _refused(proc, "'tiny/corpus.jsonl'", "more than 1,000,000 bytes", MAX_MEMBER_ENV)
    _nothing_half_written(tmp_path)
    bad_limit = _get(tmp_path, server["base"] + "/tiny.zip", _sha(big), env={MAX_MEMBER_ENV: "lots"})
    _refused(bad_limit, f"{MAX_MEMBER_ENV}='lots' is not a number of bytes")


def test_a_large_member_is_streamed_to_disk_not_read_whole(tmp_path):
    """In-process, so tracemalloc sees what unpacking allocates: far less than the member."""
    from curate.cli import cli

    line = b'{"_id": "d", "text": "the same words over and over"}\n'
    corpus = line * (24_000_000 // len(line))
    big = _beir(corpus=corpus, method=zipfile.ZIP_DEFLATED)
    del corpus
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "tiny.zip").write_bytes(big)  # placed by hand: no download in the measure
    tracemalloc.start()
    try:
        result = CliRunner().invoke(cli, ["data", "get", "tiny", "--url", "http://127.0.0.1:9/unused",
                                          "--sha256", _sha(big), "--dir", str(tmp_path / "data")])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.exit_code == 0, result.output
    assert (tmp_path / "data" / "tiny" / "corpus.jsonl").stat().st_size == len(line) * (24_000_000 // len(line))
    assert peak < 6_000_000, f"peak {peak:,} bytes while unpacking a 24 MB member"


def test_crlf_split_across_chunks_still_becomes_lf(tmp_path):
    """The qrels' CRLF is turned into LF while streaming, also where a chunk ends on the CR."""
    from curate.datasets.fetch import CHUNK

    row = b"q0\td0\t1\r\n"
    pad = b"query-id\tcorpus-id\tscore" + b" " * (CHUNK - len(b"query-id\tcorpus-id\tscore") - 1) + b"\r\n"
    qrels = pad + row * 20_000
    body = _zip([("corpus.jsonl", _jsonl(DOCS)), ("queries.jsonl", _jsonl(QUERIES)), ("qrels/test.tsv", qrels)])
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "tiny.zip").write_bytes(body)
    proc = _get(tmp_path, "http://127.0.0.1:9/unused", _sha(body))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "data" / "tiny" / "qrels" / "test.tsv").read_bytes() == qrels.replace(b"\r\n", b"\n")


# -- a broken response or zip: one line, nothing half-written --------------------------------

def test_a_content_length_that_is_no_number_is_one_line(server, tmp_path):
    url = _serve(server, GOOD, length="abc") + f"?api_key={TOKEN}"
    proc = _get(tmp_path, url, _sha(GOOD))
    _refused(proc, server["base"] + "/tiny.zip?api_key=***", "Content-Length", "'abc'")
    assert TOKEN not in proc.stderr
    _nothing_half_written(tmp_path)


FAULTS = {
    "corrupt deflate stream": (lambda: _broken_deflate("tiny/corpus.jsonl"), "'tiny/corpus.jsonl' is damaged"),
    "encrypted member": (lambda: _patch_member(GOOD, "tiny/queries.jsonl", flags=0x1),
                         "'tiny/queries.jsonl' is encrypted"),
    "unknown compression method": (lambda: _patch_member(GOOD, "tiny/queries.jsonl", method=99),
                                   "'tiny/queries.jsonl' uses compression method 99"),
    "a file that is also a folder": (lambda: _beir(("tiny/a/b", b"file"), ("tiny/a/b/c", b"inside")),
                                     "'tiny/a/b' is a file, yet other members sit inside it"),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_broken_zip_is_one_line_naming_the_member(server, tmp_path, fault):
    make, needle = FAULTS[fault]
    body = make()
    proc = _get(tmp_path, _serve(server, body), _sha(body))
    _refused(proc, needle)
    _nothing_half_written(tmp_path)
    assert [p.name for p in (tmp_path / "data").iterdir()] == ["tiny.zip"], "the checked download stays for a look"

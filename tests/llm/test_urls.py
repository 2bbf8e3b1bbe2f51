"""Server URLs as users give them: one reader for URL files, keys in URLs kept out of what curate
prints and writes, and a base URL's query kept after the request path."""

from __future__ import annotations

import json

import pytest

from curate.core.errors import CurateError
from curate.core.secrets import safe_url
from curate.llm.redact import Scrubber
from curate.llm.urls import read_urls
from tests.helpers import assert_one_line_error, read_jsonl, run_curate

SECRET = "sk-query-DO-NOT-LEAK-7d2e"
FRAGMENT_SECRET = "frag-DO-NOT-LEAK-91ab"
PASSWORD = "pw-DO-NOT-LEAK-33"


def _tasks(path, n=2):
    path.write_text("".join(json.dumps({"task": f"Given question {i}, find passages."}) + "\n" for i in range(n)))
    return path


def _generate(tmp_path, *base_urls):
    args = [a for u in base_urls for a in ("--base-url", str(u))]
    return run_curate("generate", "--task", "short-long", "-n", "2", "--per-task", "1", "--out", str(tmp_path / "o"),
                      "--tasks-file", str(_tasks(tmp_path / "t.jsonl")), "--model", "fake", "--max-reasks", "0",
                      "--backoff-base", "0.01", *args)


# ----------------------------------------------------------------------------- one reader of URL files


def test_a_urls_file_skips_comments_and_blank_lines(tmp_path):
    f = tmp_path / "urls.txt"
    f.write_text("# replicas of the 7B model\nhttp://a:1/v1\n\n   # the second one\n  http://b:2/v1  \n")
    assert read_urls([str(f), "http://c:3/v1"]) == ["http://a:1/v1", "http://b:2/v1", "http://c:3/v1"]


@pytest.mark.parametrize("content, needle", [
    (b"", "no URL in it"),
    (b"# nothing started yet\n\n", "no URL in it"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe", "not a text file"),
    (b"http://a:1/v1\nlocalhost:8000\n", ":2: not a URL"),
])
def test_a_urls_file_without_urls_is_an_error_naming_it(tmp_path, content, needle):
    f = tmp_path / "urls.txt"
    f.write_bytes(content)
    with pytest.raises(CurateError, match=needle) as e:
        read_urls([str(f)])
    assert str(f) in str(e.value) and "\n" not in str(e.value)


def test_a_value_that_is_neither_url_nor_file_is_named(tmp_path):
    with pytest.raises(CurateError, match="no such file"):
        read_urls([str(tmp_path / "replicas.txt")])


def test_base_url_file_with_comments_serves_the_run(tmp_path, srv):
    f = tmp_path / "urls.txt"
    f.write_text(f"# started by curate serve\n{srv.base_url}\n")
    proc = _generate(tmp_path, f)
    assert proc.returncode == 0, proc.stderr
    assert len(read_jsonl(tmp_path / "o" / "generated.jsonl")) == 2 and srv.chat_requests


def test_empty_base_url_file_stops_the_run_instead_of_the_embedded_model(tmp_path):
    f = tmp_path / "urls.txt"
    f.write_text("")
    proc = _generate(tmp_path, f)
    assert proc.returncode == 2
    assert_one_line_error(proc, str(f), "no URL in it")
    assert not [p.name for p in (tmp_path / "o").glob("*") if not p.name.startswith(".")]  # no outputs, no run.json


def test_binary_base_url_file_is_one_line(tmp_path):
    f = tmp_path / "urls.bin"
    f.write_bytes(b"\xff\xfe\x00\x01binary")
    proc = _generate(tmp_path, f)
    assert proc.returncode == 2
    assert_one_line_error(proc, str(f), "not a text file")


def test_teacher_base_url_reads_files_the_same_way(tmp_path):
    from curate.embed.kinds.api import ApiEmbedder

    f = tmp_path / "urls.txt"
    f.write_text("# teacher replicas\nhttp://a:1/v1\n")
    assert ApiEmbedder("openai:m", [str(f)]).cfg.base_urls == ["http://a:1/v1"]
    f.write_text("# none yet\n")
    with pytest.raises(CurateError, match="no URL in it"):
        ApiEmbedder("openai:m", [str(f)])


# ----------------------------------------------------------------------------- keys in URLs


@pytest.mark.parametrize("url, hidden", [
    (f"http://h:1/v1?api_key={SECRET}", [SECRET]),
    (f"http://h:1/v1?v=2&key={SECRET}", [SECRET]),
    (f"http://h:1/v1#key={FRAGMENT_SECRET}", [FRAGMENT_SECRET]),
    (f"http://h:1/v1#{FRAGMENT_SECRET}", [FRAGMENT_SECRET]),
    (f"http://me:{PASSWORD}@h:1/v1?token={SECRET}#k={FRAGMENT_SECRET}", [PASSWORD, SECRET, FRAGMENT_SECRET]),
])
def test_safe_url_masks_every_part_of_a_url(url, hidden):
    shown = safe_url(url)
    assert shown.startswith("http://") and "h:1/v1" in shown
    assert not any(s in shown for s in hidden)
    scrub = Scrubber.for_config(None, [url])
    assert not any(s in scrub(f"error from {url}: bad key {hidden[-1]}") for s in hidden)


def test_keys_in_the_base_url_are_sent_but_never_printed_or_written(tmp_path, srv, monkeypatch):
    from tests import fake_llm_server

    raw_paths = []
    post = fake_llm_server._Handler.do_POST

    def recording(handler):
        raw_paths.append(handler.path)
        return post(handler)

    monkeypatch.setattr(fake_llm_server._Handler, "do_POST", recording)
    root = srv.base_url.replace("http://", f"http://me:{PASSWORD}@")
    proc = _generate(tmp_path, f"{root}?api_key={SECRET}#key={FRAGMENT_SECRET}")
    assert proc.returncode == 0, proc.stderr
    # the query stays after the path the client joins (it was /v1/?api_key=…chat/completions)
    assert {r.path for r in srv.chat_requests} == {"/v1/chat/completions"}
    assert raw_paths and set(raw_paths) == {f"/v1/chat/completions?api_key={SECRET}"}
    run = json.loads((tmp_path / "o" / "run.json").read_text())
    assert run["params"]["llm"]["base_urls"] == [f"http://***@127.0.0.1:{srv.port}/v1?api_key=***#key=***"]
    for secret in (SECRET, FRAGMENT_SECRET, PASSWORD):
        assert secret not in proc.stdout + proc.stderr
        for f in (tmp_path / "o").rglob("*"):
            if f.is_file():
                assert secret.encode() not in f.read_bytes(), f"{secret} leaked into {f}"


def test_url_join_keeps_the_query_after_the_path():
    from curate.llm.urls import split_query, url_join

    assert url_join(f"http://h:1/v1/?api_key={SECRET}#x", "models") == f"http://h:1/v1/models?api_key={SECRET}"
    assert split_query(f"http://me:pw@h:1/v1?api_key={SECRET}&v=2#k=x") == ("http://me:pw@h:1/v1",
                                                                             {"api_key": SECRET, "v": "2"})


def test_run_json_params_mask_urls_and_keys():
    from curate.core.secrets import mask_secrets

    params = {"steps": [{"step": "judge", "judge": {"base_url": f"http://h/v1?api_key={SECRET}",
                                                    "api_key_env": "JUDGE_KEY"}}],
              "llm": {"api_key": SECRET, "max_tokens": 5}, "note": "see http://h/v1 for more"}
    masked = mask_secrets(params)
    assert SECRET not in json.dumps(masked)
    assert masked["steps"][0]["judge"] == {"base_url": "http://h/v1?api_key=***", "api_key_env": "JUDGE_KEY"}
    assert masked["llm"] == {"api_key": "***", "max_tokens": 5} and masked["note"] == params["note"]

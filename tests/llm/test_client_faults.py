"""Replies no OpenAI server should send, and secrets in the wrong places: the real CLI against
the scripted server. Every such item ends in failed.jsonl (or as a record once the server
recovers); the run itself never aborts."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from tests.fake_llm_server import fake_llm_server
from tests.helpers import read_jsonl, run_curate

SECRET = "sk-test-never-written-77c1"
CASES = ["emptybody", "html", "emptybody,ok", "html,ok", "trickle", "echokey", "blank"]


def _tasks(path: Path) -> Path:
    lines = [json.dumps({"task": f"FAULTS[{c}] Given a question number {i}, "
                                 f"find passages. <{c}>"}) for i, c in enumerate(CASES)]
    path.write_text("\n".join(lines) + "\n")
    return path


def _generate(url: str, out: Path, tasks: Path, *extra: str):
    return run_curate("generate", "--task", "short-long", "-n", str(len(CASES)), "--per-task", "1",
                      "--out", str(out), "--tasks-file", str(tasks), "--model", "fake",
                      "--base-url", url, "--backoff-base", "0.01", "--max-retries", "1", "--max-reasks", "1",
                      "--timeout", "3", *extra, env={"OPENAI_API_KEY": SECRET})


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("client")
    out = tmp / "o"
    with fake_llm_server() as srv:
        url = srv.base_url.replace("http://", f"http://curate:{SECRET}@")
        started = time.monotonic()
        proc = _generate(url, out, _tasks(tmp / "t.jsonl"))
        elapsed = time.monotonic() - started
    failed = {next(c for c in CASES if f"<{c}>" in r["task"]): r for r in read_jsonl(out / "failed.jsonl")}
    made = {next(c for c in CASES if f"<{c}>" in r["task"]): r for r in read_jsonl(out / "generated.jsonl")}
    return proc, out, failed, made, elapsed


def test_the_run_finishes_with_every_item_accounted_for(run):
    proc, _, failed, made, _ = run
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert set(failed) | set(made) == set(CASES) and not set(failed) & set(made)


@pytest.mark.parametrize("case", ["emptybody", "html"])
def test_a_body_that_is_not_a_chat_completion_is_retried_then_failed(run, case):
    _, _, failed, _, _ = run
    assert failed[case]["reason"].startswith("bad-response"), failed[case]
    assert failed[case]["attempts"] == 2  # --max-retries 1


@pytest.mark.parametrize("case", ["emptybody,ok", "html,ok"])
def test_a_bad_body_then_a_good_one_gives_a_record(run, case):
    _, _, _, made, _ = run
    assert made[case]["meta"]["attempts"] == 2


def test_timeout_bounds_the_whole_request_not_each_read(run):
    _, _, failed, _, elapsed = run
    assert failed["trickle"]["reason"].startswith("timeout"), failed["trickle"]
    # two attempts of 3 s each, plus start-up; a per-read timeout would wait 4,000+ s
    assert elapsed < 120


def test_whitespace_strings_are_a_content_fault(run):
    _, _, failed, made, _ = run
    assert "blank" not in made
    assert failed["blank"]["reason"].startswith("schema: "), failed["blank"]


def test_a_whitespace_string_fails_even_where_the_schema_allows_one_character():
    import jsonschema

    from curate.llm.client import _read_answer
    from curate.llm.taskspec import _no_blank_strings

    schema = _no_blank_strings({"type": "object", "properties": {
        "q": {"type": "string", "maxLength": 9}, "n": {"type": "array", "items": {"type": "string", "maxLength": 9}}}})
    assert schema["properties"]["q"]["minLength"] == 1
    check = jsonschema.Draft202012Validator(schema)
    assert _read_answer('{"q": "a", "n": ["b"]}', "stop", check)[1] is None
    assert _read_answer('{"q": "", "n": ["b"]}', "stop", check)[1].startswith("schema: q:")
    assert _read_answer('{"q": "a", "n": ["b", " \\n"]}', "stop", check)[1] == "schema: n/1: blank string"


def test_secrets_are_never_written_or_printed(run):
    proc, out, failed, _, _ = run
    assert failed["echokey"]["reason"].startswith("http-400")
    assert "***" in failed["echokey"]["reason"]  # the server's message, with the key masked
    assert SECRET not in proc.stdout + proc.stderr
    for f in out.rglob("*"):
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes(), f"secret leaked into {f}"


def test_a_resume_with_retry_failed_finishes_the_run(run, tmp_path):
    _, out, failed, made, _ = run
    work = tmp_path / "o"
    shutil.copytree(out, work)
    with fake_llm_server(healthy=True) as srv:  # the server has recovered
        again = _generate(srv.base_url, work, _tasks(tmp_path / "t.jsonl"), "--retry-failed")
        assert again.returncode == 0, again.stderr
        assert len(srv.chat_requests) == len(failed)  # only the failed items are asked again
    records = read_jsonl(work / "generated.jsonl")
    assert len(records) == len(CASES) == len({r["id"] for r in records})
    assert not read_jsonl(work / "failed.jsonl")


def test_a_raw_newline_inside_a_string_is_accepted():
    import jsonschema

    from curate.llm.client import _read_answer

    check = jsonschema.Draft202012Validator({"type": "object", "properties": {"q": {"type": "string"}}})
    assert _read_answer('{"q": "two\nlines\tand a tab"}', "stop", check)[1] is None


def test_unusable_answers_in_the_cache_are_asked_again_once_the_server_answers(tmp_path):
    """Fault 5 of issue 42: an item that failed on unusable answers failed again from the cache
    after the server was fixed, sending nothing. Now the server is asked again."""
    import asyncio

    from curate.llm.cache import RequestCache
    from curate.llm.client import ClientConfig, LLMClient

    schema = {"type": "object", "properties": {"verdict": {"type": "string", "enum": ["yes", "no"]}},
              "required": ["verdict"], "additionalProperties": False}
    messages = [{"role": "user", "content": "FAULTS[malformed,ok] is this passage relevant?"}]

    async def ask(url: str):
        client = LLMClient(ClientConfig(base_urls=[url], model="fake", api_key="k", max_retries=0, max_reasks=0,
                                        backoff_base=0), RequestCache(tmp_path / "llm.sqlite"))
        try:
            return await client.ask_json(messages, schema, {}, seed=3)
        finally:
            await client.close()
            client.cache.close()

    with fake_llm_server() as srv:
        first = asyncio.run(ask(srv.base_url))  # the server sends prose: unusable
        assert not first.ok and len(srv.chat_requests) == 1
        second = asyncio.run(ask(srv.base_url))  # the server now answers: asked again, not failed from the cache
        assert second.ok and second.data == {"verdict": "yes"}, second.reason
        assert len(srv.chat_requests) == 2
        third = asyncio.run(ask(srv.base_url))  # a good answer is served from the cache
        assert third.ok and third.cached and len(srv.chat_requests) == 2

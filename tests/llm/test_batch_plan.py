"""Where the batch setting lives (issue 55): ``--batch`` becomes the ``batch`` plan of the client's
configuration in the one place a configuration is built (``curate.llm.backend.llm_backend``);
generate and the judge steps read it from their client, switch it on with ``client.collecting``
only, and keep their batches in one layout, ``OUT/batch/NAME``. Folders an earlier release left
(generate's ``OUT/batch``, a judge step's ``CACHE/batch/STEP``) are moved there and resumed."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time

import pytest

from curate.core.errors import CurateError
from curate.llm.backend import LLMOptions, llm_backend, llm_client, open_backend
from curate.llm.batch import STATE, BatchPlan, Collector, plan_of
from tests.fake_batch_server import fake_batch_server
from tests.fake_llm_server import fake_llm_server
from tests.generate.test_from_pairs import _env
from tests.helpers import REPO, read_jsonl, run_curate
from tests.llm.test_batch import N, _args, _docs

SCHEMA = {"type": "object", "properties": {"verdict": {"type": "string", "enum": ["yes", "no"]}},
          "required": ["verdict"], "additionalProperties": False}
ASK = [{"role": "user", "content": "Is the sky blue?"}]


def test_a_batch_run_of_generate_and_of_a_judge_step_read_the_plan_from_the_same_place(tmp_path):
    """generate opens its backend on the configuration ``llm_backend`` yields (``run_llm_stage``);
    a judge step opens ``llm_client`` through filter's factory: the same plan either way, and
    their batches in the same layout under the run folder."""
    from curate.filter.main import _judge_factory

    opts = LLMOptions(base_urls=("http://127.0.0.1:9/v1",), model="m", batch="api", batch_poll=0.05)
    out = tmp_path / "out"

    async def plans():
        with llm_backend(opts, out) as (cfg, cache):  # generate's way (curate.generate.stage)
            generate = open_backend(cfg, cache)
            await generate.close()
        async with _judge_factory(opts, out)({"base_url": "http://127.0.0.1:9/v1"}) as judge:  # a judge's way
            pass
        return plan_of(generate), plan_of(judge)

    generate, judge = asyncio.run(plans())
    assert generate == judge == BatchPlan("api", 0.05, "m", out / "batch", out / ".cache")
    assert generate.folder("generate") == out / "batch" / "generate"
    assert judge.folder("judge_answerable") == out / "batch" / "judge_answerable"


def test_a_client_built_without_a_plan_never_collects(tmp_path):
    from curate.filter.steps.judges import _batched

    async def ask(url):
        async with llm_client(LLMOptions(base_urls=(url,), model="m"), tmp_path) as client:
            assert client.cfg.batch is None and plan_of(client) is None and _batched("s", [client]) is None
            collector = Collector()
            with pytest.raises(ValueError, match="asks online"):
                with client.collecting(collector):
                    pass
            return await client.ask_json(ASK, SCHEMA, {}, seed=1), collector

    with fake_llm_server() as srv:
        answer, collector = asyncio.run(ask(srv.base_url))
        assert answer.ok and answer.sent and len(srv.chat_requests) == 1, "sent online, as it came"
    assert not collector.requests and not (tmp_path / "batch").exists()


def test_collecting_writes_down_instead_of_sending_and_ends_with_its_block(tmp_path):
    async def ask(url):
        opts = LLMOptions(base_urls=(url,), model="m", batch="api")
        async with llm_client(opts, tmp_path) as client:
            collector = Collector()
            with client.collecting(collector):
                pending = await client.ask_json(ASK, SCHEMA, {}, seed=1)
            online = await client.ask_json(ASK, SCHEMA, {}, seed=1)  # outside the block: sent
            return pending, online, collector

    with fake_llm_server() as srv:
        pending, online, collector = asyncio.run(ask(srv.base_url))
        assert len(srv.chat_requests) == 1
    assert pending.reason == "pending: asked in a batch" and len(collector.requests) == 1 and online.ok


def test_a_backend_that_cannot_collect_stops_a_batch_run_with_one_line(tmp_path):
    from curate.llm.backend import BACKENDS, register_backend

    class Online:
        def __init__(self, cfg, cache):
            self.cfg = cfg

    register_backend("online-only")(Online)
    try:
        opts = LLMOptions(base_urls=("online-only://x",), model="m", batch="api")
        with llm_backend(opts, tmp_path) as (cfg, cache):
            with pytest.raises(CurateError, match="the online-only:// backend sends each request as it comes"):
                open_backend(cfg, cache)
    finally:
        BACKENDS.unregister("online-only")


def _old_folder(folder, rounds=1):
    """A batch folder as a killed run left it: its requests and the state naming its batch."""
    folder.mkdir(parents=True)
    (folder / "requests-1.jsonl").write_text("{}\n", encoding="utf-8")
    (folder / STATE).write_text(json.dumps({"rounds": [{"round": 1, "requests": "requests-1.jsonl",
                                                        "count": rounds, "id": "batch_1"}]}), encoding="utf-8")


def test_the_folders_an_earlier_release_left_are_moved_into_the_one_layout(tmp_path):
    out, cache = tmp_path / "out", tmp_path / "elsewhere"
    plan = BatchPlan("api", home=out / "batch", cache_dir=cache)
    _old_folder(out / "batch")  # generate's, at OUT/batch itself
    _old_folder(cache / "batch" / "relabel")  # a judge step's, beside the request cache
    lines = []
    assert plan.folder("generate", was=out / "batch", note=lines.append) == out / "batch" / "generate"
    assert plan.folder("relabel", note=lines.append) == out / "batch" / "relabel"
    for name in ("generate", "relabel"):
        assert sorted(p.name for p in (out / "batch" / name).iterdir()) == ["requests-1.jsonl", STATE]
    assert not (out / "batch" / STATE).exists() and not (cache / "batch" / "relabel").joinpath(STATE).exists()
    assert len(lines) == 2 and "moved to" in lines[0]
    _old_folder(cache / "batch" / "generate", rounds=7)  # a folder already in place is the one kept
    assert plan.folder("generate") == out / "batch" / "generate"
    assert json.loads((out / "batch" / "generate" / STATE).read_text())["rounds"][0]["count"] == 1


def test_a_run_an_earlier_release_killed_while_polling_polls_its_batch_from_the_new_place(tmp_path):
    docs, out = _docs(tmp_path / "docs"), tmp_path / "out"
    with fake_llm_server() as chat, fake_batch_server(chat, hold=10**6) as srv:
        cmd = [sys.executable, "-m", "curate", *_args(docs, out, srv.base_url, "--batch", "api", "--batch-poll", "0.05")]
        proc = subprocess.Popen(cmd, cwd=REPO, env=_env(tmp_path / "h"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while srv.retrieves < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert srv.created == 1 and srv.retrieves >= 3, "killed while it polled"
        new = out / "batch" / "generate"
        for path in new.iterdir():  # laid out as the release before left it: OUT/batch/state.json
            path.rename(out / "batch" / path.name)
        new.rmdir()
        srv.hold = 0
        again = run_curate(*cmd[3:], env=_env(tmp_path / "h"))
        assert again.returncode == 0, again.stderr
        assert f"{out / 'batch'} moved to {new}" in again.stderr
        assert "polling the batch a killed run left" in again.stderr and srv.created == 1, "never submitted twice"
    assert (new / STATE).is_file() and not (out / "batch" / STATE).exists()
    assert len({r["id"] for r in read_jsonl(out / "generated.jsonl")}) == N

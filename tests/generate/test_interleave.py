"""Several families go through one queue of requests, interleaved, and end as if run one by one.

``generate --task A --task B --task C`` plans every family first, then asks for all their items
in one queue, a turn each (so one family's slow tail does not leave the servers idle); the ids,
seeds and prompts are each item's own, so the records, the per-family numbers and the finished
``generated.jsonl`` (item order: family by family) are those of running each family alone.
``--executor ray --workers 2`` shards that queue over two client processes, each with its own
server, writing part files that are folded in: the records are again the same.

The scripted server answers each request from its body alone (``_answer``), so two runs that
send the same requests get the same answers, whatever order they arrive in.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path

import pytest

from curate.core.executor import Executor
from curate.generate.shards import PARTS, deal, merge_parts, part_paths, shard_servers
from tests.fake_llm_server import build_instance, fake_llm_server, request_schema
from tests.generate.test_faults import BACKOFF_BASE, _env
from tests.helpers import REPO, read_jsonl

FAMILIES = ("short-long", "sts", "long-short")  # two brainstormed, one with fixed tasks
VOLATILE = ("created", "latency_s", "from_cache")  # meta that differs between any two runs


def _answer(body: dict) -> dict:
    """The answer to a request, from its messages and seed only (not its arrival order)."""
    blob = json.dumps([body.get("messages"), body.get("seed")], sort_keys=True).encode()
    return build_instance(request_schema(body), random.Random(hashlib.sha256(blob).digest()))


@pytest.fixture(scope="module")
def servers():
    with fake_llm_server(responder=_answer) as one, fake_llm_server(responder=_answer) as two:
        yield one, two


def _generate(out: Path, urls, *extra: str, families=FAMILIES):
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "curate", "generate", *(a for f in families for a in ("--task", f)),
           "-n", "4", "--per-task", "2", "--out", str(out), "--model", "fake", "--concurrency", "2",
           "--seed", "0", "--backoff-base", str(BACKOFF_BASE), *(a for u in urls for a in ("--base-url", u)), *extra]
    proc = subprocess.run(cmd, cwd=REPO, env=_env(out.parent / "home"), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


def _stable(records: list[dict]) -> list[dict]:
    return [{**r, "meta": {k: v for k, v in r["meta"].items() if k not in VOLATILE}} for r in records]


def _families_of(report: dict) -> dict[str, dict]:
    keep = ("counts", "failure_reasons", "tokens", "requests_sent", "answers_from_cache", "tasks_used")
    return {f: {k: s.get(k) for k in keep} for f, s in report["families"].items()}


@pytest.fixture(scope="module")
def runs(servers, tmp_path_factory):
    """The families in one run (one server), and each family run alone (the reference)."""
    tmp = tmp_path_factory.mktemp("interleave")
    srv = servers[0]
    before = len(srv.chat_requests)
    _generate(tmp / "together", [srv.base_url])
    sent = srv.chat_requests[before:]
    alone = {}
    for family in FAMILIES:
        _generate(tmp / family, [srv.base_url], families=(family,))
        alone[family] = tmp / family
    return {"tmp": tmp, "together": tmp / "together", "sent": sent, "alone": alone}


def _reference(runs) -> list[dict]:
    return [r for f in FAMILIES for r in read_jsonl(runs["alone"][f] / "generated.jsonl")]


def test_requests_of_the_families_reach_the_server_interleaved(runs):
    records = read_jsonl(runs["together"] / "generated.jsonl")
    family_of_seed = {r["meta"]["seed"]: r["task_type"] for r in records}
    # generate's requests, in the order they arrived (brainstorm's carry no item's seed)
    order = [family_of_seed[r.body["seed"]] for r in runs["sent"] if r.body.get("seed") in family_of_seed]
    assert sorted(order) == sorted(r["task_type"] for r in records), "one request an item, no fault"
    switches = sum(a != b for a, b in zip(order, order[1:]))
    assert switches > 2 * len(FAMILIES), f"families in turns, not one after another: {order}"
    for i, a in enumerate(FAMILIES):
        for b in FAMILIES[i + 1:]:
            last_a = max(n for n, f in enumerate(order) if f == a)
            first_b = min(n for n, f in enumerate(order) if f == b)
            assert first_b < last_a, f"{b} began before {a} was done"


def test_the_interleaved_run_ends_as_the_families_run_one_by_one(runs):
    together = read_jsonl(runs["together"] / "generated.jsonl")
    reference = _reference(runs)
    assert [r["id"] for r in together] == [r["id"] for r in reference], "item order: family by family"
    assert _stable(together) == _stable(reference)
    assert read_jsonl(runs["together"] / "failed.jsonl") == []
    report = json.loads((runs["together"] / "report.json").read_text())
    alone = {f: json.loads((runs["alone"][f] / "report.json").read_text())["families"][f] for f in FAMILIES}
    assert list(report["families"]) == list(FAMILIES)
    # per family: its own records, tokens, and the requests its own items (and brainstorm) sent
    assert _families_of(report) == _families_of({"families": alone})
    assert report["counts"]["ok"] == len(reference) == 4 * len(FAMILIES)


def test_a_killed_interleaved_run_resumes_without_loss_or_duplicates(runs, servers):
    """What a kill mid-run leaves: some records of every family, in arrival order, and half a
    line. The rerun asks only for the lost items and ends with the reference, each record once."""
    out = runs["tmp"] / "killed"
    shutil.copytree(runs["together"], out)
    path = out / "generated.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = lines[1::2]  # every other item lost, from every family
    path.write_text("".join(reversed(kept)) + lines[0][:40], encoding="utf-8")
    for name in ("report.json", ".curate-done.json"):  # a killed run writes none
        (out / name).unlink()
    _generate(out, [servers[0].base_url])
    after = read_jsonl(path)
    assert [r["id"] for r in after] == [r["id"] for r in _reference(runs)]
    assert _stable(after) == _stable(_reference(runs))
    assert [json.loads(line) for line in kept] == [r for r in after if r["id"] in {json.loads(x)["id"] for x in kept}]
    report = json.loads((out / "report.json").read_text())
    assert report["counts"]["resumed"] == len(kept) and report["counts"]["ok"] == len(lines) - len(kept)


def test_two_client_processes_on_ray_write_the_same_records(runs, servers, tmp_path):
    pytest.importorskip("ray")
    out = tmp_path / "ray"
    before = [len(s.chat_requests) for s in servers]
    _generate(out, [s.base_url for s in servers], "--executor", "ray", "--workers", "2")
    assert all(len(s.chat_requests) > n for s, n in zip(servers, before)), "each shard asked its own server"
    records = read_jsonl(out / "generated.jsonl")
    assert [r["id"] for r in records] == [r["id"] for r in _reference(runs)]
    assert _stable(records) == _stable(_reference(runs))
    assert not (out / PARTS).exists(), "the parts were folded in"
    report = json.loads((out / "report.json").read_text())
    assert _families_of(report) == _families_of(json.loads((runs["together"] / "report.json").read_text()))
    run = json.loads((out / "run.json").read_text())
    assert run["params"]["executor"] == {"kind": "ray", "shards": 2}
    assert {"shards_start_s", "queue_s"} <= set(run["timings"])


def test_parts_a_killed_sharded_run_left_are_folded_in_once(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / ".curate-started.json").write_text(json.dumps({"fingerprint": "f1"}))
    (out / "generated.jsonl").write_text('{"id":"a"}\n{"id":"b"}\n{"id":"c', encoding="utf-8")  # a kill mid-merge
    (out / "failed.jsonl").write_text('{"id":"x"}\n', encoding="utf-8")
    gen0, bad0 = part_paths(out, 0)
    gen1, bad1 = part_paths(out, 1)
    gen0.parent.mkdir()
    (out / PARTS / "fingerprint.json").write_text(json.dumps({"fingerprint": "f1"}))
    gen0.write_text('{"id":"b"}\n{"id":"c","q":"é"}\n{"id":"d"}\n{"id":"half', encoding="utf-8")
    gen1.write_text('{"id":"e"}\n', encoding="utf-8")
    bad1.write_text('{"id":"x"}\n{"id":"y"}\n', encoding="utf-8")
    assert merge_parts(out) == 4  # c, d, e; y
    assert read_jsonl(out / "generated.jsonl") == [{"id": "a"}, {"id": "b"}, {"id": "c", "q": "é"}, {"id": "d"},
                                                     {"id": "e"}]
    assert read_jsonl(out / "failed.jsonl") == [{"id": "x"}, {"id": "y"}]
    assert not (out / PARTS).exists() and merge_parts(out) == 0
    # parts of a run with other options (another fingerprint) are dropped unread
    gen0.parent.mkdir()
    (out / PARTS / "fingerprint.json").write_text(json.dumps({"fingerprint": "f0"}))
    gen0.write_text('{"id":"old"}\n', encoding="utf-8")
    assert merge_parts(out) == 0 and not (out / PARTS).exists()
    assert [r["id"] for r in read_jsonl(out / "generated.jsonl")] == ["a", "b", "c", "d", "e"]


def test_servers_and_items_are_dealt_to_shards():
    assert shard_servers(["u0", "u1", "u2"], 2, 8) == [(["u0", "u2"], 8), (["u1"], 8)]
    # fewer servers than shards: shards share a server and split its concurrency
    assert shard_servers(["u0", "u1"], 3, 8) == [(["u0"], 4), (["u1"], 8), (["u0"], 4)]
    assert deal(list(range(6)), [1, 1]) == [[0, 2, 4], [1, 3, 5]]
    assert deal(list(range(6)), [2, 1]) == [[0, 1, 3, 4], [2, 5]]


def test_the_embedded_model_is_asked_from_one_process(tmp_path, monkeypatch):
    from curate.generate.stage import GenerateOptions, _client_processes

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    opts = GenerateOptions(tasks=("sts",), out=str(tmp_path), executor=Executor("ray", 2))
    assert _client_processes(opts).shards == 1
    opts.llm.base_urls = ("http://127.0.0.1:1/v1",)
    assert _client_processes(opts).shards == 2

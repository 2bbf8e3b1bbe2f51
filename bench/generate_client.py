#!/usr/bin/env python
"""Does curate's LLM path keep up with the bare ``openai`` client?

    .venv/bin/python bench/generate_client.py               # both scenarios, 3 runs each
    .venv/bin/python bench/generate_client.py --requests 500 --runs 1

Both arms run as whole processes against the same scripted server (tests/fake_llm_server.py)
with the same number of requests in flight:

* ``bare``: a short script with ``openai.AsyncOpenAI`` (its default transport), a semaphore and
  the same chat body curate sends (messages, JSON-schema response format, seed);
* ``curate``: ``curate generate --tasks-file ... --per-task 1 --concurrency C``: template
  rendering, the request cache, validation, records written to disk, the summary.

Scenarios: ``instant`` (the server answers at once: the client's own overhead decides;
target: curate >= 0.8 of bare), and ``latency`` (every answer takes 1 s, 64 in flight: the
ideal is 64 requests/s; target: curate >= 0.9 of it). Wall time includes process start-up.
Writes ``bench/results/generate_client.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fake_llm_server import fake_llm_server  # noqa: E402

BARE = r'''
import asyncio, json, sys
import openai

url, n, conc, marker = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
schema = json.loads(sys.argv[5])

async def main():
    client = openai.AsyncOpenAI(base_url=url, api_key="bench", max_retries=0, timeout=600)
    sem = asyncio.Semaphore(conc)
    async def one(i):
        async with sem:
            r = await client.chat.completions.create(
                model="fake", seed=i, temperature=1.0, max_tokens=2048,
                messages=[{"role": "user", "content": f"{marker} Write one example, number {i}."}],
                response_format={"type": "json_schema", "json_schema": {"name": "example", "schema": schema, "strict": True}})
            json.loads(r.choices[0].message.content)
    await asyncio.gather(*(one(i) for i in range(n)))
    await client.close()

asyncio.run(main())
'''


def timed(cmd: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{cmd[:4]} failed:\n{proc.stderr[-2000:]}")
    return wall


def scenario(name: str, marker: str, requests: int, conc: int, runs: int) -> dict:
    from curate.taskspec import load_spec

    schema = load_spec("short-long").generate.schema
    env = {**os.environ, "OPENAI_API_KEY": "bench", "NO_COLOR": "1"}
    env.pop("OPENAI_BASE_URL", None)
    out: dict = {"scenario": name, "requests": requests, "in_flight": conc, "bare_s": [], "curate_s": []}
    with tempfile.TemporaryDirectory() as tmp, fake_llm_server() as srv:
        tasks = Path(tmp) / "tasks.jsonl"
        tasks.write_text("".join(json.dumps({"task": f"{marker} Given question {i}, find passages."}) + "\n"
                                 for i in range(requests)))
        for run in range(runs):
            out["bare_s"].append(timed([sys.executable, "-c", BARE, srv.base_url, str(requests), str(conc),
                                        marker, json.dumps(schema)], env))
            folder = Path(tmp) / f"out-{run}"
            out["curate_s"].append(timed([sys.executable, "-m", "curate", "generate", "--task", "short-long",
                                          "-n", str(requests), "--per-task", "1", "--tasks-file", str(tasks),
                                          "--out", str(folder), "--base-url", srv.base_url, "--model", "fake",
                                          "--concurrency", str(conc)], env))
            made = sum(1 for _ in open(folder / "generated.jsonl"))
            if made != requests:
                sys.exit(f"curate wrote {made} records, expected {requests}")
    bare, cur = statistics.median(out["bare_s"]), statistics.median(out["curate_s"])
    out["bare_rps"] = round(requests / bare, 1)
    out["curate_rps"] = round(requests / cur, 1)
    out["curate_vs_bare"] = round(bare / cur, 3)
    if name == "latency":
        out["ideal_rps"] = conc / 1.0
        out["curate_vs_ideal"] = round(out["curate_rps"] / out["ideal_rps"], 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scenario", action="append", choices=["instant", "latency"], default=None)
    args = ap.parse_args()
    results = []
    for name in args.scenario or ["instant", "latency"]:
        marker, conc = ("", 256) if name == "instant" else ("FAULTS[slow1]", 64)
        r = scenario(name, marker, args.requests, conc, args.runs)
        results.append(r)
        print(json.dumps(r))
    path = REPO / "bench" / "results" / "generate_client.json"
    path.write_text(json.dumps({"cpus": os.cpu_count(), "results": results}, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

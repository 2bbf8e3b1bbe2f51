#!/usr/bin/env python
"""Does curate's LLM path keep up with the bare ``openai`` client?

    .venv/bin/python bench/generate_client.py               # both scenarios, 3 runs each
    .venv/bin/python bench/generate_client.py --requests 500 --runs 1
    .venv/bin/python bench/generate_client.py --scenario instant --vllm http://127.0.0.1:8000/v1

Both arms run as whole processes against the same server with the same number of requests
in flight:

* ``bare``: a short script with ``openai.AsyncOpenAI`` (its default transport) and a semaphore,
  sending the very request bodies curate sends (rendered here beforehand with curate's own
  planning and templates: same messages, JSON-schema response format, seed and parameters) and
  parsing each answer as JSON;
* ``curate``: ``curate generate --tasks-file ... --per-task 1 --concurrency C --max-reasks 0``
  (one request per item, as the bare script sends): template rendering, the request cache,
  validation, records written to disk, the summary.

Scenarios on the scripted server (tests/fake_llm_server.py): ``instant`` (answers at once: the
client's own overhead decides; target: curate >= 0.9 of bare) and ``latency`` (every answer
takes 1 s, 64 in flight: the ideal is 64 requests/s; target: curate >= 0.9 of it).
``--vllm URL`` adds the production question: both arms against a real vLLM server (e.g.
``curate serve`` on the CPU build), 16 requests with strings capped at 200 characters, after
one untimed pass that fills vLLM's prefix cache (the arms send the same seeded bodies, so the
second arm would otherwise skip the prompt work the first one paid for). Wall
time includes process start-up. Writes ``bench/results/generate_client.json``.
"""

from __future__ import annotations

import argparse
import contextlib
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

url, conc, bodies = sys.argv[1], int(sys.argv[2]), [json.loads(l) for l in open(sys.argv[3])]

async def main():
    client = openai.AsyncOpenAI(base_url=url, api_key="bench", max_retries=0, timeout=600)
    sem = asyncio.Semaphore(conc)
    async def one(body):
        async with sem:
            r = await client.chat.completions.create(**body)
            try:
                json.loads(r.choices[0].message.content, strict=False)
            except json.JSONDecodeError:
                bad.append(1)
    bad = []
    await asyncio.gather(*(one(b) for b in bodies))
    await client.close()
    print(len(bad))

asyncio.run(main())
'''


def request_bodies(tasks: Path, n: int, model: str, max_chars: int | None) -> list[dict]:
    """The bodies ``curate generate`` sends for these tasks (its planning, draws and templates)."""
    from curate.generate.brainstorm import load_tasks
    from curate.generate.examples import example_task, plan_items
    from curate.llm.taskspec import load_spec

    spec = load_spec("short-long")
    step = spec.generate
    task = example_task(spec, max_chars=max_chars)
    bodies = []
    for item in plan_items(spec, load_tasks(tasks, spec.family), n, 0, None, max_chars):
        variables = step.variables(item.seed, None)
        variables.update(task=item.task.task, n_negatives=spec.n_negatives, task_type=spec.family)
        bodies.append({"model": model, "messages": task.prompt(variables).messages, "seed": item.seed, **task.params,
                       "response_format": {"type": "json_schema",
                                           "json_schema": {"name": task.name, "schema": task.schema, "strict": True}}})
    return bodies


def timed(cmd: list[str], env: dict) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{cmd[:4]} failed:\n{proc.stderr[-2000:]}")
    return wall, proc.stdout


def scenario(name: str, marker: str, requests: int, conc: int, runs: int, url: str | None = None,
             model: str = "fake", max_chars: int | None = None) -> dict:
    env = {**os.environ, "OPENAI_API_KEY": "bench", "NO_COLOR": "1"}
    env.pop("OPENAI_BASE_URL", None)
    out: dict = {"scenario": name, "requests": requests, "in_flight": conc, "bare_s": [], "curate_s": []}
    with tempfile.TemporaryDirectory() as tmp, (contextlib.nullcontext() if url else fake_llm_server()) as srv:
        url = url or srv.base_url
        tasks = Path(tmp) / "tasks.jsonl"
        tasks.write_text("".join(json.dumps({"task": f"{marker} Given question {i}, find passages."}) + "\n"
                                 for i in range(requests)))
        bodies = Path(tmp) / "bodies.jsonl"
        bodies.write_text("".join(json.dumps(b) + "\n" for b in request_bodies(tasks, requests, model, max_chars)))
        if name == "vllm":  # fill vLLM's prefix cache first, so neither timed arm pays for it alone
            timed([sys.executable, "-c", BARE, url, str(conc), str(bodies)], env)
        for run in range(runs):
            wall, printed = timed([sys.executable, "-c", BARE, url, str(conc), str(bodies)], env)
            out["bare_s"].append(wall)
            out["bare_not_json"] = int(printed.split()[-1])
            folder = Path(tmp) / f"out-{run}"
            out["curate_s"].append(timed([sys.executable, "-m", "curate", "generate", "--task", "short-long",
                                          "-n", str(requests), "--per-task", "1", "--tasks-file", str(tasks),
                                          "--out", str(folder), "--base-url", url, "--model", model,
                                          "--concurrency", str(conc), "--max-reasks", "0",
                                          *(["--max-chars", str(max_chars)] if max_chars else [])], env)[0])
            made = sum(1 for _ in open(folder / "generated.jsonl"))
            failed = sum(1 for _ in open(folder / "failed.jsonl")) if (folder / "failed.jsonl").exists() else 0
            if made + failed != requests:
                sys.exit(f"curate ended {made + failed} items, expected {requests}")
            out["curate_failed"] = failed
    bare, cur = statistics.median(out["bare_s"]), statistics.median(out["curate_s"])
    out["bare_rps"] = round(requests / bare, 2)
    out["curate_rps"] = round(requests / cur, 2)
    out["curate_vs_bare"] = round(bare / cur, 3)
    if name == "latency":
        out["ideal_rps"] = conc / 1.0
        out["curate_vs_ideal"] = round(out["curate_rps"] / out["ideal_rps"], 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scenario", action="append", choices=["instant", "latency", "vllm"], default=None,
                    help="Default: instant and latency, plus vllm with --vllm.")
    ap.add_argument("--vllm", default=None, metavar="URL", help="Also compare both arms against this vLLM server.")
    ap.add_argument("--vllm-model", default="smollm2-135m-instruct")
    ap.add_argument("--vllm-requests", type=int, default=16)
    args = ap.parse_args()
    names = args.scenario or ["instant", "latency"] + (["vllm"] if args.vllm else [])
    if "vllm" in names and not args.vllm:
        sys.exit("--scenario vllm needs --vllm URL")
    path = REPO / "bench" / "results" / "generate_client.json"
    # scenarios not run now keep their last figures
    results = {r["scenario"]: r for r in json.loads(path.read_text())["results"]} if path.exists() else {}
    for name in names:
        if name == "vllm":
            r = scenario("vllm", "", args.vllm_requests, args.vllm_requests, 1, url=args.vllm,
                         model=args.vllm_model, max_chars=200)
        else:
            marker, conc = ("", 256) if name == "instant" else ("FAULTS[slow1]", 64)
            r = scenario(name, marker, args.requests, conc, args.runs)
        r["date"] = time.strftime("%Y-%m-%d")
        results[name] = r
        print(json.dumps(r))
    path.write_text(json.dumps({"cpus": os.cpu_count(), "results": list(results.values())}, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

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

``--scenario shards`` asks whether more client processes help (``--executor ray``): two scripted
servers, each its own process, answering at once (256 in flight per server), and the same
requests sent by the bare client (one process over both servers, and two processes of one server
each), by ``curate generate`` in one process, and by ``curate generate --executor ray --workers 2``
(two client processes, one server each). Requests per second over each arm's whole process, and
for curate also over its queue alone (``run.json``'s ``queue_s``: no start-up, no Ray start).
Writes ``bench/results/generate_shards.json``.
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

urls, conc, bodies = sys.argv[1].split(","), int(sys.argv[2]), [json.loads(l) for l in open(sys.argv[3])]
part, parts = (int(x) for x in (sys.argv[4] if len(sys.argv) > 4 else "0/1").split("/"))
bodies = bodies[part::parts]

async def main():
    # one client and `conc` in flight per server; body i goes to server i mod len(urls)
    clients = [openai.AsyncOpenAI(base_url=u, api_key="bench", max_retries=0, timeout=600) for u in urls]
    sems = [asyncio.Semaphore(conc) for _ in urls]
    async def one(i, body):
        async with sems[i % len(urls)]:
            r = await clients[i % len(urls)].chat.completions.create(**body)
            try:
                json.loads(r.choices[0].message.content, strict=False)
            except json.JSONDecodeError:
                bad.append(1)
    bad = []
    await asyncio.gather(*(one(i, b) for i, b in enumerate(bodies)))
    for c in clients:
        await c.close()
    print(len(bad))

asyncio.run(main())
'''


def request_bodies(tasks: Path, n: int, model: str, max_chars: int | None) -> list[dict]:
    """The bodies ``curate generate`` sends for these tasks (its planning, draws and templates)."""
    from curate.generate.brainstorm import load_tasks
    from curate.generate.examples import Planning, example_task, plan_items
    from curate.llm.taskspec import load_spec

    spec = load_spec("short-long")
    step = spec.generate
    task = example_task(spec, max_chars=max_chars)
    bodies = []
    for item in plan_items(spec, load_tasks(tasks, spec.family), Planning(n, 0, max_chars=max_chars)):
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


@contextlib.contextmanager
def server_processes(n: int):
    """``n`` scripted servers, each in a process of its own (not threads of this one, whose
    interpreter lock would make them the limit); yields their base URLs."""
    procs = [subprocess.Popen([sys.executable, "-m", "tests.fake_llm_server", "--port", "0"], cwd=REPO,
                              stdout=subprocess.PIPE, text=True) for _ in range(n)]
    try:
        yield [p.stdout.readline().split()[-1] for p in procs]  # "fake LLM server on URL"
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=10)


def curate_run(folder: Path, tasks: Path, requests: int, urls: list[str], conc: int, env: dict,
               *extra: str) -> tuple[float, dict]:
    """One ``curate generate`` of ``requests`` items over ``urls``: (process wall, its run.json timings)."""
    wall, _ = timed([sys.executable, "-m", "curate", "generate", "--task", "short-long", "-n", str(requests),
                     "--per-task", "1", "--tasks-file", str(tasks), "--out", str(folder), "--model", "fake",
                     *(a for u in urls for a in ("--base-url", u)), "--concurrency", str(conc),
                     "--max-reasks", "0", *extra], env)
    made = sum(1 for _ in open(folder / "generated.jsonl"))
    if made != requests:
        sys.exit(f"curate wrote {made} records, expected {requests}")
    return wall, json.loads((folder / "run.json").read_text())["timings"]


def shards_scenario(requests: int, conc: int, runs: int) -> dict:
    """Two servers at zero latency: the bare client (1 and 2 processes) and curate (1 and 2)."""
    env = {**os.environ, "OPENAI_API_KEY": "bench", "NO_COLOR": "1"}
    env.pop("OPENAI_BASE_URL", None)
    out: dict = {"scenario": "shards", "requests": requests, "servers": 2, "in_flight_per_server": conc,
                 "bare_1_s": [], "bare_2_s": [], "curate_1_s": [], "curate_2_s": [],
                 "curate_1_queue_s": [], "curate_2_queue_s": [], "curate_2_ray_start_s": []}
    with tempfile.TemporaryDirectory() as tmp, server_processes(2) as urls:
        tasks = Path(tmp) / "tasks.jsonl"
        tasks.write_text("".join(json.dumps({"task": f"Given question {i}, find passages."}) + "\n"
                                 for i in range(requests)))
        bodies = Path(tmp) / "bodies.jsonl"
        bodies.write_text("".join(json.dumps(b) + "\n" for b in request_bodies(tasks, requests, "fake", None)))
        for run in range(runs):
            out["bare_1_s"].append(timed([sys.executable, "-c", BARE, ",".join(urls), str(conc), str(bodies)], env)[0])
            t0 = time.perf_counter()  # two bare processes at once, one server and half the bodies each
            procs = [subprocess.Popen([sys.executable, "-c", BARE, u, str(conc), str(bodies), f"{k}/2"], cwd=REPO,
                                      env=env, stdout=subprocess.DEVNULL) for k, u in enumerate(urls)]
            if any(p.wait() for p in procs):
                sys.exit("a bare process failed")
            out["bare_2_s"].append(time.perf_counter() - t0)
            for n, extra in ((1, ()), (2, ("--executor", "ray", "--workers", "2"))):
                wall, timings = curate_run(Path(tmp) / f"out-{n}-{run}", tasks, requests, urls, conc, env, *extra)
                out[f"curate_{n}_s"].append(wall)
                out[f"curate_{n}_queue_s"].append(timings["queue_s"])
                if n == 2:
                    out["curate_2_ray_start_s"].append(timings["shards_start_s"])
    for key in ("bare_1", "bare_2", "curate_1", "curate_2"):
        out[f"{key}_rps"] = round(requests / statistics.median(out[f"{key}_s"]), 2)
    for n in (1, 2):
        out[f"curate_{n}_queue_rps"] = round(requests / statistics.median(out[f"curate_{n}_queue_s"]), 2)
    out["curate_2_vs_1"] = round(out["curate_2_rps"] / out["curate_1_rps"], 3)
    out["curate_2_vs_1_queue"] = round(out["curate_2_queue_rps"] / out["curate_1_queue_rps"], 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scenario", action="append", choices=["instant", "latency", "vllm", "shards"], default=None,
                    help="Default: instant and latency, plus vllm with --vllm; shards only when named.")
    ap.add_argument("--vllm", default=None, metavar="URL", help="Also compare both arms against this vLLM server.")
    ap.add_argument("--vllm-model", default="smollm2-135m-instruct")
    ap.add_argument("--vllm-requests", type=int, default=16)
    args = ap.parse_args()
    names = args.scenario or ["instant", "latency"] + (["vllm"] if args.vllm else [])
    if "vllm" in names and not args.vllm:
        sys.exit("--scenario vllm needs --vllm URL")
    if "shards" in names:
        names.remove("shards")
        r = shards_scenario(args.requests, 256, args.runs)
        r.update(date=time.strftime("%Y-%m-%d"), cpus=os.cpu_count())
        print(json.dumps(r))
        shards_path = REPO / "bench" / "results" / "generate_shards.json"
        shards_path.write_text(json.dumps(r, indent=1) + "\n")
        print(f"wrote {shards_path}")
        if not names:
            return
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

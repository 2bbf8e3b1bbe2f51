#!/usr/bin/env python
"""Does the adaptive in-flight limit keep up with the best fixed one, and with the bare client?

    .venv/bin/python bench/adaptive_concurrency.py                 # both parts, about 2.5 minutes
    .venv/bin/python bench/adaptive_concurrency.py --requests 400 --part load

``load``: a scripted server (tests/fake_llm_server.py, its own process) with ``--capacity 16``:
it works on 16 requests at once for ``--service`` seconds each (0.2 s) and queues the rest in
arrival order, so latency grows with the requests in flight beyond 16, as at a vLLM server whose
batch is full; it keeps working on a request its client has given up on, as a server that does
not notice the disconnect does. The client's ``--timeout`` is 2 s (ten service times). First a
sweep of fixed in-flight settings (the client with adaptation off: a limit whose floor is its
ceiling), then the adaptive client with the default ceiling (256). Each arm sends the same
``--requests`` requests through ``LLMClient.ask_json`` (default retries), at most the ceiling at
once, as ``curate generate``'s queue does. Target: the adaptive arm within 10% of the best fixed
setting's requests per second, with no failed request.

``instant``: the server answers at once (no capacity): the bare ``openai`` client (a semaphore of
256, the same request bodies, each answer parsed as JSON) and the adaptive client, each a process
of its own, one run side by side. Target: adaptive >= 0.9 of bare.

Writes ``bench/results/adaptive-concurrency.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
FIXED = (8, 16, 32, 64, 128, 256)

BARE = r'''
import asyncio, json, sys, time
import openai

url, conc, bodies = sys.argv[1], int(sys.argv[2]), [json.loads(l) for l in open(sys.argv[3])]

async def main():
    client = openai.AsyncOpenAI(base_url=url, api_key="bench", max_retries=0, timeout=600)
    sem, bad = asyncio.Semaphore(conc), []
    async def one(body):
        async with sem:
            r = await client.chat.completions.create(**body)
            try:
                json.loads(r.choices[0].message.content, strict=False)
            except json.JSONDecodeError:
                bad.append(1)
    t0 = time.perf_counter()
    await asyncio.gather(*(one(b) for b in bodies))
    print(json.dumps({"s": time.perf_counter() - t0, "failed": len(bad)}))
    await client.close()

asyncio.run(main())
'''

CURATE = r'''
import asyncio, json, sys
sys.path.insert(0, sys.argv[4])
from bench.adaptive_concurrency import run_arm

url, conc, bodies = sys.argv[1], int(sys.argv[2]), [json.loads(l) for l in open(sys.argv[3])]
print(json.dumps(asyncio.run(run_arm(url, conc, [b["messages"] for b in bodies], timeout=600))))
'''


def messages(n: int, marker: str) -> list[list[dict]]:
    return [[{"role": "user", "content": f"{marker} Write a short text for item {i}."}] for i in range(n)]


def body(msgs: list[dict], seed: int) -> dict:
    """What ``ask_json`` sends for these messages (so the bare arm sends the very same bytes' worth)."""
    return {"model": "fake", "messages": msgs, "seed": seed,
            "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA,
                                                                        "strict": True}}}


async def run_arm(url: str, ceiling: int, asks: list[list[dict]], fixed: bool = False, timeout: float = 2.0,
                  backoff_base: float = 0.25) -> dict:
    """Send every ask through ``LLMClient`` (at most ``ceiling`` at once): seconds, failures, limits."""
    from curate.llm.client import ClientConfig, LLMClient
    from curate.llm.limiter import AdaptiveLimit

    client = LLMClient(ClientConfig(base_urls=[url], model="fake", api_key="bench", concurrency=ceiling,
                                    timeout=timeout, max_reasks=0, backoff_base=backoff_base))
    if fixed:  # adaptation off: the floor is the ceiling
        for ep in client._endpoints:
            ep.limiter = AdaptiveLimit(ceiling, floor=ceiling)
    gate = asyncio.Semaphore(ceiling)
    limits: list[int] = []

    async def one(i: int, msgs: list[dict]):
        async with gate:
            answer = await client.ask_json(msgs, SCHEMA, {}, seed=i)
            limits.append(client.in_flight_limit())
            return answer

    t0 = time.perf_counter()
    answers = await asyncio.gather(*(one(i, m) for i, m in enumerate(asks)))
    seconds = time.perf_counter() - t0
    await client.close()
    tail = limits[len(limits) // 4:]  # after the start
    return {"s": round(seconds, 3), "rps": round(len(asks) / seconds, 2), "failed": sum(not a.ok for a in answers),
            "timeouts": sum(h.startswith("timeout") for a in answers for h in a.history),
            "requests_sent": client.requests_sent,
            "limit_min": min(tail), "limit_max": max(tail), "limit_end": limits[-1]}


@contextlib.contextmanager
def server(*args: str):
    """A scripted server in a process of its own (the client's interpreter lock stays the client's)."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.fake_llm_server", "--port", "0", *args], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)
    try:
        yield proc.stdout.readline().split()[-1]  # "fake LLM server on URL"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def load_part(requests: int, capacity: int, service: float, timeout: float) -> dict:
    asks = messages(requests, f"FAULTS[slow{service}]")
    out: dict = {"requests": requests, "capacity": capacity, "service_s": service, "timeout_s": timeout,
                 "ideal_rps": round(capacity / service, 2), "fixed": {}}
    with server("--capacity", str(capacity)) as url:
        for conc in FIXED:
            r = asyncio.run(run_arm(url, conc, asks, fixed=True, timeout=timeout))
            out["fixed"][str(conc)] = r
            print(f"fixed {conc:>3}: {r}", flush=True)
        out["adaptive"] = r = asyncio.run(run_arm(url, 256, asks, timeout=timeout))
        print(f"adaptive (ceiling 256): {r}", flush=True)
    best = max(out["fixed"], key=lambda k: out["fixed"][k]["rps"])
    out["best_fixed"] = {"in_flight": int(best), "rps": out["fixed"][best]["rps"]}
    out["adaptive_vs_best_fixed"] = round(out["adaptive"]["rps"] / out["fixed"][best]["rps"], 3)
    out["met"] = out["adaptive_vs_best_fixed"] >= 0.9 and out["adaptive"]["failed"] == 0
    return out


def instant_part(requests: int, tmp: Path) -> dict:
    env = {**os.environ, "OPENAI_API_KEY": "bench"}
    env.pop("OPENAI_BASE_URL", None)
    bodies = tmp / "bodies.jsonl"
    bodies.write_text("".join(json.dumps(body(m, i)) + "\n" for i, m in enumerate(messages(requests, ""))))
    out: dict = {"requests": requests, "in_flight": 256}
    with server() as url:
        for arm, script in (("bare", BARE), ("adaptive", CURATE)):
            proc = subprocess.run([sys.executable, "-c", script, url, "256", str(bodies), str(REPO)], cwd=REPO,
                                  env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                sys.exit(f"{arm} failed:\n{proc.stderr[-2000:]}")
            r = json.loads(proc.stdout.splitlines()[-1])
            r["rps"] = round(requests / r["s"], 2)
            out[arm] = r
            print(f"instant {arm}: {r}", flush=True)
    out["adaptive_vs_bare"] = round(out["adaptive"]["rps"] / out["bare"]["rps"], 3)
    out["met"] = out["adaptive_vs_bare"] >= 0.9 and out["adaptive"]["failed"] == 0
    return out


def main() -> None:
    import tempfile

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=1000, help="Requests per arm of the load part.")
    ap.add_argument("--instant-requests", type=int, default=2000)
    ap.add_argument("--capacity", type=int, default=16)
    ap.add_argument("--service", type=float, default=0.2)
    ap.add_argument("--timeout", type=float, default=2.0)
    ap.add_argument("--part", action="append", choices=["load", "instant"], default=None)
    args = ap.parse_args()
    path = REPO / "bench" / "results" / "adaptive-concurrency.json"
    results = json.loads(path.read_text()) if path.exists() else {}  # parts not run now keep their figures
    for part in args.part or ["load", "instant"]:
        if part == "load":
            r = load_part(args.requests, args.capacity, args.service, args.timeout)
        else:
            with tempfile.TemporaryDirectory() as tmp:
                r = instant_part(args.instant_requests, Path(tmp))
        r.update(date=time.strftime("%Y-%m-%d"), cpus=os.cpu_count())
        results[part] = r
    path.write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps({k: {"met": v["met"], **{m: v[m] for m in ("adaptive_vs_best_fixed", "adaptive_vs_bare")
                                                if m in v}} for k, v in results.items()}))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

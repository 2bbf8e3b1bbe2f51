"""The estimates ``curate generate`` prints, against the time the run really took.

The scripted server answers every request after the same 0.5 s (``FAULTS[slow0.5]`` in each
task), 4 at once: 40 requests take about 10 waves of 0.5 s. The line printed once the first
answers are in must put the whole queue within a factor of 1.5 of the time it took; the line
printed before the first request must count the requests, their prompt tokens and the most
completion tokens they may take, with what that costs at the given price.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

from curate.core.estimate import CHARS_PER_TOKEN
from tests.generate.test_faults import BACKOFF_BASE, _env, make_specs
from tests.helpers import REPO

N, CONCURRENCY, LATENCY, PRICE = 40, 4, 0.5, 0.002
PLAN = re.compile(r"^generate: estimate ([\d,]+) requests, ~([\d,]+) prompt tokens, up to ([\d,]+) completion tokens "
                  r"\(up to ~\$([\d.,]+) at \$0\.002/1k\); time once the first answers are in$", re.M)
MEASURED = re.compile(r"^generate: estimate ~(\S+) in all for ([\d,]+) requests at ([\d.]+) requests/s measured "
                      r"\(about (\S+) left\), ~\$([\d.,]+) at \$0\.002/1k$", re.M)


def test_measured_estimate_is_within_half_again_of_the_real_time(srv, tmp_path):
    from curate.llm.taskspec import load_spec

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"task": s.text}) + "\n" for s in make_specs(*["slow0.5"] * 10)))
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "curate", "generate", "--task", "short-long", "--tasks-file", str(tasks),
           "-n", str(N), "--per-task", "4", "--out", str(out), "--model", "fake", "--base-url", srv.base_url,
           "--concurrency", str(CONCURRENCY), "--backoff-base", str(BACKOFF_BASE),
           "--price-per-1k-tokens", str(PRICE)]
    proc = subprocess.run(cmd, cwd=REPO, env=_env(tmp_path / "home"), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]

    family = json.loads((out / "report.json").read_text())["families"]["short-long"]
    assert family["counts"]["ok"] == N
    actual = family["wall_seconds"]
    assert actual >= N / CONCURRENCY * LATENCY * 0.9  # the server really was that slow

    planned = PLAN.search(proc.stderr)
    assert planned, proc.stderr[-3000:]
    estimate = family["estimate"]
    max_tokens = load_spec("short-long").generate.params["max_tokens"]
    assert int(planned[1].replace(",", "")) == estimate["requests"] == N
    assert int(planned[3].replace(",", "")) == estimate["completion_tokens_max"] == N * max_tokens
    prompt_chars = sum(len(m["content"]) for r in srv.chat_requests for m in r.body["messages"])
    assert estimate["prompt_tokens"] == int(planned[2].replace(",", ""))
    assert abs(estimate["prompt_tokens"] - prompt_chars / CHARS_PER_TOKEN) <= 0.05 * prompt_chars / CHARS_PER_TOKEN

    measured = MEASURED.search(proc.stderr)
    assert measured, proc.stderr[-3000:]
    assert proc.stderr.index(planned[0]) < proc.stderr.index(measured[0])
    assert 1 / 1.5 <= estimate["seconds"] / actual <= 1.5, (estimate, actual)
    assert family["cost"] == round((family["tokens"]["prompt"] + family["tokens"]["completion"]) / 1000 * PRICE, 4)
    assert estimate["cost"] is not None and 1 / 1.5 <= estimate["cost"] / family["cost"] <= 1.5
    print(f"\n{planned[0]}\n{measured[0]}\nestimate {estimate['seconds']} s, actual {actual} s")


def test_a_price_is_written_only_when_given(srv, tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"task": s.text}) + "\n" for s in make_specs("ok")))
    params = {}
    for name, extra in (("plain", []), ("priced", ["--price-per-1k-tokens", "0.5"])):
        cmd = [sys.executable, "-m", "curate", "generate", "--task", "short-long", "--tasks-file", str(tasks),
               "-n", "1", "--out", str(tmp_path / name), "--model", "fake", "--base-url", srv.base_url, *extra]
        proc = subprocess.run(cmd, cwd=REPO, env=_env(tmp_path / "home"), capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        params[name] = json.loads((tmp_path / name / "run.json").read_text())["params"]["llm"]
        report = json.loads((tmp_path / name / "report.json").read_text())["families"]["short-long"]
        assert ("cost" in report) == bool(extra)
    assert "price_per_1k_tokens" not in params["plain"]  # the params an unpriced run wrote before the option
    assert params["priced"].pop("price_per_1k_tokens") == 0.5 and params["priced"] == params["plain"]

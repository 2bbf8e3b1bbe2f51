#!/usr/bin/env python
"""Does `curate report` stay fast on a run of a million records?

    .venv/bin/python bench/report_scale.py                      # 1,000,000 kept, 250,000 dropped
    .venv/bin/python bench/report_scale.py --kept 100000 --dropped 25000

Builds a pipeline-shaped run folder of synthetic records (generate/generated.jsonl with every
record, filter/rejected.jsonl with the drops, mine/mined.jsonl with the kept records and four
mined negatives each, the stages' report.json and run.json, pipeline.json), then times:

* ``build``: `curate report RUN` as a whole process (reads every file once to count and sample,
  joins the sampled drops with their records);
* ``load``: headless Chromium (Debian's chromium, Selenium) opening the page from disk until the
  record browser has drawn, three times, and a search over the sample.

The baseline beside it: the bytes of the run's JSONL files against the page's bytes. Writes
``bench/results/report_scale.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORDS = ("protein cell gene therapy dose trial patient risk blood brain heart virus vaccine model data signal "
         "river climate ocean carbon energy market price policy court law school memory language").split()


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def build_run(folder: Path, kept: int, dropped: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    for name in ("generate", "filter", "mine", "export"):
        (folder / name).mkdir(parents=True, exist_ok=True)
    total = kept + dropped
    drop_every = total / dropped if dropped else float("inf")
    reasons = ("query-mostly-from-positive", "round-trip", "near-duplicate")
    n_kept = n_drop = 0
    with open(folder / "generate" / "generated.jsonl", "w") as gen, \
            open(folder / "filter" / "filtered.jsonl", "w") as filt, \
            open(folder / "filter" / "rejected.jsonl", "w") as rej, \
            open(folder / "mine" / "mined.jsonl", "w") as mined:
        next_drop = drop_every / 2
        for i in range(total):
            rid = f"{i:016x}"
            rec = {"id": rid, "task_type": "from-corpus", "task": "Given a query, retrieve passages that answer it.",
                   "query": _text(rng, 8), "positive": _text(rng, 60), "positive_id": f"doc{i}", "negatives": [],
                   "scores": {}, "meta": {"seed": i}}
            line = json.dumps(rec) + "\n"
            gen.write(line)
            if i >= next_drop and n_drop < dropped:
                next_drop += drop_every
                n_drop += 1
                reason = reasons[i % 3]
                rej.write(json.dumps({"id": rid, "stage": "filter", "reason": reason, "step": "heuristics",
                                      "target": "record", "detail": {"rank": rng.randint(2, 40)}}) + "\n")
                continue
            n_kept += 1
            filt.write(line)
            pos = rng.uniform(0.5, 0.9)
            rec["negatives"] = [{"text": _text(rng, 50), "level": None, "teacher_score": pos - rng.uniform(0.05, 0.4),
                                 "source": "mined", "doc_id": f"doc{rng.randrange(total)}"} for _ in range(4)]
            rec["teacher"] = {"model": "all-MiniLM-L6-v2", "positive": pos, "positive_rank": rng.choice((1, 1, 1, 2)),
                              "margin": pos - max(n["teacher_score"] for n in rec["negatives"]), "pool": total}
            mined.write(json.dumps(rec) + "\n")
    steps = [{"step": "heuristics", "records_in": total, "records_kept": n_kept,
              "records_dropped": {r: sum(1 for i in range(n_drop) if i % 3 == j) for j, r in enumerate(reasons)},
              "example": None}]
    pipeline = {"docs": "synthetic", "out": str(folder), "stages": dict.fromkeys(("generate", "filter", "mine", "export"), "ran"),
                "stopped": None, "documents": {"files": 1, "documents": total, "passages": total, "skipped": 0, "replaced": 0},
                "generate": {"sampled": total, "ok": total, "failed": 0, "failure_reasons": {}},
                "filter": {"records_in": total, "records_kept": n_kept, "steps": steps, "plots": []},
                "mine": {"records_in": n_kept, "records": n_kept, "negatives": 4 * n_kept, "negatives_per_record": 4.0, "plots": []},
                "relabel": None,
                "export": {"folder": str(folder / "export"), "rows": n_kept,
                           "formats": {"sentence-transformers": {"train": n_kept - n_kept // 20, "dev": n_kept // 20, "files": []}}}}
    (folder / "pipeline.json").write_text(json.dumps(pipeline, indent=1))
    reports = {
        "generate": {"counts": {"requested": total, "ok": total}, "families": {"from-corpus": {
            "tokens": {"prompt": 330 * total, "completion": 60 * total}, "requests_sent": total}}},
        "filter": {"input": str(folder / "generate" / "generated.jsonl"), "records_in": total, "records_kept": n_kept,
                   "steps": steps},
        "mine": {"input": {"path": str(folder / "filter" / "filtered.jsonl")}, "queries_in": n_kept, "queries_out": n_kept,
                 "negatives": 4 * n_kept, "negatives_per_query": {"mean": 4.0}},
        "export": {"counts": {"train": n_kept - n_kept // 20, "dev": n_kept // 20, "level": {}, "task_type": {"from-corpus": n_kept}},
                   "parameters": {"instruction": "none", "curriculum": "none"}, "outputs": {"sentence-transformers": []},
                   "hub": {"license": "unknown", "language": ["en"]}},
    }
    for name, report in reports.items():
        (folder / name / "report.json").write_text(json.dumps(report))
        (folder / name / "run.json").write_text(json.dumps({"stage": name, "seconds": 1.0}))


def load_times(page: Path, runs: int) -> dict[str, object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1300,1800"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        loads = []
        for _ in range(runs):
            driver.get("about:blank")
            t = time.perf_counter()
            driver.get(page.as_uri())  # returns after the load event; the page's script runs before it
            driver.find_element(By.CSS_SELECTOR, "#list .rec")
            loads.append(time.perf_counter() - t)
        shown = driver.find_element(By.ID, "shown")
        total = int(shown.get_attribute("data-matching"))
        t = time.perf_counter()
        driver.find_element(By.ID, "search").send_keys("protein cell")
        while shown.get_attribute("data-matching") == str(total) and time.perf_counter() - t < 30:
            time.sleep(0.01)
        search = time.perf_counter() - t
        return {"load_s": [round(x, 3) for x in loads], "load_s_median": round(statistics.median(loads), 3),
                "search_s": round(search, 3), "records_in_page": total,
                "matching_after_search": int(shown.get_attribute("data-matching"))}
    finally:
        driver.quit()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kept", type=int, default=1_000_000)
    ap.add_argument("--dropped", type=int, default=250_000)
    ap.add_argument("--work", default=str(REPO / "runs" / "report-scale"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "report_scale.json"))
    args = ap.parse_args()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    t = time.perf_counter()
    build_run(work, args.kept, args.dropped)
    made = time.perf_counter() - t
    jsonl = sum(p.stat().st_size for p in work.rglob("*.jsonl"))
    builds = []
    for _ in range(args.runs):
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "curate", "report", str(work)], capture_output=True, text=True)
        builds.append(time.perf_counter() - t)
        if proc.returncode:
            sys.exit(proc.stderr)
    page = work / "report.html"
    result = {"kept": args.kept, "dropped": args.dropped, "jsonl_bytes": jsonl, "page_bytes": page.stat().st_size,
              "synthesis_s": round(made, 1), "build_s": [round(x, 2) for x in builds],
              "build_s_median": round(statistics.median(builds), 2), **load_times(page, args.runs)}
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

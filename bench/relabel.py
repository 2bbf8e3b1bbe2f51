#!/usr/bin/env python
"""Precision and recall of ``relabel``'s promotions against labels the miner never saw.

    .venv/bin/python bench/relabel.py [--grid bench/grids/nfcorpus-relabel.yaml] [--out runs/ablate-relabel]
        [--llm-queries 40]

The grid (NFCorpus train, 200 queries, ``shown_positives: 1``) shows each query its most
relevant labelled positive and holds the others back. ``curate mine`` then meets the held-back
positives as unlabelled documents; some come back among the mined negatives, which is the false
negative relabelling exists for. This script relabels the same mined set twice:

* with a scripted judge that answers from the held-back labels (the plumbing: it must reach
  precision 1 and recall 1, or a verdict is lost or misapplied on the way);
* with the LLM the grid's relabel arms use (the embedded bundled model unless
  ``OPENAI_BASE_URL`` is set), on the first ``--llm-queries`` records (the bundled model is slow
  on long NFCorpus abstracts; ``curate ablate`` on the same grid and ``--out`` relabels them all
  and trains on them).

For each judge: verdict counts, precision (promoted candidates that are held-back positives, over
all promoted) and recall (held-back positives among the candidates that were promoted), beside the
base rate (the share of candidates that are held-back positives: the precision of promoting all).
Writes bench/results/relabel.json.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PROMOTED = ("relevant", "better")


def held_back(grid) -> dict[str, set[str]]:
    """Per training query: its labelled positives minus the one the grid showed."""
    from curate.flows.ablate.queries import _shown
    from curate.datasets.beir import read_qrels

    qrels = read_qrels(Path(grid.data) / "qrels" / f"{grid.split}.tsv")
    return {q: {d for d, r in labels.items() if r > 0} - set(_shown(labels, grid.shown_positives))
            for q, labels in qrels.items()}


def measure(records_path: Path, hidden: dict[str, set[str]]) -> dict:
    """Verdicts of every judged candidate against the held-back labels: those that stayed
    negatives carry theirs (``judges.relabel``), those that left are in ``rejected.jsonl``."""
    from curate.core.jsonl import read_jsonl
    from curate.core.records import read_records

    left: dict[str, list[dict]] = {}
    rejected = records_path.parent / "rejected.jsonl"
    for _, row in read_jsonl(rejected) if rejected.is_file() else []:
        if row.get("step") == "relabel" and isinstance(row.get("detail"), dict):
            left.setdefault(row["id"], []).append(row["detail"])
    c: Counter[str] = Counter()
    verdicts: Counter[str] = Counter()
    for rec in read_records(records_path):
        labels = hidden.get(str(rec.meta.get("query_id")), set())
        stayed = [{"doc_id": n.doc_id, **n.judges["relabel"]} for n in rec.negatives
                  if isinstance((n.judges or {}).get("relabel"), dict)]
        for v in [*left.get(rec.id, []), *stayed]:
            verdicts[v["verdict"]] += 1
            labelled, promoted = v["doc_id"] in labels, v["verdict"] in PROMOTED
            c["candidates"] += 1
            c["held_back"] += labelled
            c["promoted"] += promoted
            c["promoted_held_back"] += labelled and promoted
            c["kept_negative_held_back"] += labelled and v["verdict"] == "not_relevant"
    out = {**c, "verdicts": dict(verdicts)}
    out["precision"] = round(c["promoted_held_back"] / c["promoted"], 4) if c["promoted"] else None
    out["recall"] = round(c["promoted_held_back"] / c["held_back"], 4) if c["held_back"] else None
    out["base_rate"] = round(c["held_back"] / c["candidates"], 4) if c["candidates"] else None
    return out


def oracle_answer(grid, hidden: dict[str, set[str]]):
    """A relabel verdict from the labels, for a scripted judge: the query and the candidate are
    found by their text in the grid's data (the prompt holds the query and the candidate as
    ``curate mine`` wrote them), and the candidate is relevant when it is one of the query's
    held-back positives. A text it cannot place is ``unsure``."""
    from curate.core.jsonl import read_jsonl
    from curate.datasets.corpus import read_corpus

    queries = read_jsonl(Path(grid.data) / "queries.jsonl")
    qid_of = {str(obj.get("text", "")).strip(): str(obj.get("_id")) for _, obj in queries}
    doc_of: dict[str, str] = {}
    for doc_id, text in read_corpus(Path(grid.data) / "corpus.jsonl"):
        doc_of.setdefault(text.strip(), doc_id)
    pattern = re.compile(r"Query:\n(.*?)\n\nA document labelled.*?Candidate document:\n(.*?)\n\nChoose one verdict",
                         re.S)

    def answer(body):
        m = pattern.search(body["messages"][-1]["content"])
        if not m:
            return None
        qid, doc = qid_of.get(m.group(1).strip()), doc_of.get(m.group(2).strip())
        if qid is None or doc is None:
            return {"reason": "not in the data", "verdict": "unsure"}
        return {"reason": "from the labels",
                "verdict": "relevant" if doc in hidden.get(qid, set()) else "not_relevant"}

    return answer


def oracle(grid, mined: Path, out: Path, hidden: dict[str, set[str]]) -> Path:
    """``curate filter --recipe relabel`` on ``mined`` with a scripted judge that knows the labels."""
    from curate.core.stage import report_of, run_stage
    from curate.filter.main import STAGE as FILTER, FilterOptions
    from curate.llm.backend import LLMOptions
    from tests.fake_llm_server import fake_llm_server

    if report_of(out) is None:
        with fake_llm_server(responder=oracle_answer(grid, hidden)) as srv:
            run_stage(FILTER, FilterOptions(inp=str(mined), out=str(out), recipe="relabel",
                                            llm=LLMOptions(base_urls=(srv.base_url,), model="fake", max_retries=0)),
                      quiet=True)
    return FILTER.path(out)


def serve(grid, port: int) -> None:
    """The scripted judge on a fixed port until interrupted, for the grid arms whose relabel recipe
    names it (``bench/grids/recipes/relabel-oracle.yaml``): the upper bound of relabelling."""
    from tests.fake_llm_server import FakeLLMServer, serve_forever

    srv = FakeLLMServer(port=port, responder=oracle_answer(grid, held_back(grid))).start()
    print(f"scripted relabel judge for {grid.data} on {srv.base_url}", flush=True)
    serve_forever(srv)


def llm_sample(mined: Path, out: Path, queries: int) -> Path:
    """``curate filter --recipe relabel`` with the LLM (the embedded bundled model unless
    ``OPENAI_BASE_URL`` is set) on the first ``queries`` records of ``mined``."""
    from curate.core.jsonl import atomic_write_jsonl, read_jsonl
    from curate.core.stage import run_stage
    from curate.filter.main import STAGE as FILTER, FilterOptions
    from curate.llm.backend import LLMOptions

    out.mkdir(parents=True, exist_ok=True)
    sample = out / "sample.jsonl"
    atomic_write_jsonl(sample, [obj for _, (_, obj) in zip(range(queries), read_jsonl(mined))])
    run_stage(FILTER, FilterOptions(inp=str(sample), out=str(out), recipe="relabel",
                                    llm=LLMOptions(cache=str(out / "llm.sqlite"))), resume=True, quiet=True)
    return FILTER.path(out)


def main() -> None:
    from curate.flows.ablate.arms import cell_steps
    from curate.flows.ablate.cells import run_steps
    from curate.flows.ablate.grid import load_grid
    from curate.core.stage import report_of

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grid", default=str(REPO / "bench/grids/nfcorpus-relabel.yaml"))
    ap.add_argument("--out", default="runs/ablate-relabel", help="the --out of `curate ablate` on the same grid")
    ap.add_argument("--arm", default="relabel-all", help="the grid's arm whose mined set is relabelled")
    ap.add_argument("--llm-queries", type=int, default=40,
                    help="records the LLM judges (the first of the mined set; 0: the scripted judge only). "
                         "The bundled model judges about one candidate in 7 s on 2 idle cores.")
    ap.add_argument("--results", default=str(REPO / "bench/results/relabel.json"))
    ap.add_argument("--serve", type=int, metavar="PORT",
                    help="only serve the scripted judge of the grid's held-back labels on this port, "
                         "for the grid's relabel-oracle arms")
    args = ap.parse_args()

    grid = load_grid(args.grid)
    if args.serve:
        return serve(grid, args.serve)
    work = Path(args.out)
    arm = next(a for a in grid.arms if a.name == args.arm)
    hidden = held_back(grid)
    steps = cell_steps(grid, arm, grid.seeds[0], work)
    mine = next(step for step in steps if step.label == "mine")
    mined_path = mine.stage.path(run_steps(steps, work, upto="filter")["mine"].out)  # the arm's set before its filter
    result = {"grid": str(Path(args.grid).resolve().relative_to(REPO)), "queries": grid.queries,
              "shown_positives": grid.shown_positives, "arm": args.arm,
              "scripted_judge": measure(oracle(grid, mined_path, work / "relabel-oracle", hidden), hidden)}
    if args.llm_queries:
        started = time.perf_counter()
        judged = llm_sample(mined_path, work / f"relabel-llm-{args.llm_queries}", args.llm_queries)
        report = report_of(judged.parent)
        note = next(s for s in report["steps"] if s["step"] == "relabel")["notes"]
        result["llm_judge"] = {**measure(judged, hidden), "records": args.llm_queries, "judges": note.get("judges"),
                               "seconds_this_run": round(time.perf_counter() - started, 1)}
    Path(args.results).write_text(json.dumps(result, indent=2) + "\n")
    for name in ("scripted_judge", "llm_judge"):
        r = result.get(name)
        if r:
            print(f"{name:15} candidates {r.get('candidates', 0):4}  held back {r.get('held_back', 0):3}  "
                  f"promoted {r.get('promoted', 0):4}  precision {r['precision']}  recall {r['recall']}  "
                  f"base rate {r['base_rate']}  verdicts {r['verdicts']}")
    print(f"wrote {args.results}")


if __name__ == "__main__":
    main()

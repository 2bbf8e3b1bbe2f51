"""The shortcut audit's figures on SciFact (a few minutes on 2 cores; results in bench/results/audit.txt).

    .venv/bin/python bench/audit.py [--mined runs/sf/mined.jsonl] [--no-embeddings]

Cases, each a set of records built from SciFact passages (read from ../shared/data, never copied):

* control: positives and negatives are random SciFact passages (``source: mined``): nothing to find;
* cited: positives are the documents SciFact's training claims cite, negatives random passages;
* closing / half-closing: LLM-marked negatives ending with "I hope this helps!" (all / every other);
* short: LLM-marked negatives cut to their first 20 words;
* ``--mined``: a file ``curate mine`` wrote (e.g. SciFact train, bundled teacher), the real control;

then the ``shortcut`` step on half-closing (how many of the dropped were the planted ones), and
the audit's time on an export-sized set (every SciFact training claim, four families).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from curate.audit import AuditOptions, run_audit  # noqa: E402
from curate.core.records import Negative, Record, read_records  # noqa: E402
from curate.datasets.beir import load_beir  # noqa: E402
from curate.filter.base import STEPS, FilterContext, merge_params  # noqa: E402

SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"
CLOSING = " I hope this helps!"


def records(positives, pool, negative, rng, n_neg=3, family="short-long"):
    out = []
    for i, (pid, pos) in enumerate(positives):
        negs = []
        for k in range(n_neg):
            did, text = pool[rng.randrange(len(pool))]
            text, source = negative(text, k, i)
            negs.append(Negative(text=text, level=k + 1, source=source, doc_id=did if source == "mined" else None))
        out.append(Record(id=f"r{i}", task_type=family, task="t", query=f"q{i}", positive=pos, positive_id=pid,
                          negatives=negs))
    return out


def show(name, audit, seconds, out):
    for r in audit["comparisons"]:
        if r["level"] != "all" or r.get("same_as"):
            continue
        emb = (f" embedding {r['embedding_auc']:.3f} {r['embedding_interval']}" if "embedding_auc" in r else "")
        out.append(f"{name:13s} {r['comparison']:21s} n={r['n_a']}/{r['n_b']} char {r['char_auc']:.3f} "
                   f"{r['char_interval']}{emb} length_auc {r['length_auc']:.2f}")
    out.append(f"{'':13s} warnings {len(audit['warnings'])}, {seconds:.1f}s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mined")
    ap.add_argument("--no-embeddings", action="store_true")
    args = ap.parse_args()
    opts = AuditOptions(embeddings=not args.no_embeddings)
    data = load_beir(SCIFACT, "train")
    corpus = list(data.corpus.items())
    rng = random.Random(0)
    shuffled = corpus[:]
    rng.shuffle(shuffled)
    randoms = shuffled[:300]
    cited = list(dict.fromkeys((d, data.corpus[d]) for rel in data.qrels.values() for d in rel))[:300]
    pool = shuffled[300:]
    cases = {
        "control": records(randoms, pool, lambda t, k, i: (t, "mined"), rng),
        "cited": records(cited, pool, lambda t, k, i: (t, "mined"), rng),
        "closing": records(randoms, pool, lambda t, k, i: (t + CLOSING, "llm"), rng),
        "half-closing": records(randoms, pool, lambda t, k, i: (t + CLOSING if k % 2 == 0 else t, "llm"), rng),
        "short": records(randoms, pool, lambda t, k, i: (" ".join(t.split()[:20]), "llm"), rng),
    }
    if args.mined:
        cases["mined"] = read_records(args.mined)
    out = [f"# bench/audit.py ({'char n-grams' if args.no_embeddings else 'char n-grams + embeddings'}, "
           f"sample {opts.sample} a side, 5 folds; DeLong 95% intervals)"]
    for name, recs in cases.items():
        began = time.perf_counter()
        audit = run_audit(recs, opts)
        show(name, audit, time.perf_counter() - began, out)
    # the shortcut step: 300 records, 4 LLM-marked negatives, the phrase on 2 of them
    recs = records(randoms, pool, lambda t, k, i: (t + CLOSING if k < 2 else t, "llm"), rng, n_neg=4)
    ctx = FilterContext(out_dir=Path("."))
    ctx.step_name = "shortcut"
    began = time.perf_counter()
    STEPS.get("shortcut").fn(recs, merge_params("shortcut", {"against": "corpus", "share": 0.5}), ctx)
    dropped = [d for d in ctx.rejections if d.reason == "shortcut"]
    planted = sum(d.text.endswith(CLOSING) for d in dropped)
    note = ctx.notes["shortcut"]
    out.append(f"shortcut step (share 0.5, 2 of 4 negatives planted, {len(recs)} records): AUC {note['auc']:.3f}, "
               f"dropped {len(dropped)}, planted among them {planted} ({planted / max(1, len(dropped)):.1%}), "
               f"{time.perf_counter() - began:.1f}s")
    # export-sized: every training claim, its cited abstract, 4 random passages, four families
    families = ["short-long", "short-long", "long-short", "short-short", "sts"]
    big = []
    for i, (qid, rel) in enumerate(data.qrels.items()):
        negs = [Negative(text=pool[rng.randrange(len(pool))][1], level=lv) for lv in (1, 2, 3, 4)]
        big.append(Record(id=f"b{i}", task_type=families[i % len(families)], task="t", query=data.queries[qid],
                          positive=data.corpus[next(iter(rel))], negatives=negs))
    began = time.perf_counter()
    audit = run_audit(big, opts)
    out.append(f"export-sized ({len(big)} records, 4 families, {len(audit['comparisons'])} comparisons): "
               f"{time.perf_counter() - began:.1f}s")
    print("\n".join(out))


if __name__ == "__main__":
    main()

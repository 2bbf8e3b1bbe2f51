"""Calibrate the copy guard of the ``heuristics`` filter step (``copy_containment``, ``copy_ngram``).

The guard drops a query whose word n-grams mostly occur in its positive (title included). Its
threshold must keep real queries, which people wrote without copying, and drop the near-copies
an LLM writes. This script measures both on the BEIR folders under ``shared/data``:

* real queries: each query of every split against its qrels positives (score > 0), the
  document as ``title text`` (``curate.datasets.corpus.doc_text``). A query counts as dropped
  when ANY of its positives would drop it (the worst case: a record may carry any of them);
  pairs counts each (query, positive) pair;
* planted near-copies, built from SciFact documents with a title: a passage sentence with one
  word changed, the title put before a passage sentence, a sentence with its clauses swapped,
  "Question: " before the title, and a stretch of the passage with two words left out.

It prints the share of each that the guard drops at thresholds 0.3 .. 0.9 (n = 4, shorter
queries on smaller n-grams as the step does), the share of real queries too short to be judged,
and the real queries with the highest containment, and writes it all to
``bench/results/copy-guard.txt``. Seconds on one core; no model.

    .venv/bin/python bench/copy_guard.py [--data /work/shared/data] [--ngram 4]
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from curate.datasets.corpus import doc_text
from curate.dedup.copies import COPY_MIN_WORDS, containment
from curate.dedup.shingles import normalize
from curate.filter.steps.heuristics import DEFAULTS

THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
DATASETS = ("scifact", "nq-utd", "nfcorpus")
OUT = REPO / "bench" / "results" / "copy-guard.txt"


def load(folder: Path) -> tuple[dict[str, dict], dict[str, str], dict[str, list[str]]]:
    docs = {}
    with open(folder / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            docs[str(d["_id"])] = d
    queries = {}
    with open(folder / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            queries[str(q["_id"])] = q["text"]
    positives: dict[str, list[str]] = {}
    for split in sorted((folder / "qrels").glob("*.tsv")):
        with open(split, encoding="utf-8") as fh:
            rows = csv.reader(fh, delimiter="\t")
            next(rows, None)
            for qid, did, score in rows:
                if float(score) > 0 and qid in queries and did in docs and did not in positives.get(qid, []):
                    positives.setdefault(qid, []).append(did)
    return docs, queries, positives


def real(folder: Path, ngram: int, min_words: int) -> dict:
    """Each query against its positives; and, as stand-ins for real hard negatives, each other
    positive of the query against its first one (distinct documents on one subject)."""
    docs, queries, positives = load(folder)
    per_query, pairs, short, exact, top, others = [], [], 0, 0, [], []
    for qid, dids in positives.items():
        texts = [doc_text(docs[did]) for did in dids]
        first = texts[0]
        others.extend(c[0] for c in (containment(t, first, ngram, COPY_MIN_WORDS) for t in texts[1:]) if c)
        scores = [c[0] for c in (containment(queries[qid], t, ngram, min_words) for t in texts) if c]
        if not scores:
            short += 1
            continue
        q = normalize(queries[qid])
        exact += any(f" {q} " in f" {normalize(t)} " for t in texts)  # the older query-word-for-word-in-document check
        pairs.extend(scores)
        per_query.append(max(scores))
        top.append((max(scores), queries[qid]))
    top.sort(reverse=True)
    return {"queries": len(positives), "short": short, "per_query": per_query, "pairs": pairs,
            "exact": exact, "others": others, "top": top[:5]}


_CLAUSE = re.compile(r",\s+")


def sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if len(s.split()) >= 8]


def planted(folder: Path, k: int, seed: int = 0) -> dict[str, list[tuple[str, str]]]:
    """(near-copy, document) pairs of each kind, from ``k`` SciFact documents with a title."""
    docs, _, _ = load(folder)
    rng = random.Random(seed)
    chosen = rng.sample([d for d in docs.values() if d.get("title") and sentences(d["text"])], k)
    out: dict[str, list[tuple[str, str]]] = {name: [] for name in
                                             ("one word changed", "title added", "clauses swapped",
                                              "'Question:' + title", "two words left out")}
    for d in chosen:
        full, title = doc_text(d), d["title"].rstrip(".")
        sent = rng.choice(sentences(d["text"]))
        w = sent.split()
        i = rng.randrange(1, len(w) - 1)
        out["one word changed"].append((" ".join(w[:i] + ["notably"] + w[i + 1:]), full))
        out["title added"].append((f"{title} {sent}", full))
        parts = _CLAUSE.split(sent.rstrip("."), maxsplit=1)
        if len(parts) < 2:
            half = len(w) // 2
            parts = [" ".join(w[:half]), " ".join(w[half:])]
        out["clauses swapped"].append((f"{parts[1]}, {parts[0]}", full))
        out["'Question:' + title"].append((f"Question: {title}", full))
        j = rng.randrange(1, len(w) - 3)
        out["two words left out"].append((" ".join(w[:j] + w[j + 1:j + 3] + w[j + 4:]), full))
    return out


def share(scores: list[float], t: float) -> float:
    return sum(s >= t for s in scores) / len(scores) if scores else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--ngram", type=int, default=DEFAULTS["copy_ngram"])
    ap.add_argument("--min-words", type=int, default=DEFAULTS["query_copy_min_words"],
                    help="queries under this many words are never judged (query_copy_min_words)")
    ap.add_argument("--planted", type=int, default=200, help="SciFact documents to plant copies from")
    args = ap.parse_args()
    data = Path(args.data)
    head = "".join(f"{t:>7}" for t in THRESHOLDS)
    lines = [(f"copy guard: share dropped at containment >= threshold (word {args.ngram}-grams; a query of w < "
              f"{args.ngram + 1} words on max(2, w-1)-grams; under {args.min_words} words never judged)"),
             ("positives: qrels score > 0, all splits, document = title + text; a query counts as dropped when any "
              "of its positives drops it; 'short': queries never judged; 'exact': dropped by the older word-for-word "
              "check (query-word-for-word-in-document) already"), "",
             f"{'real queries':<34}{'n':>6}{'short':>7}{head}{'exact':>8}"]
    tops, negatives = [], []
    for name in DATASETS:
        folder = data / name
        if not (folder / "corpus.jsonl").is_file():
            lines.append(f"{name:<34}  (not found under {data})")
            continue
        r = real(folder, args.ngram, args.min_words)
        judged = len(r["per_query"])
        lines.append(f"{name + ' (queries)':<34}{judged:>6}{r['short']:>7}"
                     + "".join(f"{share(r['per_query'], t):>7.1%}" for t in THRESHOLDS)
                     + f"{r['exact'] / max(judged, 1):>8.1%}")
        negatives.append((name, r["others"]))
        lines.append(f"{name + ' (pairs)':<34}{len(r['pairs']):>6}{'':>7}"
                     + "".join(f"{share(r['pairs'], t):>7.1%}" for t in THRESHOLDS))
        tops.append((name, r["top"]))
    lines += ["", f"{'negatives: other positives vs first':<34}{'n':>6}{'':>7}{head}"]
    for name, scores in negatives:
        lines.append(f"{name:<34}{len(scores):>6}{'':>7}" + "".join(f"{share(scores, t):>7.1%}" for t in THRESHOLDS))
    sf = data / "scifact"
    if (sf / "corpus.jsonl").is_file():
        lines += ["", f"{'planted near-copies (SciFact)':<34}{'n':>6}{'':>7}{head}"]
        for kind, pairs in planted(sf, args.planted).items():
            scores = [c[0] for c in (containment(q, d, args.ngram) for q, d in pairs) if c is not None]
            lines.append(f"{kind:<34}{len(pairs):>6}{'':>7}" + "".join(f"{share(scores, t):>7.1%}"
                                                                     for t in THRESHOLDS))
    lines += ["", "real queries with the highest containment (max over their positives):"]
    for name, top in tops:
        for score, query in top:
            lines.append(f"  {name:<9} {score:.3f}  {query[:90]}")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()

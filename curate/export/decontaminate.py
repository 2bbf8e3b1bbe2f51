"""Drop records whose query or positive near-duplicates an evaluation query or document.

Signatures and LSH are the filter stage's (``curate.dedup.minhash``): MinHash over word n-gram
shingles, candidates by LSH bands, each verified with the estimated Jaccard. Every query and
document of each BEIR folder (``queries.jsonl`` + ``corpus.jsonl``, all splits) counts as
evaluation text.  ``FOLDER:SPLIT`` narrows that to the split's queries and the documents its
qrels judge relevant: BEIR datasets share one corpus between their train and test splits, so
decontaminating train data against the whole corpus would drop every record whose positive is
a corpus document, while what must not leak is the test queries and their answers.

Shingles are single words by default (``ngram=1``), not the filter's 3-grams: evaluation
queries are short (SciFact claims are about 12 words) and one changed word in a 12-word
query already pulls its 3-gram Jaccard down to about 0.5, so a lightly edited copy would slip
through; its word-set Jaccard stays near 0.85. For long texts a word-set Jaccard of 0.8 still
means nearly the same text: two abstracts on one topic share far fewer of their words.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from curate.datasets.beir import load_beir
from curate.core.errors import CurateError
from curate.export.inputs import Item
from curate.dedup.minhash import signatures, similar_pairs

FIELDS = ("query", "positive")


def _eval_texts(spec: str | Path) -> tuple[list[str], list[str]]:
    """(labels "query:<id>" / "doc:<id>", texts) of the evaluation texts of ``FOLDER[:SPLIT]``, the
    queries first."""
    folder, split = Path(spec), None
    if not folder.is_dir() and ":" in str(spec):
        head, _, tail = str(spec).rpartition(":")
        if Path(head).is_dir():
            folder, split = Path(head), tail
    if split is None:
        data = load_beir(folder, split=None)
        queries, docs = data.queries, data.corpus
    else:
        if not (folder / "qrels" / f"{split}.tsv").is_file():
            raise CurateError(f"--decontaminate {spec}: {folder / 'qrels' / (split + '.tsv')} does not exist")
        data = load_beir(folder, split=split)
        queries = {q: t for q, t in data.queries.items() if q in data.qrels}
        relevant = {d for rel in data.qrels.values() for d, score in rel.items() if score > 0}
        docs = {d: t for d, t in data.corpus.items() if d in relevant}
    labels = [f"query:{q}" for q in queries] + [f"doc:{d}" for d in docs]
    return labels, list(queries.values()) + list(docs.values())


def decontaminate(items: Sequence[Item], folders: Sequence[str | Path], threshold: float = 0.8,
                  ngram: int = 1, seed: int = 1) -> tuple[list[Item], list[dict[str, Any]], list[dict[str, Any]]]:
    """(kept items, one line per dropped record with its matches, per-folder counts for the card)."""
    if not folders or not items:
        return list(items), [], []
    own = [getattr(it.record, f) for f in FIELDS for it in items]
    own_sig = signatures(own, ngram=ngram, seed=seed)
    n = len(items)
    matches: dict[int, list[dict[str, Any]]] = {}
    counts = []
    for folder in folders:
        labels, texts = _eval_texts(folder)
        sig = np.vstack([own_sig, signatures(texts, ngram=ngram, seed=seed)])
        i, j, sim = similar_pairs(sig, threshold, seed=seed)
        cross = (i < len(own)) & (j >= len(own))
        by_field = {f: set() for f in FIELDS}
        for a, b, s in zip(i[cross].tolist(), j[cross].tolist(), sim[cross].tolist()):
            field, rec = FIELDS[a // n], a % n
            by_field[field].add(rec)
            matches.setdefault(rec, []).append({"folder": str(folder), "field": field,
                                                "eval": labels[b - len(own)], "similarity": round(s, 3)})
        hit = set().union(*by_field.values())
        queries = sum(label.startswith("query:") for label in labels)
        counts.append({"step": "decontaminate", "folder": str(folder), "eval_texts": len(texts),
                       "eval_queries": queries, "eval_documents": len(texts) - queries,
                       "records_matched": len(hit), **{f"{f}_matched": len(v) for f, v in by_field.items()}})
    kept = [it for r, it in enumerate(items) if r not in matches]
    dropped = [{"id": items[r].record.id, "source": items[r].source, "matches": m} for r, m in sorted(matches.items())]
    return kept, dropped, counts

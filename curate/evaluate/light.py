"""The light retrieval set (Linq-Embed-Mistral's streamlined evaluation).

A full retrieval evaluation encodes the whole corpus for every checkpoint.  The light set
keeps the part of the benchmark that decides the score:

* **queries**: a seeded ``fraction`` (20 %) of the scored queries, drawn *stratified* so the
  sample is label-balanced -- each stratum keeps its share of the queries.  A stratum is
  (number of relevant documents, on a log2 scale) x (the teacher's own NDCG@10, in
  quarters).  The first keeps easy one-answer claims and many-answer topics in proportion;
  the second keeps the mix of queries the teacher gets right and wrong, which is what makes
  the light score track the full score rather than drift with an unlucky draw.
* **documents**: the union of the teacher's top-``depth`` (50) documents for each sampled
  query -- the documents a decent model could plausibly rank high -- **plus every relevant
  document of the sampled queries**, even where the teacher ranked it below ``depth``.
  Without them a model better than the teacher could not be seen finding what the teacher
  missed, and Recall@100 would be capped by the teacher's recall.

The teacher ranks the full corpus once, when the set is built; the set stores the sampled
query ids, the document ids, the parameters, and the teacher's scores on the full and the
light evaluation, so the light score's bias is known from the start.  Building is the only
expensive step; a stored set is reused for every later model (see ``curate.evaluate.store``).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from curate.core.errors import CurateError
from curate.evaluate.metrics import DEFAULT_METRICS, evaluate
from curate.evaluate.retrieve import Timings, retrieve, search

LIGHT_VERSION = 1
_NDCG_BUCKETS = 4
_MAX_REL_BUCKET = 4  # 1, 2-3, 4-7, 8-15, 16+


@dataclass
class LightParams:
    depth: int = 50
    fraction: float = 0.2
    seed: int = 0

    def check(self) -> None:
        if self.depth < 1:
            raise CurateError(f"--light-depth must be at least 1, not {self.depth}")
        if not 0 < self.fraction <= 1:
            raise CurateError(f"--light-fraction must be in (0, 1], not {self.fraction}")


@dataclass
class LightSet:
    query_ids: list[str]
    doc_ids: list[str]
    params: dict[str, Any]
    teacher: dict[str, Any]
    dataset: dict[str, Any]
    full: dict[str, int]  # queries and docs of the full evaluation
    teacher_scores: dict[str, dict[str, float]]  # full, light, difference (light - full)
    strata: dict[str, list[int]] = field(default_factory=dict)  # label -> [queries, sampled]
    relevant_added: int = 0  # relevant docs the top-depth union lacked
    build_seconds: float = 0.0
    version: int = LIGHT_VERSION

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], where: str | Path) -> LightSet:
        try:
            if obj.get("version") != LIGHT_VERSION:
                raise ValueError(f"version {obj.get('version')!r}, expected {LIGHT_VERSION}")
            lset = cls(**{k: obj[k] for k in cls.__dataclass_fields__ if k in obj})
            if not (isinstance(lset.query_ids, list) and isinstance(lset.doc_ids, list)):
                raise ValueError("query_ids and doc_ids must be lists")
        except (TypeError, ValueError, AttributeError) as e:
            raise CurateError(f"{where}: not a light set ({e})") from None
        return lset

    def check_against(self, corpus: Mapping[str, str], qids: Sequence[str], where: str | Path) -> None:
        """Every stored id must exist in the dataset being evaluated."""
        known = set(qids)
        for q in self.query_ids:
            if q not in known:
                raise CurateError(f"{where}: query {q!r} of the light set has no relevant "
                                  "documents in this split (built for other data?)")
        for d in self.doc_ids:
            if d not in corpus:
                raise CurateError(f"{where}: document {d!r} of the light set is not in the corpus "
                                  "(built for other data?)")


# -- sampling ---------------------------------------------------------------------------


def stratum(n_relevant: int, teacher_ndcg: float) -> str:
    """The stratum label of a query (see the module docstring)."""
    b = min(int(math.log2(max(n_relevant, 1))), _MAX_REL_BUCKET)
    lo, hi = 2 ** b, 2 ** (b + 1) - 1
    rel = f"{lo}+" if b == _MAX_REL_BUCKET else str(lo) if lo == hi else f"{lo}-{hi}"
    q = min(int(teacher_ndcg * _NDCG_BUCKETS), _NDCG_BUCKETS - 1)
    return f"rel {rel} / ndcg q{q + 1}"


def stratified_sample(labels: Mapping[str, str], fraction: float, seed: int) -> list[str]:
    """``round(fraction * n)`` (at least 1) of the ids, each stratum getting its share.

    Shares are allocated by largest remainder (seeded tie-break), so the total is exact and
    no stratum is off by more than one query from its proportional share.  Returned in the
    order of ``labels``.
    """
    ids = list(labels)
    if not ids:
        return []
    rng = np.random.default_rng(seed)
    groups: dict[str, list[str]] = defaultdict(list)
    for q in ids:
        groups[labels[q]].append(q)
    names = sorted(groups)
    target = min(len(ids), max(1, round(fraction * len(ids))))
    quota = np.array([fraction * len(groups[g]) for g in names])
    take = np.floor(quota).astype(int)
    left = target - int(take.sum())
    if left > 0:  # never negative: the floors sum to at most fraction * n
        jitter = rng.random(len(names)) * 1e-9  # seeded, only breaks exact remainder ties
        order = np.argsort(-(quota - take + jitter), kind="stable")
        take[order[:left]] += 1
    chosen: set[str] = set()
    for g, n in zip(names, take.tolist()):
        members = groups[g]
        picked = rng.choice(len(members), size=min(n, len(members)), replace=False)
        chosen.update(members[i] for i in picked)
    return [q for q in ids if q in chosen]


def light_corpus(sampled: Sequence[str], ranked: Mapping[str, Sequence[str]],
                 qrels: Mapping[str, Mapping[str, int]], corpus: Mapping[str, str],
                 depth: int) -> tuple[list[str], int]:
    """(doc ids in corpus order, relevant docs added beyond the top-``depth`` union)."""
    top = {d for q in sampled for d in ranked.get(q, ())[:depth]}
    relevant = {d for q in sampled for d, g in qrels[q].items() if g >= 1 and d in corpus}
    keep = top | relevant
    return [d for d in corpus if d in keep], len(relevant - top)


# -- building ---------------------------------------------------------------------------


def difference(light: Mapping[str, float], full: Mapping[str, float]) -> dict[str, float]:
    """Light minus full, per metric present in both."""
    return {k: light[k] - full[k] for k in light if k in full}


def build_light_set(teacher, corpus: Mapping[str, str], queries: Mapping[str, str],
                    qrels: Mapping[str, Mapping[str, int]], qids: Sequence[str],
                    params: LightParams, dataset: dict[str, Any],
                    timings: Timings | None = None) -> LightSet:
    """Rank the full corpus with ``teacher``, sample the queries, keep their documents."""
    started = time.perf_counter()
    params.check()
    doc_ids = list(corpus)
    depth = max(params.depth, max(k for _, _, k in DEFAULT_METRICS) + 1)
    ranking, doc_vecs = retrieve(teacher, queries, qids, corpus, doc_ids, depth, timings)
    full_scores = evaluate(ranking.run(), {q: qrels[q] for q in qids})
    labels = {q: stratum(sum(g >= 1 for g in qrels[q].values()), full_scores.per_query["ndcg@10"][q])
              for q in qids}
    sampled = stratified_sample(labels, params.fraction, params.seed)
    light_docs, added = light_corpus(sampled, ranking.run(), qrels, corpus, params.depth)

    row = {d: i for i, d in enumerate(doc_ids)}
    light_vecs = doc_vecs[[row[d] for d in light_docs]]
    query_vecs = teacher.encode_queries([queries[q] for q in sampled])  # cached a moment ago
    light_ranking = search(query_vecs, sampled, light_vecs, light_docs, depth)
    light_scores = evaluate(light_ranking.run(), {q: qrels[q] for q in sampled})

    strata: dict[str, list[int]] = {}
    chosen = set(sampled)
    for q, label in labels.items():
        counts = strata.setdefault(label, [0, 0])
        counts[0] += 1
        counts[1] += q in chosen
    return LightSet(
        query_ids=sampled, doc_ids=light_docs,
        params={**asdict(params), "strata": "relevant docs (log2 buckets) x teacher NDCG@10 quarter"},
        teacher={"model": teacher.model_id, "query_prompt": teacher.query_prompt,
                 "doc_prompt": teacher.doc_prompt},
        dataset=dataset, full={"queries": len(qids), "docs": len(doc_ids)},
        teacher_scores={"full": full_scores.means, "light": light_scores.means,
                        "difference": difference(light_scores.means, full_scores.means)},
        strata=dict(sorted(strata.items())), relevant_added=added,
        build_seconds=round(time.perf_counter() - started, 3))


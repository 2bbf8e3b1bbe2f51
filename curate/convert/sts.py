"""Scored sentence pairs as records (NV-Embed 4.2): two records per well-scored pair.

A pair (s1, s2, score) with ``score >= min_score`` gives s1 -> s2 and s2 -> s1.  Negatives
come from the pool of other sentences (``corpus_for_negatives``, else every sentence of the
input, low-scored pairs included): with a teacher the ones closest to the query, hardest
first, else drawn at random.  Never used as a negative: the query itself, its partner, any
sentence the data pairs with the query or with the partner at ``min_score`` or more (a
paraphrase of a paraphrase is no negative), and (with a teacher) any
sentence the teacher scores above ``max_ratio`` times the positive's score (NV-Retriever's
positive-aware ceiling).  Scores are mapped from [0, ``scale_max``] onto the 1-10 scale of the
generated records: ``positive_score``, and ``Negative.score`` where the data scores the
negative against the query.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from curate.llm.client import derive_seed
from curate.core.records import Negative, Record, stable_id

DEFAULT_TASK = "Retrieve semantically similar text."
_TRIES = 64


def to_ten(score: float, scale_max: float) -> float:
    """[0, scale_max] onto the 1-10 scale the generated records use."""
    return round(1.0 + 9.0 * min(max(score / scale_max, 0.0), 1.0), 2)


def sts_pairs_to_records(pairs: Sequence[tuple[str, str, float]], task_text: str = DEFAULT_TASK,
                         min_score: float = 4.0, scale_max: float = 5.0,
                         corpus_for_negatives: Sequence[str] | None = None, teacher=None, k: int = 4,
                         seed: int = 0, max_ratio: float | None = 0.95,
                         stats: dict[str, Any] | None = None) -> list[Record]:
    """Two records per pair scored ``>= min_score``; see the module docstring."""
    if scale_max <= 0:
        raise ValueError("scale_max must be positive")
    k = max(1, int(k))
    positives_of: dict[str, set[str]] = {}
    known: dict[tuple[str, str], float] = {}  # (query, other) -> the data's score, below min_score
    counts = {"pairs": len(pairs), "kept_pairs": 0, "below_min_score": 0, "identical": 0,
              "duplicates": 0, "no_negative": 0}
    directions: list[tuple[str, str, float, int, str]] = []
    seen: set[tuple[str, str]] = set()
    for idx, (s1, s2, score) in enumerate(pairs):
        if score < min_score:
            counts["below_min_score"] += 1
            for a, b in ((s1, s2), (s2, s1)):
                known[(a, b)] = max(score, known.get((a, b), score))
            continue
        if s1.strip() == s2.strip():
            counts["identical"] += 1
            continue
        counts["kept_pairs"] += 1
        positives_of.setdefault(s1, set()).add(s2)
        positives_of.setdefault(s2, set()).add(s1)
        for q, p, way in ((s1, s2, "1->2"), (s2, s1, "2->1")):
            if (q, p) in seen:
                counts["duplicates"] += 1
                continue
            seen.add((q, p))
            directions.append((q, p, score, idx, way))

    if corpus_for_negatives is not None:
        pool = list(dict.fromkeys(corpus_for_negatives))
    else:
        pool = list(dict.fromkeys(t for s1, s2, _ in pairs for t in (s1, s2)))

    def banned(q: str, p: str, text: str) -> bool:
        return text == q or text == p or text in positives_of.get(q, ()) or text in positives_of.get(p, ())

    picks: list[list[tuple[int, float | None]]]
    if teacher is not None:
        picks = _mine(directions, pool, k, teacher, banned, max_ratio)
    else:
        picks = [_sample(q, p, pool, k, seed, banned) for q, p, *_ in directions]

    records = []
    for (q, p, score, idx, way), chosen in zip(directions, picks):
        if not chosen:
            counts["no_negative"] += 1
            continue
        negatives = []
        for rank, (j, s) in enumerate(chosen, 1):
            text = pool[j]
            rel = known.get((q, text))
            negatives.append(Negative(
                text=text, level=rank if teacher is not None else None,
                score=to_ten(rel, scale_max) if rel is not None else None,
                teacher_score=round(s, 6) if s is not None else None,
                source="mined" if teacher is not None else "sampled",
            ))
        meta = {"source": "convert", "kind": "sts", "score": score, "scale_max": scale_max,
                "pair_index": idx, "direction": way, "seed": seed,
                "negatives_by": "teacher" if teacher is not None else "random"}
        if teacher is not None:
            meta["teacher"] = teacher.model_id
        records.append(Record(
            id=stable_id("convert", "sts", task_text, q, p, seed), task_type="sts", task=task_text,
            query=q, positive=p, negatives=negatives, positive_score=to_ten(score, scale_max), meta=meta,
        ))
    if stats is not None:
        stats.update(counts, records=len(records), pool=len(pool),
                     short_negatives=sum(1 for r in records if len(r.negatives) < k))
    return records


def _sample(q: str, p: str, pool: list[str], k: int, seed: int, banned) -> list[tuple[int, None]]:
    rng = random.Random(derive_seed("convert", "sts", seed, q, p))
    picked: list[int] = []
    used: set[int] = set()
    if pool:
        for _ in range(_TRIES * k):
            j = rng.randrange(len(pool))
            if j not in used and not banned(q, p, pool[j]):
                picked.append(j)
                used.add(j)
                if len(picked) == k:
                    return [(j, None) for j in picked]
    rest = [j for j in range(len(pool)) if j not in used and not banned(q, p, pool[j])]
    picked += rng.sample(rest, min(k - len(picked), len(rest)))
    return [(j, None) for j in picked]


def _mine(directions, pool: list[str], k: int, teacher, banned, max_ratio: float | None):
    """The teacher's closest allowed pool sentences per direction (symmetric: query prompt on both)."""
    import numpy as np

    from curate.convert.nearest import pick_nearest
    from curate.negatives.select import Thresholds

    # mine's own percpos ceiling: also right when the positive scores below zero
    ceiling = Thresholds(percent=max_ratio) if max_ratio is not None else None

    if not directions or not pool:
        return [[] for _ in directions]
    pool_vecs = teacher.encode_queries(pool)
    q_vecs = teacher.encode_queries([d[0] for d in directions])
    p_vecs = teacher.encode_queries([d[1] for d in directions])
    pos_scores = np.einsum("ij,ij->i", q_vecs, p_vecs)

    def allowed(row: int, j: int, score: float) -> bool:
        q, p = directions[row][0], directions[row][1]
        if banned(q, p, pool[j]):
            return False
        return max_ratio is None or score <= ceiling.ceiling(float(pos_scores[row]))

    return pick_nearest(q_vecs, pool_vecs, k, allowed)

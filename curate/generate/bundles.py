"""Bundles of related passages for multi-hop queries (a from-corpus spec with ``bundle:``).

A query that needs two or three passages to answer teaches a model what one passage cannot:
that several documents can be relevant at once, each for its part. The bundle starts from the
sampled passage (the seed) and adds its nearest neighbours by the teacher's document vectors,
so the model is shown passages on one subject and can write a question that joins them.

Neighbours that would make a bundle of the same text are passed over: the seed's own document
neighbours that overlap it (the passages just before and after it, which share words with it
by the cut's overlap) and any passage with the seed's text. Every passage of the bundle becomes
a labelled positive of the record (the seed is ``positive``, the rest ``positives``, each with
its corpus id), so mining never takes one of them as a negative.

A bundle's size is drawn per seed passage from the spec's sizes with a generator seeded by the
run seed and the passage id: the same run plans the same bundles, and a larger ``-n`` keeps the
bundles of a smaller one.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np

from curate.core.records import stable_id
from curate.datasets.documents import Passage


def bundle_size(passage: Passage, sizes: Sequence[int], seed: int) -> int:
    return random.Random(int(stable_id("bundle", passage.id, seed), 16)).choice(list(sizes))


def _overlaps(a: Passage, b: Passage) -> bool:
    return a.text == b.text or (a.doc_id == b.doc_id and abs(a.k - b.k) <= 1)


def passage_bundles(passages: Sequence[Passage], seeds: Sequence[Passage], sizes: Sequence[int], seed: int,
                    teacher=None) -> dict[str, list[Passage]]:
    """Per seed passage id: the seed, then its nearest passages, ``bundle_size`` in all (fewer
    when the collection has too few passages that do not overlap the seed)."""
    from curate.negatives.search import top_k

    if teacher is None:
        from curate.embed.teacher import Teacher

        teacher = Teacher()
    index = {p.id: i for i, p in enumerate(passages)}
    vectors = teacher.encode_docs([p.joined() for p in passages])
    want = {s.id: bundle_size(s, sizes, seed) for s in seeds}
    # a few spare neighbours for those passed over; a bundle is small, so this stays cheap
    k = min(len(passages), max(want.values(), default=1) + 8)
    _, top = top_k(vectors[np.asarray([index[s.id] for s in seeds], dtype=np.int64)], vectors, k)
    out: dict[str, list[Passage]] = {}
    for s, row in zip(seeds, top):
        bundle = [s]
        for j in row:
            p = passages[int(j)]
            if len(bundle) == want[s.id]:
                break
            if not any(_overlaps(p, b) for b in bundle):
                bundle.append(p)
        out[s.id] = bundle
    return out

"""Classification and clustering examples as (query, positive, negatives) records (NV-Embed 4.2).

Every example is a query once.  Its positive is another example with the same label (a
cluster id is a label), drawn with the example's own random generator, so a run is the same
whatever else is in flight; its negatives are examples of other labels: drawn at random, as
NV-Embed does, or, with a teacher, the other-label examples closest to the query (hardest
first, ``level`` 1..k, ``teacher_score`` set).  A query is never its own positive or negative,
and no text appears twice in a record.  A text that occurs under several labels is never a
negative for any of them.  Examples whose label has no other distinct text are skipped.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

from curate.core.errors import CurateError
from curate.llm.client import derive_seed
from curate.core.records import Negative, Record, stable_id

DEFAULT_TASKS = {
    "classification": "Given a text, retrieve other texts that belong to the same category.",
    "clustering": "Given a text, retrieve other texts on the same topic.",
}
_TRIES = 64  # random draws before falling back to listing the candidates


def _key(label: Any) -> str:
    """Labels compare by JSON value: 1, "1" and true are three different labels."""
    return json.dumps(label, sort_keys=True, ensure_ascii=False)


class _Examples:
    def __init__(self, texts: Sequence[str], labels: Sequence[Any]):
        if len(texts) != len(labels):
            raise ValueError(f"{len(texts)} texts but {len(labels)} labels")
        self.texts = list(texts)
        self.labels = list(labels)
        self.keys = [_key(label) for label in labels]
        self.groups: dict[str, list[int]] = {}
        for i, k in enumerate(self.keys):
            self.groups.setdefault(k, []).append(i)
        # distinct texts: the teacher's pool, and which labels each text carries
        self.uniq: dict[str, int] = {}
        self.uniq_keys: list[set[str]] = []
        self.uniq_label: list[Any] = []  # the first label seen with the text
        for t, k, label in zip(self.texts, self.keys, self.labels):
            u = self.uniq.setdefault(t, len(self.uniq))
            if u == len(self.uniq_keys):
                self.uniq_keys.append(set())
                self.uniq_label.append(label)
            self.uniq_keys[u].add(k)
        self.pool_texts = list(self.uniq)

    def may_be_negative(self, i: int, text: str, banned: set[str]) -> bool:
        return text not in banned and self.keys[i] not in self.uniq_keys[self.uniq[text]]

    def positive(self, i: int, rng: random.Random) -> int | None:
        group = self.groups[self.keys[i]]
        query = self.texts[i]
        for _ in range(_TRIES):
            j = group[rng.randrange(len(group))]
            if self.texts[j] != query:
                return j
        rest = [j for j in group if self.texts[j] != query]
        return rng.choice(rest) if rest else None

    def random_negatives(self, i: int, banned: set[str], k: int, rng: random.Random) -> list[int]:
        n = len(self.texts)
        picked: list[int] = []
        banned = set(banned)
        for _ in range(_TRIES * k):
            j = rng.randrange(n)
            if self.may_be_negative(i, self.texts[j], banned):
                picked.append(j)
                banned.add(self.texts[j])
                if len(picked) == k:
                    return picked
        rest, seen = [], set(banned)
        for j in range(n):
            if self.texts[j] not in seen and self.may_be_negative(i, self.texts[j], banned):
                rest.append(j)
                seen.add(self.texts[j])
        return picked + rng.sample(rest, min(k - len(picked), len(rest)))


def examples_to_triplets(texts: Sequence[str], labels: Sequence[Any], task_text: str,
                         n_negatives: int = 4, seed: int = 0, teacher=None,
                         kind: str = "classification", stats: dict[str, Any] | None = None) -> list[Record]:
    """One record per example that has a same-label partner; see the module docstring.

    ``teacher``: a ``curate.embed.teacher.Teacher`` to pick the hardest negatives (both sides
    encoded with its query prompt: example against example is symmetric); ``None`` samples
    them.  ``stats``, when given, receives the counts (examples, records, skipped by reason).
    """
    ex = _Examples(texts, labels)
    if len(ex.groups) < 2:
        raise CurateError(f"{kind}: needs examples of at least two labels, got {len(ex.groups)}")
    n_negatives = max(1, int(n_negatives))
    skipped = {"no-positive": 0, "no-negative": 0}

    rngs = [random.Random(derive_seed("convert", kind, seed, i, t, k))
            for i, (t, k) in enumerate(zip(ex.texts, ex.keys))]
    positives = [ex.positive(i, rngs[i]) for i in range(len(ex.texts))]

    mined: dict[int, list[tuple[int, float]]] = {}
    if teacher is not None:
        todo = [i for i, j in enumerate(positives) if j is not None]
        mined = _hardest(ex, todo, positives, n_negatives, teacher)

    records = []
    for i, j in enumerate(positives):
        if j is None:
            skipped["no-positive"] += 1
            continue
        query, positive = ex.texts[i], ex.texts[j]
        if teacher is not None:
            negatives = [Negative(text=ex.pool_texts[u], level=rank,
                                  teacher_score=round(s, 6), source="mined")
                         for rank, (u, s) in enumerate(mined[i], 1)]
            neg_labels = [ex.uniq_label[u] for u, _ in mined[i]]
        else:
            picks = ex.random_negatives(i, {query, positive}, n_negatives, rngs[i])
            negatives = [Negative(text=ex.texts[p], source="sampled") for p in picks]
            neg_labels = [ex.labels[p] for p in picks]
        if not negatives:
            skipped["no-negative"] += 1
            continue
        meta = {"source": "convert", "kind": kind, "label": ex.labels[i], "negative_labels": neg_labels,
                "index": i, "positive_index": j, "seed": seed,
                "negatives_by": "teacher" if teacher is not None else "random"}
        if teacher is not None:
            meta["teacher"] = teacher.model_id
        records.append(Record(
            id=stable_id("convert", kind, task_text, i, query, ex.keys[i], seed),
            task_type=kind, task=task_text, query=query, positive=positive,
            negatives=negatives, meta=meta,
        ))
    if stats is not None:
        stats.update(examples=len(ex.texts), labels=len(ex.groups), records=len(records), skipped=skipped,
                     short_negatives=sum(1 for r in records if len(r.negatives) < n_negatives))
    return records


def _hardest(ex: _Examples, todo: list[int], positives: list[int | None], k: int,
             teacher) -> dict[int, list[tuple[int, float]]]:
    """For each example in ``todo``: the ``k`` other-label distinct texts the teacher ranks closest."""
    from curate.convert.nearest import pick_nearest

    vecs = teacher.encode_queries(ex.pool_texts)
    queries = vecs[[ex.uniq[ex.texts[i]] for i in todo]]

    def allowed(row: int, u: int, score: float) -> bool:
        i = todo[row]
        text = ex.pool_texts[u]
        return (ex.keys[i] not in ex.uniq_keys[u] and text != ex.texts[i]
                and text != ex.texts[positives[i]])

    picks = pick_nearest(queries, vecs, k, allowed)
    return {i: p for i, p in zip(todo, picks)}

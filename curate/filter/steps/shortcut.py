"""``shortcut``: drop the negatives a probe tells apart most easily without the query.

When a negative can be recognised by its writing alone (an LLM's length, register or stock
phrases), a model trained against it learns that cue instead of relevance. This step fits the
audit's probe (``curate.audit.probe``) on the file's own records: LLM-written negatives against
corpus text (``against: corpus``) or every negative against the positives (``against:
positives``); ``auto`` takes corpus text when the file has enough of it. Each negative gets
the probe's probability of being on the negatives' side, scored by a model that did not train
on it (out of fold; a text left out of the sample by the model fitted on the whole sample), and
the top ``share`` of them are dropped as ``shortcut``, with the probability, the cut and the
probe's AUC.

When the probe separates the sides worse than ``min_auc``, there is no shortcut worth removing
and nothing is dropped (the report says so). ``keep_one`` (default) keeps a record's least
separable negative when all of them would go, so the step thins the easy negatives out instead
of emptying records; without it such a record is dropped as ``no-negatives-left``. Removing the
easiest negatives only weakens the cue: run ``curate export`` afterwards and read its audit.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from curate.audit.compare import ALL, AuditOptions, Comparison, by_origin
from curate.core.params import check_params
from curate.core.records import stable_id
from curate.filter.base import keep_negatives, register

MIN_TEXTS = AuditOptions.min_texts  # distinct texts a side below which nothing is probed, as in the audit


@dataclass
class ShortcutParams:
    against: Literal["auto", "corpus", "positives"] = "auto"
    share: float = field(default=0.25, metadata={"min": 0.0, "max": 1.0, "min_open": True})  # of the candidates
    min_auc: float = field(default=0.7, metadata={"min": 0.5, "max": 1.0})  # below it: nothing dropped
    view: Literal["chars", "embeddings"] = "chars"  # embeddings: the recipe's teacher, through its cache
    sample: int = field(default=2000, metadata={"min": MIN_TEXTS})  # texts a side the probe is fitted on
    folds: int = field(default=5, metadata={"min": 2, "max": 20})
    seed: int = 0
    keep_one: bool = True


def _sides(records, against: str) -> tuple[str, list[str], list[str]]:
    """(the side chosen, the texts the negatives are told from, the candidate negatives' texts):
    the audit's sides (``by_origin``, ``Comparison.of``), so the step removes what it warns of."""
    pos, negs, corpus, llm = by_origin(records)
    vs_corpus = Comparison.of("llm_vs_corpus", ALL, ALL, corpus, [(t, o) for t, o, _ in llm])
    if against == "auto":
        against = "corpus" if len(vs_corpus.a) >= MIN_TEXTS and llm else "positives"
    sides = vs_corpus if against == "corpus" else \
        Comparison.of("positive_vs_negative", ALL, ALL, pos, [(t, o) for t, o, _ in negs])
    return against, sides.a, sides.b


def _sample(texts: list[str], cap: int, seed: int, side: str) -> list[str]:
    if len(texts) <= cap:
        return texts
    rng = random.Random(int(stable_id("shortcut", seed, side), 16))
    return [texts[i] for i in sorted(rng.sample(range(len(texts)), cap))]


@register("shortcut", ShortcutParams)
def shortcut(records, params, ctx):
    from curate.audit.probe import CharView, probe

    p = check_params("shortcut", ShortcutParams, params)
    against, a, b = _sides(records, p.against)
    base = {"against": against, "view": p.view, "n_a": len(a), "n_b": len(b), "share": p.share,
            "min_auc": p.min_auc}
    if min(len(a), len(b)) < MIN_TEXTS:
        ctx.note(**base, skipped=f"fewer than {MIN_TEXTS} distinct texts on a side", negatives_dropped=0)
        return records
    sa, sb = _sample(a, p.sample, p.seed, "a"), _sample(b, p.sample, p.seed, "b")
    if p.view == "chars":
        view = CharView([*sa, *sb])
    else:
        teacher = ctx.teacher
        view = lambda texts: teacher.encode_docs(list(texts))  # noqa: E731
    found = probe(sa, sb, view, p.folds, p.seed)
    prob = dict(zip(sb, found.oof[len(sa):]))
    rest = [t for t in b if t not in prob]
    if rest:
        prob.update(zip(rest, found.predict(rest)))
    numbers = {**base, "auc": round(found.auc, 4), "interval": [round(found.low, 4), round(found.high, 4)],
               "toward_negatives": found.toward_b}
    if found.auc < p.min_auc:
        ctx.note(**numbers, skipped=f"AUC below {p.min_auc}: no shortcut to remove", negatives_dropped=0)
        return records
    ranked = sorted(prob.values(), reverse=True)
    n_drop = max(1, round(p.share * len(ranked)))
    cut = float(ranked[n_drop - 1])
    kept, dropped, spared = [], 0, 0
    for rec in records:
        easy = [n for n in rec.negatives if n.text in prob and prob[n.text] >= cut]
        if p.keep_one and easy and len(easy) == len(rec.negatives):
            easy.remove(min(easy, key=lambda n: prob[n.text]))  # the hardest to tell apart stays
            spared += 1
        for n in easy:
            ctx.reject(rec, "shortcut", {"probability": round(float(prob[n.text]), 4), "threshold": round(cut, 4),
                                         "auc": round(found.auc, 4), "against": against, "view": p.view},
                       negative=n)
        dropped += len(easy)
        ids = {id(n) for n in easy}
        if keep_negatives(rec, [n for n in rec.negatives if id(n) not in ids], ctx):
            kept.append(rec)
    ctx.note(**numbers, threshold=round(cut, 4), candidates=len(prob), negatives_dropped=dropped,
             records_spared=spared, records_in=len(records), records_kept=len(kept),
             mean_probability_dropped=round(float(np.mean(ranked[:n_drop])), 4))
    return kept

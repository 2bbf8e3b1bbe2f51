"""The mining report: counts, why queries came up short, false negatives, histograms.

False negatives are measured against qrels the miner did not see (``--check-qrels``): the
share of mined negatives that those qrels label relevant (relevance >= 1) for the same
query id.  Only queries present in those qrels are counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from curate.mine.inputs import Corpus, MineItem

SCORES_PNG = "mine_scores.png"
GAP_PNG = "mine_gap.png"


def _stats(values: Sequence[float]) -> dict[str, float] | None:
    if not len(values):
        return None
    a = np.asarray(values, dtype=np.float64)
    return {"mean": round(float(a.mean()), 4), "min": round(float(a.min()), 4),
            "p25": round(float(np.percentile(a, 25)), 4), "median": round(float(np.median(a)), 4),
            "p75": round(float(np.percentile(a, 75)), 4), "max": round(float(a.max()), 4)}


def rank_summary(ranks: Sequence[int]) -> dict[str, Any]:
    """How deep the teacher puts the records' own positives (ranks past the first window are lower bounds)."""
    a = np.asarray(ranks, dtype=np.int64)
    if not len(a):
        return {}
    return {"median": float(np.median(a)), "top1": int((a <= 1).sum()), "top10": int((a <= 10).sum()),
            "top100": int((a <= 100).sum()), "queries": int(len(a))}


def negative_ranks(first_ranks: Sequence[int], positive_ranks: Sequence[int], all_ranks: Sequence[int],
                   window: int, deepest: int, pool: int,
                   anchored_lower: Sequence[bool] | None = None) -> dict[str, Any]:
    """Where in the teacher's ranking the kept negatives sit, against the depth searched.

    ``first_ranks[i]`` is query i's best-ranked kept negative, ``positive_ranks[i]`` where the
    teacher put its positive (queries without a kept negative are left out). A query keeps its
    negatives "far below" its positive when even the best of them ranks more than ``window``
    places under it (the first search's depth, or the method's last useful rank if deeper), or
    more than half the pool under it in a pool too small for that: a hard negative sits near the
    positive, so such a query's negatives are easy ones, and when that is most queries something
    upstream is wrong (a positive scored as if empty, a threshold anchored at the wrong score),
    which no other count shows. ``anchored_lower[i]``: query i's threshold is anchored at another
    labelled positive scored below its own (``--anchor lowest`` with several positives); the far
    queries so anchored are counted, since that, not the corpus, is then the likely cause."""
    if not len(all_ranks):
        return {}
    a = np.asarray(all_ranks, dtype=np.int64)
    gap = max(1, min(int(window), int(pool) // 2))
    far = [f - p > gap for f, p in zip(first_ranks, positive_ranks)]
    out = {"min": int(a.min()), "median": float(np.median(a)), "max": int(a.max()),
           "first_search_depth": int(window), "deepest_search": int(deepest), "pool": int(pool),
           "far_gap": gap, "queries": len(first_ranks), "far_below_positive": sum(far)}
    if anchored_lower is not None:
        out["far_below_anchored_lower"] = sum(1 for f, low in zip(far, anchored_lower) if f and low)
    return out


def far_below_warning(ranks: dict[str, Any]) -> str | None:
    """One line when most queries keep negatives from far below their positive (``negative_ranks``)."""
    if not ranks or 2 * ranks["far_below_positive"] <= ranks["queries"]:
        return None
    head = (f"warning: {ranks['far_below_positive']} of {ranks['queries']} queries keep negatives more than "
            f"{ranks['far_gap']} ranks below their positive (easy negatives): ")
    lower = ranks.get("far_below_anchored_lower", 0)
    if 2 * lower > ranks["far_below_positive"]:
        return head + (f"on {lower} of them the threshold sits at another labelled positive that the teacher "
                       "scores far lower (the lowest of several): check those labels and --min-relevance, or "
                       "measure from each record's own positive (--anchor record)")
    return head + ("check the positives' scores and the corpus (blank or duplicate documents, a wrong "
                   "--min-relevance)")


def rank_line(ranks: dict[str, Any]) -> str | None:
    """The kept negatives' place in the teacher's ranking, in one line."""
    if not ranks:
        return None
    return (f"kept negatives rank {ranks['min']}-{ranks['max']} in the teacher's lists (median "
            f"{ranks['median']:g}; first search {ranks['first_search_depth']} deep, deepest "
            f"{ranks['deepest_search']})")


def counts(k: int, n_negs: Sequence[int], short_reasons: Sequence[str | None], written: int) -> dict[str, Any]:
    """Queries in/out, negatives per query, and why queries got fewer than k."""
    hist = Counter(int(n) for n in n_negs)
    reasons = Counter(r for r in short_reasons if r)
    return {
        "queries_in": len(n_negs),
        "queries_out": written,
        "negatives": int(sum(n_negs)),
        "negatives_per_query": {"mean": round(float(np.mean(n_negs)), 3) if len(n_negs) else 0.0,
                                "histogram": {str(n): hist[n] for n in sorted(hist)}},
        "queries_short": sum(1 for n in n_negs if n < k),
        "short_reasons": dict(reasons.most_common()),
    }


def false_negative_rate(items: Sequence[MineItem], negatives: Sequence[Sequence[int]], corpus: Corpus,
                        qrels: dict[str, dict[str, int]], path: str | None = None,
                        min_relevance: int = 1) -> dict[str, Any]:
    """How many mined negatives the held-out qrels call relevant."""
    checked_q = with_fn = negs = fns = 0
    by_pos: dict[int, list[int]] = {}
    missing = 0
    for it, docs in zip(items, negatives):
        rels = qrels.get(it.query_id) if it.query_id is not None else None
        if rels is None:
            missing += 1
            continue
        relevant = {d for d, s in rels.items() if s >= min_relevance}
        checked_q += 1
        hits = [any(i in relevant for i in corpus.ids[d]) for d in docs]
        negs += len(hits)
        fns += sum(hits)
        with_fn += any(hits)
        for j, h in enumerate(hits):
            by_pos.setdefault(j + 1, []).append(int(h))
    return {
        "qrels": path,
        "queries_checked": checked_q,
        "queries_not_in_qrels": missing,
        "negatives_checked": negs,
        "false_negatives": fns,
        "rate": round(fns / negs, 4) if negs else None,
        "queries_with_a_false_negative": with_fn,
        "rate_by_position": {str(p): round(float(np.mean(v)), 4) for p, v in sorted(by_pos.items())},
    }


def write_plots(out_dir: Path, lowest_pos: Sequence[float], neg_scores: Sequence[float],
                gaps: Sequence[float], title: str) -> list[Path]:
    """Histograms of the lowest positive score per query against the mined negatives' scores."""
    if not len(lowest_pos):
        return []
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    paths = []
    out_dir.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    vals = list(lowest_pos) + list(neg_scores)
    lo, hi = min(vals), max(vals)
    bins = np.linspace(lo, hi, 41) if hi > lo else 20
    ax.hist(lowest_pos, bins=bins, alpha=0.6, color="tab:green",
            label=f"lowest positive per query (n={len(lowest_pos)})")
    if len(neg_scores):
        ax.hist(neg_scores, bins=bins, alpha=0.6, color="tab:red", label=f"mined negatives (n={len(neg_scores)})")
    ax.set_xlabel("teacher score")
    ax.set_ylabel("count")
    ax.set_title(f"Mined scores: {title}")
    ax.legend()
    fig.tight_layout()
    paths.append(out_dir / SCORES_PNG)
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    if len(gaps):
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.hist(gaps, bins=40, color="tab:blue", alpha=0.8)
        ax.axvline(0.0, color="black", linewidth=1)
        ax.set_xlabel("lowest positive score - negative score")
        ax.set_ylabel("negatives")
        ax.set_title(f"Positive minus negative ({sum(g <= 0 for g in gaps)} of {len(gaps)} at or below 0)")
        fig.tight_layout()
        paths.append(out_dir / GAP_PNG)
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)
    return paths


def score_summary(lowest_pos: Sequence[float], neg_scores: Sequence[float], gaps: Sequence[float]) -> dict:
    return {"lowest_positive": _stats(lowest_pos), "negative": _stats(neg_scores), "gap": _stats(gaps)}

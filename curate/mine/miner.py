"""The mining loop: one teacher, many queries, one code path for every method.

For each query: retrieve its top ``depth`` documents plus as many as it has excluded
documents (its positives, ...), drop the excluded ones, optionally rescore the rest with a
cross-encoder (re-sorting them), let the method judge each candidate against the query's
lowest positive score (or the record's own positive's, ``anchor="record"``), and let the sampling strategy choose among the valid ones.
With ``promote_top``, a query an LLM wrote from a passage first hands its top candidate over as
the new positive when the teacher clearly prefers it to the source (``promotion``).

A query that has too few valid candidates is searched again, twice as deep, until it has
enough, the whole corpus was searched (exactly, whatever the index), ``max_depth`` is
reached, or deeper documents cannot help (a rank window already covered; every deeper
document below the score floor).  Only those queries are searched again.  Queries are
searched in chunks sorted by depth, so at most about ``max_cells`` scores are held at once
and no query x corpus matrix is ever built; each query's result uses only its own top
``depth`` list, so it does not depend on which queries shared its chunk.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from curate.core.progress import track
from curate.negatives.search import SearchIndex
from curate.mine.inputs import MineItem, written_from_passage
from curate.mine.options import SearchSettings
from curate.negatives.presets import Method
from curate.negatives.select import CODE_NAMES, VALID
from curate.mine.sampling import choose, needed, query_rng


@dataclass(kw_only=True)
class MineConfig(SearchSettings):
    method: Method = field(default_factory=lambda: Method.make("percpos"))
    max_cells: int = 8_000_000  # scores held at once (queries x depth); about 128 MB at the peak


@dataclass
class Mined:
    """One query's negatives from one teacher, best first."""

    docs: np.ndarray  # corpus indices
    scores: np.ndarray  # the scores the method judged (cross-encoder ones when rescored)
    ranks: np.ndarray  # 1-based rank in the teacher's retrieval list, positives included
    positive_scores: np.ndarray  # one per positive of the item, in its order
    lowest_positive: float  # over those and the item's also_positive ones
    valid: int  # valid candidates found
    depth: int  # documents retrieved in the last search
    rounds: int  # searches this query needed
    positive_rank: int  # 1 + documents (not known positives) the teacher scores above the record's positive
    rejected: dict[str, int]
    short_reason: str | None  # why fewer than k, when fewer
    # (corpus index, score, 1-based rank) of the document promoted to positive (``promote_top``)
    promoted: tuple[int, float, int] | None = None


class CrossEncoderScorer:
    """Rescores (query, document) pairs with a sentence-transformers ``CrossEncoder``.

    Pairs already scored are remembered, so deeper searches only score new candidates.
    """

    def __init__(self, model, corpus_texts: Sequence[str], batch_size: int = 32, name: str | None = None):
        if isinstance(model, str):
            from sentence_transformers import CrossEncoder

            name = name or model
            model = CrossEncoder(model)
        self.model = model
        self.name = name or type(model).__name__
        self.texts = corpus_texts
        self.batch_size = batch_size
        self._memo: dict[tuple[str, int], float] = {}
        self.pairs_scored = 0

    def score(self, query: str, docs: Sequence[int]) -> np.ndarray:
        todo = list(dict.fromkeys(int(d) for d in docs if (query, int(d)) not in self._memo))
        if todo:
            out = self.model.predict([(query, self.texts[d]) for d in todo], batch_size=self.batch_size,
                                     show_progress_bar=False)
            for d, s in zip(todo, np.asarray(out, dtype=np.float64).reshape(len(todo), -1)[:, -1]):
                self._memo[(query, d)] = float(s)
            self.pairs_scored += len(todo)
        return np.array([self._memo[(query, int(d))] for d in docs], dtype=np.float64)


def positive_scores(qvecs: np.ndarray, dvecs: np.ndarray, items: Sequence[MineItem],
                    rescorer=None) -> list[np.ndarray]:
    """Scores of each item's positives, then of its ``also_positive`` ones (same query text)."""
    out = []
    for i, it in enumerate(items):
        docs = list(it.positives) + list(it.also_positive)
        if rescorer is not None:
            out.append(np.asarray(rescorer.score(it.query, docs), dtype=np.float64))
        else:
            out.append((dvecs[np.asarray(docs, dtype=np.int64)] @ qvecs[i]).astype(np.float64))
    return out


def promotion(top: float, source: float, margin: float | None) -> bool:
    """Whether the teacher's top candidate should replace the source passage as the positive: it
    scores above the source by more than ``margin`` of the source's size (the mirror of the
    positive-aware threshold, which refuses a negative within that margin below it)."""
    return margin is not None and top > source + margin * abs(source)


def choose_positive(item: MineItem, scores: np.ndarray) -> None:
    """Make the record's positive the one the teacher scores highest among those the labels rank
    equal (the most relevant ones), instead of the first listed: labels give no preference among
    them, the teacher's agreement is the best left, and the gate then judges that positive.
    ``scores`` (one per positive, in order) is reordered with ``item.positives``."""
    tied = min(item.top_tied, len(item.positives))
    if item.record is not None or tied < 2:
        return
    j = int(np.argmax(scores[:tied]))
    if j:
        item.positives[0], item.positives[j] = item.positives[j], item.positives[0]
        scores[[0, j]] = scores[[j, 0]]


def mine(qvecs: np.ndarray, dvecs: np.ndarray, index: SearchIndex, items: Sequence[MineItem],
         cfg: MineConfig, rescorer=None) -> list[Mined]:
    """Negatives for every item (``qvecs[i]`` is item i's query vector)."""
    n_docs = index.ntotal
    n = len(items)
    need = needed(cfg.sample, cfg.k, cfg.pool)
    cap = cfg.max_depth if cfg.max_depth else n_docs
    pos_scores = positive_scores(qvecs, dvecs, items, rescorer)
    if cfg.positive_choice == "teacher":
        for it, scores in zip(items, pos_scores):
            choose_positive(it, scores)
    lowest = [float(np.min(p)) for p in pos_scores]
    anchors = lowest if cfg.anchor == "lowest" else [float(p[0]) for p in pos_scores]
    # the record's own positive as the teacher sees it (before any rescoring): its rank gates the query
    first_pos = [float(dvecs[it.positives[0]] @ qvecs[i]) for i, it in enumerate(items)]
    promotable = [cfg.promote_top is not None and written_from_passage(it) for it in items]
    depth = [max(1, min(int(cfg.depth), cap))] * n
    rounds = [0] * n
    results: list[Mined | None] = [None] * n

    def want(i: int) -> int:
        return min(n_docs, depth[i] + len(items[i].exclude))

    pending = list(range(n))
    # a bar once the queries take more than one chunk; it counts queries finished, deeper searches included
    with track(n if sum(map(want, range(n))) > cfg.max_cells else 0, "searching") as advance:
        while pending:
            pending.sort(key=want)
            later: list[int] = []
            start = 0
            while start < len(pending):
                stop = start + 1
                while stop < len(pending) and (stop - start + 1) * want(pending[stop]) <= cfg.max_cells:
                    stop += 1
                chunk = pending[start:stop]
                start = stop
                scores, ids = index.search(qvecs[chunk], want(chunk[-1]))
                for row, i in enumerate(chunk):
                    rounds[i] += 1
                    w = want(i)
                    done = _evaluate(items[i], ids[row, :w], scores[row, :w], w >= n_docs,
                                     depth[i] >= cap, lowest[i], anchors[i], pos_scores[i][:len(items[i].positives)],
                                     cfg, need, rescorer, first_pos[i],
                                     depth_used=w, rounds=rounds[i], promote=promotable[i])
                    if done is None:
                        depth[i] = min(cap, depth[i] * 2)
                        later.append(i)
                    else:
                        results[i] = done
                        advance()
            pending = later
    return results  # type: ignore[return-value]


def _evaluate(item: MineItem, ids: np.ndarray, scores: np.ndarray, whole: bool, capped: bool,
              lowest: float, anchor: float, pos_scores: np.ndarray, cfg: MineConfig, need: int, rescorer,
              first_pos: float, depth_used: int, rounds: int, promote: bool = False) -> Mined | None:
    """The query's result from this window, or ``None`` when a deeper search could do better."""
    method = cfg.method
    found = ids >= 0
    ranks = np.flatnonzero(found) + 1
    ids, scores = ids[found], scores[found]
    keep = ~np.isin(ids, item.exclude) if len(item.exclude) else np.ones(len(ids), bool)
    cand, cscores, cranks = ids[keep], scores[keep].astype(np.float64), ranks[keep]
    # exact when the window reaches below the positive; otherwise a lower bound (deeper than the window)
    positive_rank = 1 + int((cscores > first_pos).sum())
    if rescorer is not None and len(cand):
        cscores = rescorer.score(item.query, cand)
        order = np.argsort(-cscores, kind="stable")
        cand, cscores, cranks = cand[order], cscores[order], cranks[order]
    promoted = None
    if promote and len(cand) and promotion(float(cscores[0]), float(pos_scores[0]), cfg.promote_top):
        promoted = (int(cand[0]), float(cscores[0]), int(cranks[0]))
        cand, cscores, cranks = cand[1:], cscores[1:], cranks[1:]  # a positive now, never a negative
    codes = method.judge(cscores, anchor)
    valid = np.flatnonzero(codes == VALID)
    last_rank = method.last_useful_rank()
    window_covered = last_rank is not None and len(cand) >= last_rank
    below_floor = (rescorer is None and method.min_score is not None and len(scores) > 0
                   and float(scores[-1]) < method.min_score)
    if len(valid) < need and not (whole or capped or window_covered or below_floor):
        return None
    pick = valid[choose(cscores[valid], cfg.k, cfg.sample, cfg.pool, cfg.temperature,
                        query_rng(cfg.seed, item.key) if cfg.sample != "top" else None)]
    rejected = {name: int((codes == code).sum()) for code, name in CODE_NAMES.items()}
    rejected["excluded"] = int((~keep).sum())
    short = method.short_reason(cscores, anchor, cfg.k, whole) if len(pick) < cfg.k else None
    return Mined(docs=cand[pick], scores=cscores[pick], ranks=cranks[pick],
                 positive_scores=np.asarray(pos_scores, dtype=np.float64), lowest_positive=lowest,
                 valid=int(len(valid)), depth=int(depth_used), rounds=rounds, positive_rank=positive_rank,
                 rejected=rejected,
                 short_reason=short, promoted=promoted)

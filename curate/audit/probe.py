"""The probe: can a linear classifier tell two sets of texts apart, without the query?

A retrieval model trained with a row's positive against its negatives learns whatever tells
them apart most cheaply. When the negatives were written by an LLM and the positives were not,
the cheapest cue may be the writing itself (a length, a stock phrase, a register) rather than
relevance. A probe that sees only the texts measures how much such a cue is there: fit a
logistic regression on one view of the texts, score it on folds it did not see, and read the
AUC. 0.5 means the view holds nothing that separates the two sets; 1.0 means it separates them
completely.

Two views: character n-grams (``char_wb`` 2-4-grams, IDF-weighted, the most frequent 5,000;
cheap, and its weights name the cue) and a teacher's embeddings (what an embedding model itself
sees). The n-gram vocabulary and weights are fitted once on all texts to be compared: they use
no labels, so this leaks nothing about which side a held-out text is on and saves a fit per
fold and per comparison.

The AUC is the pooled out-of-fold one (each text scored by the fold model that did not train
on it), with DeLong's 95% interval around it and the range of the per-fold AUCs beside it: the
interval says how far the estimate could move with another sample of texts, the fold range how
much the fits themselves vary.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

CHAR_NGRAMS = (2, 4)
MAX_FEATURES = 5_000
L1_STRENGTH = 10.0  # the n-gram probe's C times its texts (tuned on planted phrases and a SciFact control)


@dataclass
class Probe:
    """What one probe found. Side ``a`` is label 0, side ``b`` label 1: ``oof`` and ``predict``
    give the probability of side ``b``, and a text on side ``b`` that scores high is one the
    probe found easy."""

    auc: float
    low: float  # DeLong 95% interval
    high: float
    fold_aucs: list[float]
    oof: np.ndarray  # out-of-fold probability of side b, for the texts a + b in that order
    predict: Callable[[Sequence[str]], np.ndarray]  # the model fitted on every text, for texts it did not see
    toward_a: list[str] = field(default_factory=list)  # the char n-grams with the most negative weights
    toward_b: list[str] = field(default_factory=list)  # ... the most positive

    def as_dict(self, digits: int = 3) -> dict:
        return {"auc": round(self.auc, digits), "interval": [round(self.low, digits), round(self.high, digits)],
                "folds": [round(min(self.fold_aucs), digits), round(max(self.fold_aucs), digits)]}


def auc_interval(scores: np.ndarray, labels: np.ndarray) -> tuple[float, float, float]:
    """(AUC, low, high): the Mann-Whitney AUC of ``scores`` for ``labels`` (1 positive) and
    DeLong's 95% interval, clipped to [0, 1]. Ties count a half, as in the AUC itself."""
    from scipy.stats import rankdata

    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels).astype(bool)
    pos, neg = scores[labels], scores[~labels]
    m, n = len(pos), len(neg)
    if not m or not n:
        raise ValueError("both sides need at least one score")
    ranks = rankdata(scores)
    auc = (ranks[labels].sum() - m * (m + 1) / 2) / (m * n)
    # structural components: how much each text of one side beats the other side's texts
    v10 = (ranks[labels] - rankdata(pos)) / n
    v01 = 1.0 - (ranks[~labels] - rankdata(neg)) / m
    var = (np.var(v10, ddof=1) / m if m > 1 else 0.0) + (np.var(v01, ddof=1) / n if n > 1 else 0.0)
    half = 1.96 * math.sqrt(max(var, 0.0))
    return float(auc), float(max(0.0, auc - half)), float(min(1.0, auc + half))


def _logistic(c: float, sparse: bool):
    """The probe's classifier. On n-grams an L1 penalty: a shortcut is a few decisive n-grams
    among thousands of topical ones, and the L1 fit keeps those and drops the rest (on a planted
    closing phrase in half the negatives it ranked the planted ones first where an L2 fit let
    topical n-grams in). On embeddings an L2 penalty over standardised dimensions."""
    import inspect

    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    common = {"C": c, "class_weight": "balanced", "max_iter": 2000, "tol": 1e-3, "random_state": 0,
              "solver": "liblinear"}  # on a few thousand texts faster than lbfgs, and deterministic here
    if not sparse:
        return make_pipeline(StandardScaler(), LogisticRegression(**common))
    # scikit-learn 1.8 replaced ``penalty`` by ``l1_ratio``; earlier releases need ``penalty``
    newer = inspect.signature(LogisticRegression).parameters["penalty"].default == "deprecated"
    return LogisticRegression(**common, **({"l1_ratio": 1.0} if newer else {"penalty": "l1"}))


HEAD, TAIL = 1000, 500  # characters of a long text the n-gram view reads, at each end


def ends(text: str) -> str:
    """A long text's first ``HEAD`` and last ``TAIL`` characters: the openings and closings where
    stock phrases sit stay, the cost of a long passage's middle goes (its length is a cue of its own)."""
    return text if len(text) <= HEAD + TAIL else f"{text[:HEAD]} {text[-TAIL:]}"


class CharView:
    """Character n-gram features, fitted once on ``texts`` (every text a set of comparisons will
    use, so one fit serves them all). Each n-gram counts once a text, weighted by its IDF and not
    scaled by the text's length: with counts, or rows scaled to unit length, a stock phrase at
    the end of a long passage weighs too little against the rest of it to be found. A long text
    is read at its two ends (``ends``). Texts it was fitted on are looked up; others are
    transformed."""

    def __init__(self, texts: Sequence[str]):
        from sklearn.feature_extraction.text import TfidfVectorizer

        texts = list(dict.fromkeys(texts))
        self.vectorizer = TfidfVectorizer(preprocessor=ends, analyzer="char_wb", ngram_range=CHAR_NGRAMS,
                                          max_features=MAX_FEATURES, binary=True, norm=None, lowercase=False,
                                          dtype=np.float32)
        self.matrix = self.vectorizer.fit_transform(texts)
        self.row = {t: i for i, t in enumerate(texts)}
        self.names = self.vectorizer.get_feature_names_out()

    def __call__(self, texts: Sequence[str]):
        texts = list(texts)
        if all(t in self.row for t in texts):
            return self.matrix[[self.row[t] for t in texts]]
        return self.vectorizer.transform(texts)


def _cross_validate(x, y: np.ndarray, make: Callable, folds: int, seed: int) -> tuple[np.ndarray, list[float]]:
    """Out-of-fold probabilities of label 1 and each fold's AUC (stratified, shuffled, seeded)."""
    from sklearn.model_selection import StratifiedKFold

    oof = np.zeros(len(y), dtype=np.float64)
    fold_aucs = []
    for train, test in StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed).split(np.zeros(len(y)), y):
        model = make(len(train)).fit(x[train], y[train])
        oof[test] = model.predict_proba(x[test])[:, 1]
        fold_aucs.append(auc_interval(oof[test], y[test])[0])
    return oof, fold_aucs


def probe(a: Sequence[str], b: Sequence[str], view: Callable[[list[str]], Any], folds: int = 5, seed: int = 0,
          top: int = 8) -> Probe:
    """Side ``a`` against side ``b`` on ``view(texts)`` (a ``CharView``, or a function giving one
    embedding row per text, which is standardised first). ``top``: with a ``CharView``, how many
    of the heaviest n-grams toward each side to name."""
    chars = isinstance(view, CharView)
    x = _rows(view, [*a, *b], chars)
    y = np.array([0] * len(a) + [1] * len(b))
    # n-grams: C shrinks as the texts grow, so that the penalty weighs the same against each
    # text's loss: a fold of 100 texts keeps a decisive n-gram, one of 1,000 no more noise
    make = lambda n: _logistic(L1_STRENGTH / n, sparse=True) if chars else _logistic(1.0, sparse=False)  # noqa: E731
    oof, fold_aucs = _cross_validate(x, y, make, folds, seed)
    auc, low, high = auc_interval(oof, y)
    final = make(len(y)).fit(x, y)
    found = Probe(auc, low, high, fold_aucs, oof, lambda t: final.predict_proba(_rows(view, t, chars))[:, 1])
    if chars:
        coef = final.coef_[0]
        order = np.argsort(coef)
        found.toward_a = [str(view.names[i]) for i in order[:top] if coef[i] < 0]
        found.toward_b = [str(view.names[i]) for i in order[::-1][:top] if coef[i] > 0]
    return found


def _rows(view, texts, chars: bool):
    """The view's features of ``texts``: a ``CharView``'s sparse rows as they are, embeddings as float32."""
    x = view(list(texts))
    return x if chars else np.asarray(x, dtype=np.float32)

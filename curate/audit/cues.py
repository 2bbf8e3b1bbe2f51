"""Named cues: simple properties that may tell two sets of texts apart, stated in words.

The probe's n-gram weights say where to look; these say what a person would check first:
how long the texts are (and how well length alone separates them), and whether one side keeps
opening or closing with the same few words (an LLM's "Sure, here is ..." or "I hope this
helps"), which the other side does not.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

from curate.audit.probe import auc_interval

PHRASE_WORDS = 3
MIN_SHARE = 0.2  # a phrase starting or ending at least this share of one side's texts ...
MIN_GAP = 0.15  # ... and this much more often there than on the other side


_EDGES = re.compile(r"^\W+|\W+$")


def _phrase(text: str, end: bool) -> str | None:
    """The first (or last) few words, lower-cased, punctuation at the edges of words kept out
    (only the words near that end are looked at: texts may be long)."""
    near = text.rsplit(maxsplit=2 * PHRASE_WORDS)[-2 * PHRASE_WORDS:] if end \
        else text.split(maxsplit=2 * PHRASE_WORDS)[:2 * PHRASE_WORDS]
    toks = [w for w in (_EDGES.sub("", w.lower()) for w in near) if w]
    if len(toks) < PHRASE_WORDS:
        return None
    return " ".join(toks[-PHRASE_WORDS:] if end else toks[:PHRASE_WORDS])


def _recurring(a: Sequence[str], b: Sequence[str], names: tuple[str, str]) -> list[dict]:
    found = []
    for where, end in (("opening", False), ("closing", True)):
        counts = [Counter(p for p in (_phrase(t, end) for t in side) if p) for side in (a, b)]
        for k, (side, other) in enumerate(((a, b), (b, a))):
            if not counts[k]:
                continue
            phrase, n = counts[k].most_common(1)[0]
            share, other_share = n / len(side), counts[1 - k][phrase] / len(other)
            if share >= MIN_SHARE and share - other_share >= MIN_GAP:
                found.append({"where": where, "phrase": phrase, "side": names[k], "share": round(share, 3),
                              "other_side_share": round(other_share, 3)})
    return found


def cues(a: Sequence[str], b: Sequence[str], names: tuple[str, str] = ("a", "b")) -> dict:
    """Mean words on each side, the AUC of length alone for telling side ``b`` from side ``a``
    (above 0.5: ``b`` is the longer), and the recurring openings and closings of either side."""
    la = np.array([len(t.split()) for t in a], dtype=np.float64)
    lb = np.array([len(t.split()) for t in b], dtype=np.float64)
    length_auc = auc_interval(np.concatenate([la, lb]), np.array([0] * len(la) + [1] * len(lb)))[0]
    return {"words_a": round(float(la.mean()), 1), "words_b": round(float(lb.mean()), 1),
            "length_auc": round(length_auc, 3), "phrases": _recurring(a, b, names)}

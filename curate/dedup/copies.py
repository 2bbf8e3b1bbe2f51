"""How much of a text copies a document: the share of its word n-grams found there (containment).

One measure for every place that asks whether a query (or a negative) copies its passage:
``generate`` asks the model again when a query it wrote copies its given passage, and the
``heuristics`` filter step drops what still does (the copy guard). Containment, not Jaccard,
because the passage is much longer than the query; word n-grams normalised as
``curate.dedup.shingles`` does, so case, punctuation and spacing do not hide a copy.
"""

from __future__ import annotations

from curate.dedup.shingles import word_ngrams, words

COPY_NGRAM = 4  # n of the word n-grams; a shorter text uses smaller ones (copy_ngram_for)
COPY_MIN_WORDS = 4  # a shorter text is never judged a copy (a keyword query shares its words by design)
COPY_CONTAINMENT = 0.5  # half or more of a text's n-grams in the document: a copy (bench/copy_guard.py)


def is_copy(share: float | None) -> bool:
    """Whether a containment (None: a text too short to judge) makes the text a copy."""
    return share is not None and share >= COPY_CONTAINMENT


def copy_ngram_for(n_words: int, ngram: int) -> int:
    """The n-gram size for a text of ``n_words`` words: ``ngram``, but at most one less than the
    words so a short text has at least two n-grams, and never under 2 (single words say nothing
    about copying). "Question: How vaccines work" (4 words) is judged on 3-grams. Smaller n-grams
    only make the share larger, so a short query is judged no more leniently than a long one."""
    return max(2, min(ngram, n_words - 1))


class CopyGuard:
    """Containment in one document (a record's positive with its title): the share of a text's
    distinct word n-grams, normalised as ``curate.dedup.shingles`` does, that occur in it. The
    document is split into words once and its n-gram sets built once per n.

    ``title`` goes in front of the document's words, unless the document already begins with it
    (a document read from a corpus with titles holds it there, ``positive_title`` beside)."""

    def __init__(self, document: str, ngram: int = COPY_NGRAM, title: str | None = None):
        self.tokens, self.ngram = words(document), ngram
        head = words(title or "")
        if head and not " ".join(self.tokens).startswith(" ".join(head)):  # normalize(document), as text
            self.tokens = head + self.tokens
        self._sets: dict[int, set] = {}

    def share(self, text: str, min_words: int = COPY_MIN_WORDS) -> tuple[float, int] | None:
        """(containment, n) of ``text``; None for a text under ``min_words`` words."""
        tokens = words(text)
        if len(tokens) < max(min_words, 2):
            return None
        n = copy_ngram_for(len(tokens), self.ngram)
        if n not in self._sets:
            self._sets[n] = word_ngrams(self.tokens, n)
        grams = word_ngrams(tokens, n)
        return len(grams & self._sets[n]) / len(grams), n


def containment(text: str, document: str, ngram: int = COPY_NGRAM, min_words: int = COPY_MIN_WORDS):
    """(share of ``text``'s word n-grams found in ``document``, n), or None for a short text."""
    return CopyGuard(document, ngram).share(text, min_words)

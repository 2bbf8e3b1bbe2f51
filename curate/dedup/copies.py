"""How much of a text copies a document: the share of its word n-grams found there (containment).

One measure for every place that asks whether a query (or a negative) copies its passage:
``generate`` asks the model again when a query it wrote copies its given passage, and the
``heuristics`` filter step drops what still does (the copy guard). Containment, not Jaccard,
because the passage is much longer than the query; word n-grams normalised as
``curate.dedup.shingles`` does, so case, punctuation and spacing do not hide a copy.

A text in a script written without spaces (Chinese, Japanese, Thai...: ``shingles.unspaced``) is
measured in characters: its words are counted as word equivalents (``shingles.word_count``), its
n-grams are character n-grams covering about as much text as the word n-grams would
(``copy_ngram_for`` words x ``shingles.chars_per_word``), and the document is cut the same way
for it. Text in spaced scripts is measured exactly as before.
"""

from __future__ import annotations

from curate.dedup.shingles import chars_per_word, unspaced, word_count, word_ngrams, words

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
        self.document, self.title, self.ngram = document, title, ngram
        self._tokens: dict[bool, list[str]] = {}  # the document's words, cut as spaced / unspaced text is
        self._sets: dict[tuple[bool, int], set] = {}

    def doc_tokens(self, unspaced_text: bool = False) -> list[str]:
        """The title's and the document's words, cut the way a spaced (or unspaced) text is."""
        if unspaced_text not in self._tokens:
            tokens = words(self.document, unspaced_text)
            head = words(self.title or "", unspaced_text)
            if head and not " ".join(tokens).startswith(" ".join(head)):  # normalize(document), as text
                tokens = head + tokens
            self._tokens[unspaced_text] = tokens
        return self._tokens[unspaced_text]

    @property
    def tokens(self) -> list[str]:
        return self.doc_tokens(False)

    def share(self, text: str, min_words: int = COPY_MIN_WORDS) -> tuple[float, int] | None:
        """(containment, n) of ``text``; None for a text under ``min_words`` words (word
        equivalents for unspaced text, whose n counts characters)."""
        mode = unspaced(text)
        tokens = words(text, mode)
        n_words = word_count(text, lambda _: len(tokens))
        if n_words < max(min_words, 2):
            return None
        n = copy_ngram_for(n_words, self.ngram)
        if mode:  # n words' worth of characters, still two n-grams at least
            n = max(2, min(round(n * chars_per_word(text)), len(tokens) - 1))
        if (mode, n) not in self._sets:
            self._sets[mode, n] = word_ngrams(self.doc_tokens(mode), n)
        grams = word_ngrams(tokens, n)
        return len(grams & self._sets[mode, n]) / len(grams), n


def containment(text: str, document: str, ngram: int = COPY_NGRAM, min_words: int = COPY_MIN_WORDS):
    """(share of ``text``'s word n-grams found in ``document``, n), or None for a short text."""
    return CopyGuard(document, ngram).share(text, min_words)

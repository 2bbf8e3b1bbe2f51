"""How curate cuts a text into shingles for MinHash, in two ways named for what each is for.

Both start from one normalisation (``normalize``: lower-case ``\\w+`` words, single-spaced),
so "the same text" means the same thing everywhere. They differ in the unit:

* ``word_shingles`` (word n-grams, 3 by default): for records and passages, where there are
  enough words for n-grams to be specific. The batch MinHash of the filter's ``minhash`` step,
  staged dedup on Ray and export's decontamination use these (vectorised in ``minhash``).
* ``char_shingles`` (5-character n-grams): for short texts, a task description or a query,
  whose few words give too few word n-grams to compare. Brainstorm's near-duplicate index
  and the heuristics' copy checks use these.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"\w+", re.UNICODE)


def normalize(text: str) -> str:
    """Lower-case and keep only the ``\\w+`` words, single-spaced."""
    return " ".join(_WORD.findall(text.lower()))


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def word_shingles(text: str, ngram: int = 3) -> set[tuple[str, ...]]:
    """The word n-gram shingle set of ``text`` (all its words as one shingle when it has
    fewer than ``ngram``; empty when it has none). The reference the vectorised hashing in
    ``minhash`` is tested against, and the set for small inputs."""
    w = words(text)
    if not w:
        return set()
    return word_ngrams(w, min(ngram, len(w)))


def word_ngrams(tokens: list[str], n: int) -> set[tuple[str, ...]]:
    """The n-grams of words already split (``words``): for a caller that needs several n of one
    text (the heuristics' copy guard) and so splits it once."""
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def char_shingles(text: str, size: int = 5) -> set[bytes]:
    """Character n-grams of the normalized text: robust for short texts, where word n-grams are few."""
    norm = normalize(text)
    if len(norm) <= size:
        return {norm.encode("utf-8")}
    return {norm[i : i + size].encode("utf-8") for i in range(len(norm) - size + 1)}

"""How curate cuts a text into shingles for MinHash, in two ways named for what each is for.

Both start from one normalisation (``normalize``: lower-case ``\\w+`` words, single-spaced),
so "the same text" means the same thing everywhere. They differ in the unit:

* ``word_shingles`` (word n-grams, 3 by default): for records and passages, where there are
  enough words for n-grams to be specific. The batch MinHash of the filter's ``minhash`` step,
  staged dedup on Ray and export's decontamination use these (vectorised in ``minhash``).
* ``char_shingles`` (5-character n-grams): for short texts, a task description or a query,
  whose few words give too few word n-grams to compare. Brainstorm's near-duplicate index
  and the heuristics' copy checks use these.

**Scripts written without spaces.** Chinese, Japanese, Thai, Lao, Khmer and Burmese put no
space between words, so ``\\w+`` finds whole clauses there, not words: a sentence is one
"word", two near-identical sentences share no word n-gram, and a 200-character passage counts
as 3 words. A text whose letters are mostly (``UNSPACED_SHARE``) from those scripts is
``unspaced`` (a property of the text alone, no language label needed); for it ``words`` makes
every character of those scripts a token of its own (with the combining vowel signs that belong
to it: \\w leaves Thai or Burmese marks out and would cut a syllable in two), while a Latin word or
a number inside it stays one token. Everything built on words then works on characters:

* word n-grams become character n-grams of about the same stretch of text, ``ngram_for``: n
  words x ``CHARS_PER_WORD`` of the script (a word is about 2 Chinese or Japanese characters, 4
  Thai, Lao, Khmer or Burmese ones), so the ``minhash`` step's word 3-grams are 6-character
  shingles in Chinese;
* counts of words (length checks, the fewest words a copy check judges) are word
  equivalents, ``word_count``: characters / ``CHARS_PER_WORD``.

Text in spaced scripts (English, German, Russian, Hindi, Korean...) is not touched by any of
this: its words, shingles and counts are exactly what they were before.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

_WORD = re.compile(r"\w+", re.UNICODE)


def normalize(text: str) -> str:
    """Lower-case and keep only the ``\\w+`` words, single-spaced."""
    return " ".join(_WORD.findall(text.lower()))


# ---- scripts written without spaces between words
# Characters per word, roughly, in running text (a word-equivalent is this many characters).
CHARS_PER_WORD = {"cjk": 2.0, "southeast-asian": 4.0}
# Unicode blocks of those scripts (Korean's Hangul is written with spaces: not here).
_BLOCKS = {
    "cjk": [(0x3005, 0x3007), (0x3021, 0x3029), (0x3031, 0x3035), (0x303B, 0x303C),  # 々〆〇, kana repeats
            (0x3040, 0x30FF), (0x3100, 0x312F), (0x31A0, 0x31BF), (0x31F0, 0x31FF),  # kana, bopomofo
            (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0xFF66, 0xFF9F),  # han, halfwidth kana
            (0x20000, 0x2FA1F), (0x30000, 0x323AF)],
    "southeast-asian": [(0x0E00, 0x0E7F), (0x0E80, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF),  # thai lao myanmar khmer
                        (0x19E0, 0x19FF), (0xA9E0, 0xA9FF), (0xAA60, 0xAA7F)],
}
UNSPACED_SHARE = 0.5  # a text is unspaced when at least this share of its letters is in those scripts


def _char_class(ranges: list[tuple[int, int]]) -> str:
    return "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in ranges)


def _marks(ranges: list[tuple[int, int]]) -> str:
    """The combining marks of the blocks, as a character class body (\\w matches none of them)."""
    return "".join(f"\\U{c:08x}" for lo, hi in ranges for c in range(lo, hi + 1)
                   if unicodedata.category(chr(c)).startswith("M"))


_ALL_BLOCKS = _char_class([r for ranges in _BLOCKS.values() for r in ranges])
_ANY_UNSPACED = re.compile(f"[{_ALL_BLOCKS}]")
_LETTER = re.compile(r"[^\W\d_]")
_SCRIPT_LETTER = {script: re.compile(f"(?=[^\\W\\d_])[{_char_class(ranges)}]") for script, ranges in _BLOCKS.items()}
_SCRIPT_CHAR = {script: re.compile(f"[{_char_class(ranges)}]") for script, ranges in _BLOCKS.items()}
# a token of unspaced text: one character of those scripts with its marks, or a run of other word characters
_TOKEN = re.compile(f"(?=\\w)[{_ALL_BLOCKS}][{''.join(_marks(r) for r in _BLOCKS.values())}]*"
                    f"|(?:(?![{_ALL_BLOCKS}])\\w)+")


def _script_letters(text: str) -> dict[str, int] | None:
    """Letters per unspaced script when they make up ``UNSPACED_SHARE`` of the text's letters,
    else None (the text is written with spaces)."""
    if text.isascii() or _ANY_UNSPACED.search(text) is None:
        return None
    counts = {script: len(rx.findall(text)) for script, rx in _SCRIPT_LETTER.items()}
    letters = len(_LETTER.findall(text))
    if not letters or sum(counts.values()) < UNSPACED_SHARE * letters:
        return None
    return counts


def unspaced(text: str) -> bool:
    """Whether ``text`` is mostly written in scripts that put no spaces between words."""
    return _script_letters(text) is not None


def chars_per_word(text: str) -> float:
    """About how many characters make one word in ``text``: 1 for spaced text; for unspaced text
    the mean of ``CHARS_PER_WORD`` over its scripts, weighted by its letters in each."""
    counts = _script_letters(text)
    if counts is None:
        return 1.0
    total = sum(counts.values())
    return total / sum(n / CHARS_PER_WORD[script] for script, n in counts.items())


def ngram_for(text: str, ngram: int) -> int:
    """The token n-gram size that covers about ``ngram`` words of ``text``: ``ngram`` for spaced
    text, ``ngram`` x ``chars_per_word`` characters for unspaced text."""
    if not unspaced(text):
        return ngram
    return max(ngram, round(ngram * chars_per_word(text)))


def words(text: str, unspaced_text: bool | None = None) -> list[str]:
    """The lower-cased ``\\w+`` words of ``text``; for unspaced text (``unspaced``; or as
    ``unspaced_text`` says, to cut a document the way the text it is compared with is cut) every
    character of those scripts is a word of its own, with its combining marks."""
    if unspaced_text is None:
        unspaced_text = unspaced(text)
    if unspaced_text:
        return _TOKEN.findall(text.lower())
    return _WORD.findall(text.lower())


def token_text(text: str, unspaced_text: bool | None = None) -> str:
    """``words`` joined by single spaces: ``normalize`` for spaced text, one character per word
    in unspaced text (so that a copied stretch of it is found between spaces)."""
    return " ".join(words(text, unspaced_text))


def word_count(text: str, spaced: Callable[[str], int] | None = None) -> int:
    """How many words ``text`` has: for spaced text ``spaced(text)`` (default: ``len(words(text))``,
    a caller may count its own way, e.g. whitespace-separated); for unspaced text word
    equivalents, each character of those scripts counting 1 / ``CHARS_PER_WORD`` of its script and
    any other word 1 (rounded down; at least 1 when it has any)."""
    if not unspaced(text):
        return spaced(text) if spaced is not None else len(words(text, False))
    total = 0.0
    for token in words(text, True):
        script = next((s for s, rx in _SCRIPT_CHAR.items() if rx.match(token)), None)
        total += 1.0 if script is None else 1.0 / CHARS_PER_WORD[script]
    return max(1, int(total)) if total else 0


def word_shingles(text: str, ngram: int = 3) -> set[tuple[str, ...]]:
    """The word n-gram shingle set of ``text`` (all its words as one shingle when it has
    fewer than ``ngram``; empty when it has none). The reference the vectorised hashing in
    ``minhash`` is tested against, and the set for small inputs. Unspaced text: character
    n-grams of ``ngram_for`` characters."""
    w, n = shingle_tokens(text, ngram)
    if not w:
        return set()
    return word_ngrams(w, min(n, len(w)))


def shingle_tokens(text: str, ngram: int) -> tuple[list[str], int]:
    """(``words(text)``, the n of its n-gram shingles): what ``word_shingles`` and the vectorised
    MinHash cut a text into."""
    u = unspaced(text)
    return words(text, u), ngram_for(text, ngram) if u else ngram


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

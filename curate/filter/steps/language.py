"""Language check: texts written in another language than the record says (Linq-Embed-Mistral).

A record made for a language (``language``: the query's; ``positive_language``: the positive's
and the negatives' when they are in another one, as bitext's target) is checked with a language
identifier, py3langid (langid.py's model, about 140 languages, shipped inside the package):

* ``query-wrong-language``: the query is not in ``language`` (the record goes);
* ``positive-wrong-language``: the positive is not in ``positive_language or language`` (the
  record goes);
* ``negative-translated``: a negative is not in the negatives' language but in another language
  of the record, the query's (a bitext source) or the positive's: a translation of the query or
  the positive, the fault Linq found in multilingual LLM negatives (that negative goes);
* ``negative-wrong-language``: a negative in any other language (that negative goes).

Each drop names the language expected and the one detected, with both probabilities. A record
whose negatives all went goes as ``no-negatives-left`` (``drop_if_no_negatives``). A record
without ``language`` passes untouched, and so does every text in a language the identifier does
not know (counted in the report): the step costs nothing on data that carries no languages.

When is a text "not in" a language? Short texts are where identification errs: a query of three
words gives the model a handful of character n-grams, and close languages (German and
Luxembourgish, Danish and Norwegian, Chinese and Wu) or a name in the query (Mount Everest,
iPhone) pull it elsewhere. Two guards, each a property of the text alone:

* ``min_chars``: a text with fewer letters is not judged (digits, spaces and punctuation carry
  no language). A letter of a script written without spaces (Chinese, Japanese, Thai...) counts
  3: one such character holds about what three Latin letters do (about 2 characters make a
  Chinese or Japanese word, about 6 letters an English one), and the script itself already
  tells most of the answer;
* ``odds``: a text is in the wrong language only when the likeliest language is at least
  ``odds`` times likelier than the expected one. A close relative of the expected language
  shares its probability with it and rarely reaches 10 to 1, while a text really written in
  another language sits at hundreds or thousands to 1 (the probabilities are py3langid's own,
  normalised over the languages it considers).

``languages`` restricts the identifier to a list of languages (null: every language it knows).
That makes close relatives outside the list impossible answers, but also hides a text written in
a language outside it, which then counts as whichever listed language is nearest: on a sample of
short queries the full model with ``odds: 10`` made no false drop and missed fewer wrong-language
texts than a list of the eight largest languages did.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any, Literal

from curate.core.errors import CurateError
from curate.core.params import check_params
from curate.core.records import Record
from curate.dedup.shingles import unspaced
from curate.filter.base import FilterContext, keep_negatives, register

FIELDS = ("query", "positive", "negatives")
UNSPACED_LETTER_WEIGHT = 3  # a letter of a script without spaces counts as this many (min_chars)
# Codes a record may carry for a language the identifier knows under another code.
ALIASES = {"nb": "no", "iw": "he", "in": "id", "ji": "yi", "jw": "jv", "fil": "tl", "cmn": "zh"}
_LETTER = re.compile(r"[^\W\d_]")


@dataclass
class LanguageParams:
    # Fewer letters than this (a letter of Chinese, Japanese, Thai... counts 3): the text is not judged.
    min_chars: int = field(default=15, metadata={"min": 1})
    # A text is in the wrong language when another is at least this many times likelier than the expected one.
    odds: float = field(default=10.0, metadata={"min": 1.0})
    # Detect among these ISO 639 codes only (null: every language the identifier knows); a record
    # whose language is not among them is not judged.
    languages: list[str] | None = None
    # Which texts are judged.
    fields: list[Literal["query", "positive", "negatives"]] | str = field(default_factory=lambda: list(FIELDS))
    drop_if_no_negatives: bool = True  # a record whose negatives all went is dropped as no-negatives-left


def _identifier_module():
    try:
        from py3langid import langid
    except ImportError:
        raise CurateError("the language step needs py3langid: pip install py3langid") from None
    return langid


@lru_cache(maxsize=4)
def identifier(languages: tuple[str, ...] | None = None):
    """py3langid's identifier with probabilities (normalised over ``languages``, or every label)."""
    langid = _identifier_module()
    ident = langid.LanguageIdentifier.from_model_file(langid.MODEL_FILE, norm_probs=True)
    if languages:
        ident.set_languages(list(languages))
    return ident


def known_code(code: str | None, labels) -> str | None:
    """The identifier's label for a record's language code (``pt-BR`` -> ``pt``, ``nb`` -> ``no``),
    or None when it does not know the language."""
    if not isinstance(code, str) or not code.strip():
        return None
    code = code.strip().lower().replace("_", "-")
    for cand in (code, code.split("-")[0]):
        cand = ALIASES.get(cand, cand)
        if cand in labels:
            return cand
    return None


def letters(text: str) -> int:
    """The letters ``min_chars`` counts: a letter of a script without spaces counts 3."""
    n = len(_LETTER.findall(text))
    return n * UNSPACED_LETTER_WEIGHT if n and unspaced(text) else n


def _fields(value: Any) -> set[str]:
    fields = {value} if isinstance(value, str) else set(value or [])
    if fields - set(FIELDS):
        raise CurateError(f"language: fields must be among {', '.join(FIELDS)}, got {sorted(fields - set(FIELDS))}")
    return fields


def _check(params: dict[str, Any]) -> None:
    _fields(params.get("fields", list(FIELDS)))
    langs = params.get("languages")
    if langs:
        labels = identifier(None).labels
        for code in langs:
            if code not in labels:
                near = difflib.get_close_matches(str(code), labels, n=1)
                hint = f" (did you mean {near[0]}?)" if near else ""
                raise CurateError(f"language: languages: {code!r} is not a language the identifier knows{hint}")


class _Judge:
    """Whether texts are in their expected language, with the numbers a drop reports."""

    def __init__(self, p: dict[str, Any]):
        self.ident = identifier(tuple(sorted(set(p["languages"]))) if p["languages"] else None)
        self.labels = set(self.ident.labels)
        self.min_chars, self.odds = int(p["min_chars"]), float(p["odds"])
        self.judged = self.too_short = 0
        self.wrong_languages: Counter = Counter()  # what the texts judged wrong were written in

    def wrong(self, text: str, expected: str) -> dict[str, Any] | None:
        """The drop's numbers when ``text`` is not in ``expected`` (a label), else None (also for
        a text too short to judge)."""
        if not isinstance(text, str) or letters(text) < self.min_chars:
            self.too_short += 1
            return None
        self.judged += 1
        probs = dict(self.ident.rank(text))
        best = max(probs, key=probs.get)
        p_best, p_expected = probs[best], probs.get(expected, 0.0)
        if best == expected or p_best < self.odds * p_expected:
            return None
        self.wrong_languages[best] += 1
        return {"expected": expected, "detected": best, "probability": round(p_best, 4),
                "expected_probability": round(p_expected, 6)}


@register("language", LanguageParams, _check, kind="map")
def language(records: list[Record], params: dict[str, Any], ctx: FilterContext) -> list[Record]:
    p = asdict(check_params("language", LanguageParams, params))
    fields = _fields(p["fields"])
    judge: _Judge | None = None
    kept: list[Record] = []
    checked = without = negatives_dropped = 0
    unknown: Counter = Counter()
    for rec in records:
        query_lang = getattr(rec, "language", None)
        if not query_lang:
            without += 1
            kept.append(rec)
            continue
        if judge is None:  # the model loads only when some record carries a language
            judge = _Judge(p)
        checked += 1
        own = known_code(query_lang, judge.labels)
        target_code = getattr(rec, "positive_language", None) or query_lang
        target = known_code(target_code, judge.labels)
        for code, label in ((query_lang, own), (target_code, target)):
            if label is None:
                unknown[str(code)] += 1
        fault = None
        if "query" in fields and own is not None:
            got = judge.wrong(rec.query, own)
            fault = ("query-wrong-language", {"field": "query", **got}) if got else None
        if fault is None and "positive" in fields and target is not None:
            got = judge.wrong(rec.positive, target)
            fault = ("positive-wrong-language", {"field": "positive", **got}) if got else None
        if fault is not None:
            ctx.reject(rec, *fault)
            continue
        if "negatives" not in fields or target is None or not rec.negatives:
            kept.append(rec)
            continue
        # languages of the record's other texts: a negative in one of them translates the query or positive
        record_langs = {lab for lab in (own, target) if lab is not None} - {target}
        survivors = []
        for i, neg in enumerate(rec.negatives):
            got = judge.wrong(neg.text, target)
            if got is None:
                survivors.append(neg)
                continue
            reason = "negative-translated" if got["detected"] in record_langs else "negative-wrong-language"
            ctx.reject(rec, reason, {"index": i, **got}, negative=neg)
            negatives_dropped += 1
        if keep_negatives(rec, survivors, ctx, drop_empty=p["drop_if_no_negatives"]):
            kept.append(rec)

    ctx.note(records_checked=checked, records_without_language=without,
             texts_judged=judge.judged if judge else 0, texts_too_short=judge.too_short if judge else 0,
             negatives_dropped=negatives_dropped, wrong_languages=dict(judge.wrong_languages) if judge else {},
             unknown_languages=dict(unknown))
    return kept

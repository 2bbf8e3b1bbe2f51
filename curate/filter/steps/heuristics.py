"""Cheap text checks for the faults LLM-written triplets are known for (Linq-Embed-Mistral,
Tables 9-10), run before anything that needs a model.

Per record, in this order (the first record-level fault wins):

* ``empty-text``: the query, the positive or a negative is empty or only whitespace;
* ``too-short``: fewer characters than ``min_chars`` for its field (query / document);
* ``length-off``: a document's word count is far from the ``num_words`` the generator asked
  for (only when that placeholder was an integer), below ``length_tolerance`` x requested or
  above ``length_max_ratio`` x requested;
* ``query-word-for-word-in-document``: a document holds the query word for word (case, whitespace and
  punctuation ignored) and the query has at least ``query_copy_min_words`` words (null: never);
* ``query-mostly-from-positive``: the copy guard. Most of the query's word n-grams occur in the
  positive with its title (share >= ``copy_containment``; null: off). A query that copies its
  passage with a word changed, a clause moved or "Question:" in front is no exact copy, yet it
  teaches the same thing: match words, which the student already does well. Containment (the
  share of the query's n-grams found in the passage), not Jaccard, because the passage is much
  longer than the query. n is ``copy_ngram`` (4), smaller for a short query (``copy_ngram_for``)
  so that a title with a prefix is caught. As for ``query-word-for-word-in-document``, a query under
  ``query_copy_min_words`` words is never judged (a keyword query is meant to share its words
  with the passage), and with that null neither check runs;
* ``self-explanation``: a document talks about itself as training data ("this is a hard
  negative", "unlike the positive", "Level 2:"), matched by ``self_explanation_patterns``;
* ``negative-equals-positive`` / ``duplicate-negative``: a negative that is the positive or an
  earlier negative again, by normalised equality or 5-character shingle Jaccard >= threshold;
* ``negative-copies-positive``: the copy guard on a negative, measured the same way against the
  positive and its title (a negative made from the positive by a few edits, which Jaccard over
  the whole texts misses when the two differ in length).

Text in a script written without spaces (Chinese, Japanese, Thai...: ``shingles.unspaced``) is
measured in characters: its "words" above are word equivalents (characters /
``shingles.CHARS_PER_WORD``, about 2 for Chinese and Japanese), and its n-grams character n-grams
spanning as much text (``curate.dedup.shingles``); text in spaced scripts is measured in words.

Families in ``copy_exempt_families`` (STS and bitext: a positive that rewords or translates the
query by design) skip the copy guard on both sides, those in ``copy_exempt_negatives``
(long-short, whose negatives are labels worded like the correct one) on negatives only.

A fault in the query or the positive drops the record; a fault in a negative drops that
negative only, and a record whose negatives were all dropped here goes as ``no-negatives-left``.
Records without faults come back as they came in (same object, nothing changed).
"""

from __future__ import annotations

import re
from typing import Any

from curate.core.errors import CurateError
from curate.core.params import schema_from_defaults
from curate.filter.base import keep_negatives, merge_params, FilterContext, register
from curate.dedup.copies import COPY_CONTAINMENT, COPY_MIN_WORDS, COPY_NGRAM, CopyGuard
from curate.dedup import shingles
from curate.dedup.shingles import char_shingles, normalize, token_text
from curate.core.records import Negative, Record

DEFAULT_SELF_EXPLANATION_PATTERNS = [
    r"\bhard[- ]negatives?\b",
    r"\b(?:easy|soft|weak)[- ]negatives?\b",
    r"\bnegative examples?\b",
    r"\b(?:the|a|this) (?:positive|negative) (?:document|passage)\b",
    r"\bunlike the (?:positive|query|correct (?:document|passage|answer|label))\b",
    r"\bthis (?:document|passage|text|label|sentence) (?:is|is not|isn't) (?:\w+ )?(?:relevant|irrelevant|unrelated)\b",
    r"\b(?:irrelevant|unrelated|not relevant) to the (?:query|question|search)\b",
    r"\bthis (?:document|passage|text) does(?: not|n't) (?:directly )?(?:answer|address)\b",
    r"\b(?:does|do) not (?:directly )?answer the (?:query|question)\b",
    # a level label leaking from the prompt's grading: a text opening with "Level 2:",
    # "(level 3)" anywhere, "level-1 negative"
    r"\A\W*level[ -]?[1-4]\s*[:.)\]-]",
    r"[(\[]\s*level[ -]?[1-4]\s*[)\]]",
    r"\blevel[ -]?[1-4] (?:negative|document|passage|example)\b",
]

DEFAULTS: dict[str, Any] = {
    "min_chars": {"query": 3, "document": 20},
    # Families whose documents (or queries) are short by design, following their specs' minLength.
    "min_chars_by_family": {
        "long-short": {"document": 1},
        "short-short": {"document": 3},
        "sts": {"document": 3},
        "bitext": {"query": 2, "document": 2},
    },
    "length_tolerance": 0.5,  # a document under 0.5 x the requested words is off
    "length_max_ratio": 3.0,  # ... and so is one over 3 x (null: no upper bound)
    "length_query_families": ["long-short"],  # there num_words is the query's (input text's) length
    # The fewest words a query needs to be judged a copy, word for word or by the copy guard
    # (shorter: a keyword query, meant to share its words); null: a query may copy its positive.
    "query_copy_min_words": 4,
    # STS negatives may wrap the query (e.g. "It is not true that <query>"): a wanted hard case.
    "query_copy_exempt_negatives": ["sts"],
    "self_explanation_patterns": DEFAULT_SELF_EXPLANATION_PATTERNS,
    "near_equal_threshold": 0.9,
    "shingle_size": 5,
    # The copy guard: drop a query (or negative) with this share or more of its word n-grams in
    # the positive with its title (null: off); measured in bench/copy_guard.py.
    "copy_containment": COPY_CONTAINMENT,
    "copy_ngram": COPY_NGRAM,  # n of the word n-grams; a shorter text uses smaller ones (copy_ngram_for)
    # Families whose positive rewords or translates the query by design: no copy guard there.
    "copy_exempt_families": ["sts", "bitext"],
    # ... and where only negatives are exempt: long-short's negatives are labels, which share
    # the correct label's wording by design ("review of a hotel" / "review of a restaurant").
    "copy_exempt_negatives": ["long-short"],
}

def _params(params: dict[str, Any] | None) -> dict[str, Any]:
    params = dict(params or {})
    p = merge_params("heuristics", params)
    p["min_chars"] = {**DEFAULTS["min_chars"], **(params.get("min_chars") or {})}
    tol = p["length_tolerance"]
    if tol is not None and not (isinstance(tol, (int, float)) and 0 < tol <= 1):
        raise CurateError(f"heuristics: length_tolerance must be in (0, 1], got {tol!r}")
    hi = p["length_max_ratio"]
    if hi is not None and not (isinstance(hi, (int, float)) and hi >= 1):
        raise CurateError(f"heuristics: length_max_ratio must be >= 1 or null, got {hi!r}")
    thr = p["near_equal_threshold"]
    if not (isinstance(thr, (int, float)) and 0 < thr <= 1):
        raise CurateError(f"heuristics: near_equal_threshold must be in (0, 1], got {thr!r}")
    least = p["query_copy_min_words"]
    if least is not None and (isinstance(least, bool) or not isinstance(least, int) or least < 1):
        raise CurateError(f"heuristics: query_copy_min_words must be a whole number >= 1 or null, got {least!r}")
    cut = p["copy_containment"]
    if cut is not None and (isinstance(cut, bool) or not isinstance(cut, (int, float)) or not 0 < cut <= 1):
        raise CurateError(f"heuristics: copy_containment must be in (0, 1] or null, got {cut!r}")
    n = p["copy_ngram"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise CurateError(f"heuristics: copy_ngram must be a whole number >= 2, got {n!r}")
    for key in ("copy_exempt_families", "copy_exempt_negatives"):
        exempt = p[key] or []
        p[key] = [exempt] if isinstance(exempt, str) else list(exempt)
    patterns = p["self_explanation_patterns"] or []
    if isinstance(patterns, str):
        patterns = [patterns]
    compiled = []
    for pat in patterns:
        try:
            compiled.append(re.compile(pat, re.IGNORECASE))
        except re.error as e:
            raise CurateError(f"heuristics: bad self_explanation_patterns regex {pat!r}: {e}") from None
    p["_patterns"] = compiled
    return p


def word_count(text: str) -> int:
    """Whitespace-separated words; word equivalents for a text in a script written without
    spaces (Chinese, Japanese, Thai...: characters / ``shingles.CHARS_PER_WORD``)."""
    return shingles.word_count(text, lambda t: len(t.split()))


def jaccard(a: set, b: set) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def guard_fault(guard: CopyGuard, text: str, reason: str, field: str, min_words: int,
               threshold: float) -> tuple[str, dict[str, Any]] | None:
    got = guard.share(text, min_words)
    if got is None or got[0] < threshold:
        return None
    return reason, {"field": field, "containment": round(got[0], 4), "ngram": got[1], "threshold": threshold}


def _requested_words(rec: Record) -> int | None:
    ph = rec.meta.get("placeholders") if isinstance(rec.meta, dict) else None
    n = ph.get("num_words") if isinstance(ph, dict) else None
    # bool is an int in Python; a string such as "at least 50" is not a number we can check
    if isinstance(n, int) and not isinstance(n, bool) and n > 0:
        return n
    return None


class _Checker:
    def __init__(self, p: dict[str, Any]):
        self.p = p

    def min_chars(self, family: str, field: str) -> int:
        by_family = (self.p.get("min_chars_by_family") or {}).get(family) or {}
        return int(by_family.get(field, self.p["min_chars"].get(field, 0)) or 0)

    def text_fault(self, text: str, family: str, field: str) -> tuple[str, dict[str, Any]] | None:
        """empty-text / too-short for one text."""
        if not text or not text.strip():
            return "empty-text", {"field": field, "chars": len(text or "")}
        need = self.min_chars(family, field)
        chars = len(text.strip())
        if chars < need:
            return "too-short", {"field": field, "chars": chars, "min_chars": need}
        return None

    def length_fault(self, text: str, requested: int | None, field: str) -> tuple[str, dict[str, Any]] | None:
        if requested is None:
            return None
        words = word_count(text)
        unit = {"unit": "word-equivalents"} if shingles.unspaced(text) else {}
        tol, hi = self.p["length_tolerance"], self.p["length_max_ratio"]
        if tol is not None and words < tol * requested:
            return "length-off", {"field": field, "words": words, **unit, "requested": requested,
                                  "ratio": round(words / requested, 3), "min_ratio": tol}
        if hi is not None and words > hi * requested:
            return "length-off", {"field": field, "words": words, **unit, "requested": requested,
                                  "ratio": round(words / requested, 3), "max_ratio": hi}
        return None

    def copy_fault(self, text: str, norm_query: str, query_words: int, field: str,
                   query_unspaced: bool = False):
        """``norm_query``: the query's ``token_text``; the document is cut the same way (a
        character a word when the query is unspaced, so a copied stretch is found mid-sentence)."""
        min_words = self.p["query_copy_min_words"]
        if not norm_query or min_words is None or query_words < int(min_words):  # null: copies allowed
            return None
        if f" {norm_query} " in f" {token_text(text, query_unspaced)} ":
            return "query-word-for-word-in-document", {"field": field, "query_words": query_words,
                                    "min_words": int(self.p["query_copy_min_words"])}
        return None

    def explanation_fault(self, text: str, field: str):
        for rx in self.p["_patterns"]:
            m = rx.search(text)
            if m:
                return "self-explanation", {"field": field, "pattern": rx.pattern,
                                            "matched": m.group(0)[:80]}
        return None


@register("heuristics", schema_from_defaults("HeuristicsParams", DEFAULTS), _params, kind="map")
def heuristics(records: list[Record], params: dict[str, Any], ctx: FilterContext) -> list[Record]:
    p = _params(params)
    check = _Checker(p)
    size = int(p["shingle_size"])
    threshold = float(p["near_equal_threshold"])
    copy_cut = None if p["copy_containment"] is None else float(p["copy_containment"])
    copy_n, guard_exempt = int(p["copy_ngram"]), set(p["copy_exempt_families"])
    query_min, negatives_exempt = p["query_copy_min_words"], set(p["copy_exempt_negatives"])
    kept: list[Record] = []
    negatives_in = negatives_dropped = 0
    length_checked = 0

    for rec in records:
        family = rec.task_type
        requested = _requested_words(rec)
        query_len_family = family in (p["length_query_families"] or [])
        if requested is not None:
            length_checked += 1
        query_unspaced = shingles.unspaced(rec.query or "")
        norm_query = token_text(rec.query or "", query_unspaced)  # normalize(query) for spaced text
        query_words = shingles.word_count(rec.query or "")
        negatives_in += len(rec.negatives)
        guard = None
        if copy_cut is not None and family not in guard_exempt and isinstance(rec.positive, str):
            guard = CopyGuard(rec.positive, copy_n, rec.positive_title)

        # ---- record-level: the query and the positive
        fault = (
            check.text_fault(rec.query, family, "query")
            or check.text_fault(rec.positive, family, "document")
            or (check.length_fault(rec.query, requested, "query") if query_len_family else
                check.length_fault(rec.positive, requested, "positive"))
            or check.copy_fault(rec.positive, norm_query, query_words, "positive", query_unspaced)
            or (guard_fault(guard, rec.query, "query-mostly-from-positive", "query", query_min, copy_cut)
                if guard is not None and query_min is not None else None)
            or check.explanation_fault(rec.positive, "positive")
        )
        if fault is not None:
            reason, numbers = fault
            if numbers.get("field") == "document":
                numbers["field"] = "positive"
            ctx.reject(rec, reason, numbers)
            continue

        # ---- negatives, each on its own, then against the positive and each other
        pos_norm = normalize(rec.positive)
        pos_sh = char_shingles(rec.positive, size)
        copy_exempt = family in (p["query_copy_exempt_negatives"] or [])
        survivors: list[tuple[Negative, str, set]] = []
        dropped_here = 0
        for i, neg in enumerate(rec.negatives):
            text = neg.text if isinstance(neg.text, str) else ""
            fault = (
                check.text_fault(text, family, "document")
                or (None if query_len_family else check.length_fault(text, requested, "negative"))
                or (None if copy_exempt else check.copy_fault(text, norm_query, query_words, "negative",
                                                              query_unspaced))
                or check.explanation_fault(text, "negative")
            )
            if fault is None:
                norm = normalize(text)
                sh = char_shingles(text, size)
                if norm == pos_norm:
                    fault = "negative-equals-positive", {"similarity": 1.0, "exact": True}
                else:
                    sim = jaccard(sh, pos_sh)
                    if sim >= threshold:
                        fault = "negative-equals-positive", {"similarity": round(sim, 4),
                                                             "threshold": threshold}
                if fault is None and guard is not None and family not in negatives_exempt:
                    fault = guard_fault(guard, text, "negative-copies-positive", "negative", COPY_MIN_WORDS,
                                       copy_cut)
                if fault is None:
                    for j, (_, other_norm, other_sh) in enumerate(survivors):
                        sim = 1.0 if norm == other_norm else jaccard(sh, other_sh)
                        if sim >= threshold:
                            fault = "duplicate-negative", {"similarity": round(sim, 4),
                                                           "threshold": threshold,
                                                           "duplicate_of": j}
                            break
                if fault is None:
                    survivors.append((neg, norm, sh))
                    continue
            reason, numbers = fault
            numbers = {"index": i, **numbers}
            if numbers.get("field") == "document":
                numbers["field"] = "negative"
            ctx.reject(rec, reason, numbers, negative=neg)
            dropped_here += 1

        negatives_dropped += dropped_here
        if keep_negatives(rec, [neg for neg, _, _ in survivors], ctx):
            kept.append(rec)

    ctx.note(records_in=len(records), records_kept=len(kept), negatives_in=negatives_in,
             negatives_dropped=negatives_dropped, records_with_word_target=length_checked)
    return kept

"""The shortcut audit of a set of records: which comparisons, each probed, and what to do.

Three comparisons. The first two are made per family (``task_type``) and over all families
together, and over all families (or the one family there is) also per negative level; the
third over all families (or the one family):

* ``llm_vs_corpus``: LLM-written negatives against corpus text (corpus positives and mined
  negatives, see ``origin``): does the writing give the LLM's texts away?
* ``positive_vs_negative``: positives against negatives, without the query: could a model pick
  the positive of a row without reading the query? Records whose positives and negatives both
  come from a corpus (``curate mine``) are the control: there this should sit near 0.5.
* ``level_vs_rest``: negatives of one level against those of the other levels.

A comparison with fewer than ``min_texts`` distinct texts on a side is listed as skipped; the
others are sampled (at most ``sample`` texts a side, seeded) and probed on character n-grams
and, unless turned off, on the bundled teacher's embeddings through its embedding cache (texts
that filter or mine already encoded cost nothing). A text found on both sides of a comparison
cannot be told apart from itself and is left out of both.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from curate.audit.cues import cues
from curate.audit.origin import CORPUS, LLM, negative_origin, positives_with_origin
from curate.audit.probe import CharView, probe
from curate.core.errors import CurateError
from curate.core.records import Record, stable_id

COMPARISONS = {
    "llm_vs_corpus": "LLM-written negatives against corpus text",
    "positive_vs_negative": "positives against negatives, without the query",
    "level_vs_rest": "negatives of one level against those of the other levels",
}
WARNED = ("llm_vs_corpus", "positive_vs_negative")  # a shortcut a trainer takes; levels only inform
ADVICE_LLM = ("mine negatives from a corpus instead (curate mine), drop the most separable with the filter "
              "step `shortcut`, or rebalance LLM-written and corpus negatives")
ADVICE_OTHER = "the two sides differ beyond relevance: see the audit's features in report.json"
ALL = "all"


@dataclass(frozen=True)
class AuditOptions:
    embeddings: bool = True  # the embedding view (the bundled teacher, through its cache)
    sample: int = 500  # texts a side each comparison draws at most
    min_texts: int = 10  # fewer distinct texts on a side: the comparison is skipped
    folds: int = 5
    seed: int = 0
    threshold: float = 0.8  # an AUC at or above it is a warning
    features: int = 8  # n-grams named toward each side

    def __post_init__(self):
        if self.folds < 2:
            raise CurateError(f"audit: folds must be at least 2, got {self.folds}")
        if self.min_texts < self.folds:
            raise CurateError(f"audit: min_texts ({self.min_texts}) must be at least the folds ({self.folds})")
        if self.sample < self.min_texts:
            raise CurateError(f"audit: the sample ({self.sample}) must be at least min_texts ({self.min_texts})")


@dataclass
class Comparison:
    kind: str
    family: str  # a task type, or "all"
    level: int | str  # a negative level, or "all"
    a: list[str]
    b: list[str]
    origins_a: Counter = field(default_factory=Counter)
    origins_b: Counter = field(default_factory=Counter)
    left_out: int = 0  # texts on both sides, in neither

    def names(self) -> tuple[str, str]:
        if self.kind == "llm_vs_corpus":
            a, b = "corpus text", "LLM negatives"
        elif self.kind == "positive_vs_negative":
            a, b = "positives", "negatives"
        else:
            a, b = "other levels", f"level {self.level}"
        return f"{a} ({_origins(self.origins_a)})", f"{b} ({_origins(self.origins_b)})"

    @classmethod
    def of(cls, kind: str, family: str, level, a_entries, b_entries) -> Comparison:
        """The comparison of two sides given as (text, origin) entries: each side's distinct
        texts, and a text found on both sides left out of both."""
        a, oa = _distinct(a_entries)
        b, ob = _distinct(b_entries)
        both = set(a) & set(b)
        if both:
            a, b = [t for t in a if t not in both], [t for t in b if t not in both]
        return cls(kind, family, level, a, b, oa, ob, len(both))


def _origins(c: Counter) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))


def _distinct(entries: Sequence[tuple[str, str]]) -> tuple[list[str], Counter]:
    """The distinct texts (first origin wins) and how many of each origin."""
    seen: dict[str, str] = {}
    for text, origin in entries:
        seen.setdefault(text, origin)
    return list(seen), Counter(seen.values())


def by_origin(records: Sequence[Record]) -> tuple[list, list, list, list]:
    """The records' texts by where they came from (``origin``): every positive, every negative,
    the corpus texts among them and the LLM-written negatives; positives as (text, origin),
    negatives as (text, origin, level). The audit and the filter step ``shortcut`` both split
    texts here, so the two always compare the same sides."""
    pos = [pt for r in records for pt in positives_with_origin(r)]
    negs = [(n.text, negative_origin(n), n.level) for r in records for n in r.negatives]
    corpus = [(t, o) for t, o in pos if o == CORPUS] + [(t, o) for t, o, _ in negs if o == CORPUS]
    llm = [(t, o, lv) for t, o, lv in negs if o == LLM]
    return pos, negs, corpus, llm


def comparisons(records: Sequence[Record]) -> list[Comparison]:
    """Every comparison the records allow, over all families first (when there are several)."""
    families = sorted({r.task_type for r in records})
    groups = ([(ALL, list(records))] if len(families) > 1 else []) + \
             [(f, [r for r in records if r.task_type == f]) for f in families]
    any_corpus = False
    out: list[Comparison] = []
    for g, (family, recs) in enumerate(groups):
        detail = g == 0  # per level over all families (or the one family there is)
        pos, negs, corpus, llm = by_origin(recs)
        any_corpus = any_corpus or bool(corpus)
        if llm and corpus:
            out += _overall_and_by_level("llm_vs_corpus", family, corpus, llm, detail)
        if pos and negs:
            out += _overall_and_by_level("positive_vs_negative", family, pos, negs, detail)
        levels = sorted({lv for _, _, lv in negs if lv is not None})
        if detail and len(levels) > 1:
            for lv in levels:
                out.append(Comparison.of("level_vs_rest", family, lv, [(t, o) for t, o, x in negs if x != lv],
                                         [(t, o) for t, o, x in negs if x == lv]))
    return out


def _overall_and_by_level(kind: str, family: str, side_a: list, negatives: list, detail: bool) -> list[Comparison]:
    """``side_a`` against all of ``negatives`` ((text, origin, level) triples), and, with
    ``detail``, against each level's negatives alone."""
    out = [Comparison.of(kind, family, ALL, side_a, [(t, o) for t, o, _ in negatives])]
    if detail:
        for lv in sorted({lv for _, _, lv in negatives if lv is not None}):
            out.append(Comparison.of(kind, family, lv, side_a, [(t, o) for t, o, x in negatives if x == lv]))
    return out


class _Sampler:
    """At most ``cap`` texts of a side, seeded: those whose hash (with the seed) is lowest, in
    their given order. A text's chance to be drawn is the same in every comparison, so the
    samples of a family and of all families overlap as much as they can, and the texts to
    featurise and encode (their union) stay few."""

    def __init__(self, cap: int, seed: int):
        self.cap, self.seed = cap, seed
        self._keys: dict[str, str] = {}

    def _key(self, text: str) -> str:
        key = self._keys.get(text)
        if key is None:
            key = self._keys[text] = stable_id(self.seed, text)
        return key

    def __call__(self, texts: list[str], cap: int | None = None) -> list[str]:
        cap = self.cap if cap is None else cap
        if len(texts) <= cap:
            return texts
        keep = set(sorted(range(len(texts)), key=lambda i: self._key(texts[i]))[:cap])
        return [t for i, t in enumerate(texts) if i in keep]


@functools.lru_cache(maxsize=1)
def bundled_teacher():
    """The bundled MiniLM with the default embedding cache, loaded once a process."""
    from curate.embed.teacher import Teacher

    return Teacher()


def run_audit(records: Sequence[Record], opts: AuditOptions = AuditOptions(), teacher=None) -> dict[str, Any]:
    """The audit section: settings, one row per probed comparison, the n-grams and phrases it
    found, the skipped comparisons and the warnings. ``teacher``: the embedding view's model
    (default: the bundled MiniLM)."""
    plan, skipped = [], []
    sample = _Sampler(opts.sample, opts.seed)
    # a level's rows draw the level's share of the sample: about the texts of that level the
    # all-levels row drew, so they add few texts to featurise and encode
    levels = len({n.level for r in records for n in r.negatives if n.level is not None}) or 1
    for c in comparisons(records):
        where = {"comparison": c.kind, "family": c.family, "level": c.level}
        if min(len(c.a), len(c.b)) < opts.min_texts:
            skipped.append({**where, "n_a": len(c.a), "n_b": len(c.b),
                            "why": f"fewer than {opts.min_texts} distinct texts on a side"})
            continue
        cap = opts.sample if c.level == ALL else max(opts.min_texts, opts.sample // levels)
        plan.append((c, sample(c.a, cap), sample(c.b, cap)))
    texts = list(dict.fromkeys(t for _, a, b in plan for t in (*a, *b)))
    chars = CharView(texts) if plan else None
    vectors, view_note = None, None
    if opts.embeddings and plan:
        try:
            teacher = teacher or bundled_teacher()
            mat = teacher.encode_docs(texts)
        except CurateError as e:  # the audit informs; it never stops an export
            view_note = f"embeddings skipped: {e}"
        else:
            index_of = {t: i for i, t in enumerate(texts)}
            vectors = lambda ts: mat[[index_of[t] for t in ts]]  # noqa: E731
            view_note = f"embeddings: {teacher.model_id}"
    rows, features, phrases = [], [], []
    # the row of the same two sides already probed (every negative LLM-written, every positive
    # from a corpus: llm_vs_corpus is positive_vs_negative), copied instead of probed again
    done: dict[tuple, dict] = {}
    for c, a, b in plan:
        side_a, side_b = c.names()
        where = {"comparison": c.kind, "family": c.family, "level": c.level}
        key = (c.family, c.level, stable_id(a, b))
        if key in done:
            rows.append({**done[key], **where, "side_a": side_a, "side_b": side_b,
                         "same_as": done[key]["comparison"]})
            continue
        found_chars = probe(a, b, chars, opts.folds, opts.seed, opts.features)
        row = {**where, "side_a": side_a, "side_b": side_b, "n_a": len(a), "n_b": len(b),
               **{f"char_{k}": v for k, v in found_chars.as_dict().items()}}
        if vectors is not None:
            emb = probe(a, b, vectors, opts.folds, opts.seed)
            row.update({f"embedding_{k}": v for k, v in emb.as_dict().items()})
        found = cues(a, b, (side_a, side_b))
        row.update(words_a=found["words_a"], words_b=found["words_b"], length_auc=found["length_auc"])
        rows.append(row)
        done[key] = row
        features.append({**where, "toward_a": found_chars.toward_a, "toward_b": found_chars.toward_b})
        phrases += [{**where, **p} for p in found["phrases"]]
    return {
        "note": "AUC of a probe telling side b from side a by the texts alone (no query), out of fold: "
                "0.5 nothing separates them, 1.0 they separate completely",
        "settings": {"views": ["char n-grams", *([view_note] if view_note else [])], "folds": opts.folds,
                     "sample_per_side": opts.sample, "min_texts": opts.min_texts, "seed": opts.seed,
                     "threshold": opts.threshold},
        "comparisons": rows,
        "features": features,
        "phrases": phrases,
        "skipped": skipped,
        "warnings": warnings(rows, opts.threshold, phrases),
    }


def _best(row: dict) -> tuple[float, str, list[float]]:
    views = [(row["char_auc"], "char n-gram", row["char_interval"])]
    if "embedding_auc" in row:
        views.append((row["embedding_auc"], "embedding", row["embedding_interval"]))
    return max(views, key=lambda v: v[0])


def warnings(rows: list[dict], threshold: float, phrases: list[dict] = ()) -> list[str]:
    """One line for each family's comparison (all levels) a probe separates at ``threshold`` or
    above, with its plainest cue and what to do about it."""
    out = []
    for row in rows:
        if row["comparison"] not in WARNED or row["level"] != ALL or row.get("same_as"):
            continue
        auc, view, (low, high) = _best(row)
        if auc < threshold:
            continue
        cue = ""
        if row["length_auc"] >= threshold or row["length_auc"] <= 1 - threshold:
            cue = f"; length alone gives {row['length_auc']:.2f} ({row['words_b']} vs {row['words_a']} words)"
        for p in phrases:
            if (p["comparison"], p["family"], p["level"]) == (row["comparison"], row["family"], row["level"]):
                verb = "open" if p["where"] == "opening" else "end"
                cue += f"; {p['share']:.0%} of {p['side'].split(' (')[0]} {verb} with '{p['phrase']}'"
                break
        advice = ADVICE_LLM if LLM in row["side_b"] else ADVICE_OTHER
        out.append(f"{row['family']}: {COMPARISONS[row['comparison']]}: {view} AUC {auc:.2f} [{low:.2f}, {high:.2f}] "
                   f">= {threshold}, a model can tell them apart without the query{cue}; {advice}")
    return out


def summary_lines(audit: dict[str, Any], most: int = 3) -> list[str]:
    """The audit in a few lines for a stage's summary: the highest AUC, then the warnings."""
    rows = audit.get("comparisons") or []
    skipped = len(audit.get("skipped") or [])
    if not rows:
        return [f"  audit: too few texts to test for shortcuts ({skipped} comparison{'' if skipped == 1 else 's'} "
                "skipped; the audit asks whether a model tells positives from negatives without the query)"
                if skipped else "  audit: nothing to compare"]
    top = max(rows, key=lambda r: _best(r)[0])
    auc, view, _ = _best(top)
    lines = [f"  audit: {len(rows)} comparisons{f' ({skipped} skipped: too few texts)' if skipped else ''}, "
             f"highest {view} AUC {auc:.2f} ({top['comparison']}, {top['family']}, level {top['level']})"]
    warned = audit.get("warnings") or []
    lines += [f"  warning: {w}" for w in warned[:most]]
    if len(warned) > most:
        lines.append(f"  warning: {len(warned) - most} more in the report's audit section")
    return lines

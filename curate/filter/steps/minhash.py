"""``minhash``: drop near-duplicate records (MinHash + LSH over word n-gram shingles).

Per field in ``fields``, in order, across the records still kept:

* ``query`` / ``positive``: records whose field texts are near-duplicates (estimated Jaccard
  of word ``ngram`` shingles >= ``threshold``) form groups; in each group the best record
  survives and the rest go as ``near-duplicate-<field>``.
* ``task``: many records per task is normal, so a shared task alone drops nothing. Two
  records collide only when the task is a near-duplicate *and* the queries are: the queries'
  word sets (unigram shingles, word order ignored) must have estimated Jaccard >=
  ``task_query_threshold``. That catches one task asked the same question twice with the
  words shuffled or one word changed, which the word 3-gram ``query`` pass lets through.

"Best" (``keep``): ``margin`` (default) keeps the record with the largest teacher margin
(``record.teacher.margin``, written by the teacher steps) and, where no member has
one, the largest generator margin (``positive_score`` - the largest negative ``score``);
ties and unscored records fall back to the first seen. ``first`` keeps the first seen.
"First seen" is declared, not found: the earliest record in the step's input order (the
records file as read, less what earlier steps dropped). Every stage writes in a fixed order
(generate puts its records in item order once a run is complete, whatever order the answers
came in), so one command keeps the same record in every run.
Within a group, members are visited best first and one is dropped only when it is a
near-duplicate of an already kept member, so a chain A~B~C whose ends differ keeps both ends.

Each drop is logged with ``{"kept": <id of the kept record>, "similarity": <estimated
Jaccard>}`` (``task`` adds ``query_similarity``); the report gets, per field, the number of
duplicate groups and of records dropped.

Defaults. ``threshold`` 0.8 on word 3-gram shingles means near-verbatim copies: in a
60-word text one substituted word changes 3 of 58 shingles (Jaccard 0.90), two change 6
(0.81), three (0.73) no longer count; a paraphrase shares almost no 3-grams. For a short
text the same threshold is stricter (a 12-word query with one word changed scores 0.54), so
short queries are dropped only when copied near-exactly -- the ``task`` pass above covers
reworded short queries within one task. Texts shorter than ``ngram`` words use all their
words as one shingle. ``num_perm`` 128 keeps the estimate's standard deviation at about
0.035 near 0.8 (sqrt(J(1-J)/128)) for 512 bytes per text.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from curate.core.errors import CurateError
from curate.core.params import schema_from_defaults
from curate.filter.base import merge_params, FilterContext, register
from curate.dedup.minhash import (
    jaccard,
    lsh_params,
    resolve_group,
    signatures,
    similar_pairs,
    union_find_groups,
)
from curate.core.records import Record

FIELDS = ("query", "positive", "task")
DEFAULTS: dict[str, Any] = {
    "fields": ["query", "positive", "task"],
    "threshold": 0.8,  # a number, or {field: number}
    "num_perm": 128,
    "ngram": 3,  # a number, or {field: number}
    "keep": "margin",  # or "first": the earliest in input order
    "task_query_threshold": 0.8,  # query word-set Jaccard for the task pass
    "seed": 1,
    "lsh": "auto",  # "datasketch" (MinHashLSH), "numpy" (same bands, numpy buckets) or "auto"
}


def _per_field(value: Any, name: str, field: str) -> Any:
    if isinstance(value, dict):
        unknown = sorted(set(value) - set(FIELDS))
        if unknown:
            raise CurateError(f"minhash: {name} names unknown field(s) {', '.join(unknown)}")
        return value.get(field, DEFAULTS[name])
    return value


def _params(params: dict[str, Any] | None) -> dict[str, Any]:
    p = merge_params("minhash", params)
    fields = p["fields"]
    if isinstance(fields, str):
        fields = [fields]
    if not isinstance(fields, list) or not all(f in FIELDS for f in fields):
        raise CurateError(f"minhash: fields must be a list of {', '.join(FIELDS)}, got {fields!r}")
    p["fields"] = list(dict.fromkeys(fields))
    for f in FIELDS:
        thr = _per_field(p["threshold"], "threshold", f)
        if not isinstance(thr, (int, float)) or not 0 < thr <= 1:
            raise CurateError(f"minhash: threshold must be in (0, 1], got {thr!r}")
        n = _per_field(p["ngram"], "ngram", f)
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise CurateError(f"minhash: ngram must be a positive integer, got {n!r}")
    tq = p["task_query_threshold"]
    if not isinstance(tq, (int, float)) or not 0 < tq <= 1:
        raise CurateError(f"minhash: task_query_threshold must be in (0, 1], got {tq!r}")
    if not isinstance(p["num_perm"], int) or p["num_perm"] < 16:
        raise CurateError(f"minhash: num_perm must be an integer >= 16, got {p['num_perm']!r}")
    if p["keep"] not in ("margin", "first"):
        raise CurateError(f"minhash: keep must be 'margin' or 'first', got {p['keep']!r}")
    if p["lsh"] not in ("auto", "datasketch", "numpy"):
        raise CurateError(f"minhash: lsh must be 'auto', 'datasketch' or 'numpy', got {p['lsh']!r}")
    return p


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(x)


def teacher_margin(rec: Record) -> float | None:
    """The record's teacher margin when it is a finite number (``semantic_dedup`` ranks by it too)."""
    return _number(rec.teacher.margin) if rec.teacher is not None else None


def record_margin(rec: Record) -> tuple[int, float]:
    """(tier, margin): tier 2 = teacher margin, 1 = generator margin, 0 = neither (margin 0)."""
    m = teacher_margin(rec)
    if m is not None:
        return 2, m
    pos = _number(rec.positive_score)
    negs = [s for s in (_number(n.score) for n in rec.negatives) if s is not None]
    if pos is not None and negs:
        return 1, pos - max(negs)
    return 0, 0.0


def _add_teacher_margins(alive: list[Record], margins: dict[int, tuple[int, float]], ctx: FilterContext) -> None:
    """Group members without a teacher margin get one, so "best" means the teacher's view."""
    from curate.filter.teacher_scores import teacher_margins

    need = [m for m, (tier, _) in margins.items() if tier < 2]
    for m, value in zip(need, teacher_margins([alive[m] for m in need], ctx.teacher)):
        if value is not None:
            margins[m] = (2, value)


def _local(alive: list[Record], field: str, thr: float, ngram: int, tq: float, num_perm: int, seed: int,
           lsh: str) -> tuple[list[list[int]], list]:
    """Near-duplicate groups of one field, and the (signatures, threshold) checks that resolve them."""
    sig = signatures([getattr(r, field) for r in alive], num_perm=num_perm, ngram=ngram, seed=seed)
    if field == "task":
        qsig = signatures([r.query for r in alive], num_perm=num_perm, ngram=1, seed=seed)
        i, j, _ = similar_pairs(qsig, tq, lsh=lsh, seed=seed)
        both = jaccard(sig, i, j) >= thr
        return union_find_groups(i[both], j[both]), [(sig, thr), (qsig, tq)]
    i, j, _ = similar_pairs(sig, thr, lsh=lsh, seed=seed)
    return union_find_groups(i, j), [(sig, thr)]


def _staged(alive: list[Record], field: str, thr: float, ngram: int, tq: float, num_perm: int, seed: int,
            executor) -> tuple[list[list[int]], list, np.ndarray]:
    """The same groups through ``minhash_staged`` (signatures a map, bands grouped by key,
    components in the driver). The checks hold the members' signatures only, so the groups
    come as positions in them, with the record each position is (``members``, ascending)."""
    from curate.dedup.staged import staged_groups

    texts = [getattr(r, field) for r in alive]
    if field == "task":
        res = staged_groups([([r.query for r in alive], 1, tq), (texts, ngram, thr)], executor, num_perm, seed)
        checks = [(res.sigs[1], thr), (res.sigs[0], tq)]
    else:
        res = staged_groups([(texts, ngram, thr)], executor, num_perm, seed)
        checks = [(res.sigs[0], thr)]
    return [np.searchsorted(res.rows, g).tolist() for g in res.groups], checks, res.rows


@register("minhash", schema_from_defaults("MinhashParams", DEFAULTS), _params)
def minhash(records: list[Record], params: dict[str, Any], ctx: FilterContext) -> list[Record]:
    p = _params(params)
    num_perm, seed = p["num_perm"], p["seed"]
    alive = list(records)
    # best first; ties (and everything under keep: first) by input position, the order in which
    # resolve_group breaks ties anyway: written out so the keep rule reads whole here
    if p["keep"] == "margin":
        def rank(i: int) -> tuple[int, float, int]:
            tier, m = margins[i]
            return -tier, -m, i
    else:
        def rank(i: int) -> int:
            return i

    staged = ctx.executor is not None and ctx.executor.shards > 1
    for field in p["fields"]:
        if len(alive) < 2:
            ctx.note(**{f"{field}_groups": 0, f"{field}_dropped": 0})
            continue
        thr = float(_per_field(p["threshold"], "threshold", field))
        ngram = _per_field(p["ngram"], "ngram", field)
        tq = float(p["task_query_threshold"])
        if staged:  # on Ray, in stages: no process holds every signature
            groups, checks, members = _staged(alive, field, thr, ngram, tq, num_perm, seed, ctx.executor)
            record = members.__getitem__  # a position in the checks' signatures -> its record in ``alive``
        else:
            groups, checks = _local(alive, field, thr, ngram, tq, num_perm, seed, p["lsh"])
            record = int
        margins = {record(c): record_margin(alive[record(c)]) for g in groups for c in g}
        if p["keep"] == "margin" and ctx.teacher_factory is not None:
            _add_teacher_margins(alive, margins, ctx)
        dropped: set[int] = set()
        for group in groups:
            for d, k, sims in resolve_group(group, lambda c: rank(record(c)), checks):
                d, k = int(record(d)), int(record(k))
                numbers = {"kept": alive[k].id, "similarity": round(sims[0], 4)}
                if field == "task":
                    numbers["query_similarity"] = round(sims[1], 4)
                ctx.reject(alive[d], f"near-duplicate-{field}", numbers)
                dropped.add(d)
        bands, rows = lsh_params(thr if field != "task" else tq, num_perm)
        ctx.note(**{f"{field}_groups": len(groups), f"{field}_dropped": len(dropped),
                    f"{field}_lsh_bands": f"{bands}x{rows}"})
        alive = [r for n, r in enumerate(alive) if n not in dropped]
    return alive

#!/usr/bin/env python
"""Where to set ``semantic_dedup``'s threshold: false duplicates against caught paraphrases.

    .venv/bin/python bench/semantic_dedup.py [--data ../shared/data] [--out bench/results/semantic-dedup.txt]

With the bundled all-MiniLM-L6-v2 (``Teacher()``, its query prompt), at each threshold
0.80, 0.81, ..., 0.99:

(a) **false duplicates**: the real queries of SciFact, NQ-UTD and NFCorpus (``queries.jsonl``),
    each set made distinct first (texts equal after case and spacing are one), and the share
    whose nearest other query of the same set has cosine at or above the threshold. These are
    queries a benchmark's authors wrote as different questions, so every one caught is a record
    the step would wrongly drop (the top pairs are listed, to be read: a few are true rewordings);
(b) **caught paraphrases**: 30 real queries (12 SciFact claims, 9 NQ-UTD questions, 9 NFCorpus
    titles, chosen in a fixed shuffled order as the first to which the rules apply) each
    reworded by rule: words swapped from a small hand-made synonym list (``syn``), a closing
    phrase moved to the front (``front``), a claim turned into a question (``ask``) or a question
    into a statement (``tell``); every paraphrase uses two rules. The share whose cosine with its
    original is at or above the threshold; and the share the ``minhash`` step catches with its
    defaults (word 3-grams, Jaccard 0.8, ``fields: [query, task]``, the pair given one task of
    its own so its task pass, which catches reordered short queries, has its best chance).

Writes a table, the paraphrase pairs and the top false pairs to ``--out``. A minute or two on
two busy cores (4,400 short queries encoded once; the embedding cache keeps them for a rerun).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from curate.core.records import Record  # noqa: E402
from curate.embed.teacher import Teacher  # noqa: E402
from curate.filter.base import STEPS, FilterContext  # noqa: E402
from curate.negatives.search import top_k  # noqa: E402

DATASETS = ("scifact", "nq-utd", "nfcorpus")
THRESHOLDS = [round(0.80 + 0.01 * i, 2) for i in range(20)]  # 0.80..0.99
# per set: how many pairs, and the two-rule combinations taken in turn (applied form first,
# then front, then syn; a query takes the first combination in turn that changes it at each rule)
PLAN = {"scifact": (12, [("ask", "syn"), ("front", "syn"), ("ask", "front")]),
        "nq-utd": (9, [("tell", "syn"), ("tell", "front"), ("front", "syn")]),
        "nfcorpus": (9, [("tell", "syn"), ("front", "syn")])}

# a small hand-made list: (word or phrase, replacement), matched as whole words, any case
SYNONYMS = [
    ("is associated with", "is linked to"), ("are associated with", "are linked to"),
    ("increases", "raises"), ("decreases", "lowers"), ("reduces", "cuts"), ("induces", "triggers"),
    ("improves", "enhances"), ("prevents", "stops"), ("causes", "leads to"), ("promotes", "fosters"),
    ("inhibits", "blocks"), ("patients", "sufferers"), ("risk", "likelihood"), ("treatment", "therapy"),
    ("effective", "successful"), ("elevated", "raised"), ("disease", "illness"), ("women", "females"),
    ("children", "kids"), ("mortality", "death rate"), ("role", "part"), ("largest", "biggest"),
    ("first", "initial"), ("wins", "takes"), ("won", "took"), ("highest", "top"), ("new", "latest"),
    ("good for you", "healthy"), ("bad for you", "harmful"), ("safe", "harmless"), ("foods", "diets"),
    ("prevention", "avoiding"), ("fight", "combat"), ("fights", "combats"), ("cancer", "tumours"),
    ("heart disease", "cardiac illness"), ("best", "finest"), ("team", "side"), ("record", "mark"),
]
VERBS = {"increases": "increase", "decreases": "decrease", "reduces": "reduce", "induces": "induce",
         "improves": "improve", "prevents": "prevent", "causes": "cause", "promotes": "promote",
         "inhibits": "inhibit", "regulates": "regulate", "modulates": "modulate", "enhances": "enhance",
         "activates": "activate", "protects": "protect", "influences": "influence", "affects": "affect"}
PREPS = ("in", "during", "after", "among", "for", "at", "from")
QWORDS = ("who", "what", "which", "when", "where", "how", "why")


def _syn(text: str) -> str:
    out = text
    for word, new in SYNONYMS:
        def repl(m, new=new):
            return new[0].upper() + new[1:] if m.group(0)[0].isupper() else new
        out = re.sub(rf"\b{re.escape(word)}\b", repl, out, flags=re.IGNORECASE)
    return out


def _lower_first(s: str) -> str:
    return s[0].lower() + s[1:] if len(s) > 1 and s[1].islower() else s


def _front(text: str) -> str:
    """'A PREP B.' -> 'PREP B, a.' at the last preposition past the text's first third, with a
    closing phrase of two to six words and no comma or colon in the text."""
    if "," in text or ":" in text:
        return text
    body, end = (text[:-1], text[-1]) if text[-1] in ".?" else (text, "")
    words = body.split()
    for n in range(len(words) - 2, max(1, len(words) // 3) - 1, -1):
        if words[n].lower() in PREPS and len(words) - n <= 6:
            head, tail = " ".join(words[:n]), " ".join(words[n:])
            return f"{tail[0].upper()}{tail[1:]}, {_lower_first(head)}{end}"
    return text


def _ask(text: str) -> str:
    """A claim as a yes/no question: the copula moved to the front, or 'Does A <verb> B?'."""
    if not text.endswith(".") or ":" in text:
        return text
    body = text.rstrip(".").strip()
    words = body.split()
    for n, w in enumerate(words[1:8], 1):
        if w in ("is", "are"):
            return f"{w.capitalize()} {_lower_first(' '.join(words[:n]))} {' '.join(words[n + 1:])}?"
        if w in VERBS:
            return f"Does {_lower_first(' '.join(words[:n]))} {VERBS[w]} {' '.join(words[n + 1:])}?"
    return text


def _tell(text: str) -> str:
    """A question as a statement of what is wanted."""
    if not text.endswith("?"):
        return text
    body = text[:-1].strip()
    first = body.split()[0].lower()
    if first in QWORDS:
        return f"I want to know {_lower_first(body)}."
    return text


RULES = {"syn": _syn, "front": _front, "ask": _ask, "tell": _tell}


def read_queries(folder: Path) -> list[tuple[str, str]]:
    """(id, text) of the distinct queries: texts equal after case and spacing count once."""
    seen, out = set(), []
    with open(folder / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            q = json.loads(line)
            key = " ".join(q["text"].lower().split())
            if key and key not in seen:
                seen.add(key)
                out.append((q["_id"], q["text"].strip()))
    return out


def paraphrases(queries: dict[str, list[tuple[str, str]]]) -> list[dict]:
    pairs = []
    for name, (count, combos) in PLAN.items():
        order = list(queries[name])
        random.Random(33).shuffle(order)
        made = 0
        for qid, text in order:
            if made == count:
                break
            for c in range(len(combos)):
                combo = combos[(made + c) % len(combos)]
                out = text
                for rule in combo:
                    new = RULES[rule](out)
                    if new == out:
                        break
                    out = new
                else:
                    pairs.append({"data": name, "id": qid, "rules": "+".join(combo), "original": text,
                                  "paraphrase": out})
                    made += 1
                    break
    return pairs


def minhash_caught(pairs: list[dict], fields: list[str]) -> list[bool]:
    records = []
    for n, p in enumerate(pairs):
        for side in ("original", "paraphrase"):
            records.append(Record(id=f"{n}-{side}", task_type="short-long", task=f"task {n}",
                                  query=p[side], positive=f"passage {n} {side}", negatives=[]))
    ctx = FilterContext(out_dir=Path("."), step_name="minhash")
    STEPS.get("minhash").fn(records, {"fields": fields, "keep": "first"}, ctx)
    gone = {d.id for d in ctx.rejections}
    return [f"{n}-paraphrase" in gone or f"{n}-original" in gone for n in range(len(pairs))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "semantic-dedup.txt"))
    args = ap.parse_args()
    t0 = time.perf_counter()
    teacher = Teacher()
    queries = {name: read_queries(Path(args.data) / name) for name in DATASETS}

    # (a) nearest other query within each set
    nearest: dict[str, np.ndarray] = {}
    top_pairs, band_pairs = [], []
    for name, qs in queries.items():
        vecs = teacher.encode([t for _, t in qs], teacher.query_prompt)
        s, i = top_k(vecs, vecs, 2)
        other = np.where(i[:, 0] == np.arange(len(qs)), 1, 0)  # a tie may put the other first
        nearest[name] = s[np.arange(len(qs)), other]
        for a in np.argsort(-nearest[name])[:6]:
            b = int(i[a, other[a]])
            if a < b or nearest[name][b] < nearest[name][a]:
                top_pairs.append((float(nearest[name][a]), name, qs[a][1], qs[b][1]))
        band = [int(x) for x in np.flatnonzero((nearest[name] >= 0.90) & (nearest[name] < 0.93))]
        for x in random.Random(1).sample(band, min(4, len(band))):
            band_pairs.append((float(nearest[name][x]), name, qs[x][1], qs[int(i[x, other[x]])][1]))
    pooled = np.concatenate(list(nearest.values()))

    # (b) planted paraphrases
    pairs = paraphrases(queries)
    a = teacher.encode([p["original"] for p in pairs], teacher.query_prompt)
    b = teacher.encode([p["paraphrase"] for p in pairs], teacher.query_prompt)
    for p, cos in zip(pairs, (a * b).sum(1)):
        p["cosine"] = float(cos)
    mh_q = minhash_caught(pairs, ["query"])
    mh = minhash_caught(pairs, ["query", "task"])
    cos = np.array([p["cosine"] for p in pairs])

    lines = [
        "# semantic_dedup threshold: bench/semantic_dedup.py, teacher all-MiniLM-L6-v2 (bundled), query prompt "
        f"{teacher.query_prompt!r}",
        "# false dup: share of the distinct real queries of a set whose nearest other query of the set has",
        "#   cosine >= thr (false n: how many, pooled)",
        f"# caught: share of the {len(pairs)} rule-made paraphrase pairs with cosine >= thr; minhash at its defaults",
        f"#   catches {sum(mh_q)}/{len(pairs)} with fields [query] and {sum(mh)}/{len(pairs)} with [query, task] "
        "(each pair under one task of its own), at any thr",
        "# not MH: pairs caught here that minhash [query, task] misses",
        "",
        "distinct queries: " + ", ".join(f"{n} {len(q)}" for n, q in queries.items()) + f", pooled {len(pooled)}",
        "",
        f"{'thr':>5} | false dup: {'scifact':>8} {'nq-utd':>7} {'nfcorpus':>9} {'pooled':>7} {'false n':>8} "
        f"| {'caught':>7} {'not MH':>7}",
    ]
    for thr in THRESHOLDS:
        shares = [float((nearest[n] >= thr).mean()) for n in DATASETS]
        hit = cos >= thr
        lines.append(f"{thr:>5.2f} |            {shares[0]:>8.1%} {shares[1]:>7.1%} {shares[2]:>9.1%}"
                     f" {float((pooled >= thr).mean()):>7.1%} {int((pooled >= thr).sum()):>8d}"
                     f" | {hit.mean():>7.0%} {int((hit & ~np.array(mh)).sum()):>4d}/{len(pairs)}")
    lines += ["", "paraphrase pairs (cosine, minhash: Q query pass / T task pass / -- missed, rules, set: "
              "original -> paraphrase):"]
    for p, q, m in sorted(zip(pairs, mh_q, mh), key=lambda t: -t[0]["cosine"]):
        tag = "Q " if q else ("T " if m else "--")
        lines.append(f"  {p['cosine']:.3f} {tag} {p['rules']:<10} {p['data']}: "
                     f"{p['original']!r} -> {p['paraphrase']!r}")
    lines += ["", "closest distinct real query pairs per set (cosine, set: a | b):"]
    for c, name, x, y in sorted(top_pairs, reverse=True):
        lines.append(f"  {c:.3f} {name}: {x!r} | {y!r}")
    lines += ["", "distinct real queries whose nearest other is in [0.90, 0.93) (4 per set, fixed draw):"]
    for c, name, x, y in band_pairs:
        lines.append(f"  {c:.3f} {name}: {x!r} | {y!r}")
    lines += ["", f"wall {time.perf_counter() - t0:.0f}s, {teacher.encoded} texts encoded, "
              f"{teacher.cache_hits} from the embedding cache"]
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""A real multilingual retrieval set from the package index: Django's interface translations.

No multilingual retrieval set installs from the package index, and a hub is out of reach, so
this one is built from text people translated by hand: the gettext catalogues (``.po``) that the
``django`` wheel ships for about a hundred languages. Each English message of three words or more
that the query language translates is one item: its translation into the query language (German
by default, so the set is not English-led) is the query, and one translation of it, in a
language drawn per message from English, Spanish, French, Russian, Japanese, Chinese and Arabic,
is the corpus document and the query's one relevant document. One relevant document a query, so
nothing in the corpus is relevant but unlabelled, and a student must match meaning across
languages, not a language. The messages are split into train and test by a seeded shuffle.
Written in BEIR layout, so ``curate mine``, ``curate eval`` and ``curate ablate`` read it.

    .venv/bin/pip install django   # only this script needs it
    .venv/bin/python bench/multilingual_set.py --out runs/data/django-bitext

Placeholders (``%(name)s``, ``{name}``) are left out: they would let a model match by copying.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
from pathlib import Path

LANGUAGES = ("de", "es", "fr", "ru", "ja", "zh_Hans", "ar")
CODES = {"zh_Hans": "zh"}
MIN_WORDS = 3  # gettext's folder name -> the ISO code a record carries


def catalogue(root: Path, lang: str) -> dict[str, str]:
    """Every plain, finished translation of one language across Django's catalogues."""
    from babel.messages.pofile import read_po

    out: dict[str, str] = {}
    for po in sorted(root.glob(f"**/locale/{lang}/LC_MESSAGES/django.po")):
        with po.open("rb") as fh:
            for msg in read_po(fh):
                if (isinstance(msg.id, str) and isinstance(msg.string, str) and msg.string.strip()
                        and not msg.fuzzy and "%" not in msg.id and "{" not in msg.id and len(msg.id.split()) >= MIN_WORDS):
                    out.setdefault(" ".join(msg.id.split()), " ".join(msg.string.split()))
    return out


def build(out: Path, query_language: str = "de", languages=LANGUAGES, test_share: float = 0.4,
          seed: int = 0) -> dict:
    import django

    root = Path(django.__file__).parent
    asked = catalogue(root, query_language)
    books = {lang: catalogue(root, lang) for lang in languages if lang != query_language}
    books["en"] = {m: m for m in asked}
    targets = ["en", *books.keys() - {"en"}]
    targets.sort()
    messages = sorted(asked)
    rng = random.Random(seed)
    rng.shuffle(messages)
    # each message's document: its translation into one of the languages that have it, drawn
    doc_lang = {m: rng.choice([lang for lang in targets if m in books[lang]]) for m in messages}
    n_test = round(len(messages) * test_share)
    split = {m: ("test" if i < n_test else "train") for i, m in enumerate(messages)}
    out.mkdir(parents=True, exist_ok=True)
    (out / "qrels").mkdir(exist_ok=True)
    with (out / "corpus.jsonl").open("w", encoding="utf-8") as corpus, \
            (out / "queries.jsonl").open("w", encoding="utf-8") as queries:
        for i, m in enumerate(messages):
            queries.write(json.dumps({"_id": f"q{i}", "text": asked[m]}, ensure_ascii=False) + "\n")
            corpus.write(json.dumps({"_id": f"d{i}", "title": "", "text": books[doc_lang[m]][m]},
                                    ensure_ascii=False) + "\n")
    for name in ("train", "test"):
        with (out / "qrels" / f"{name}.tsv").open("w", encoding="utf-8") as fh:
            fh.write("query-id\tcorpus-id\tscore\n")
            for i, m in enumerate(messages):
                if split[m] == name:
                    fh.write(f"q{i}\td{i}\t1\n")
    from collections import Counter

    info = {"source": f"django {django.__version__} gettext catalogues", "queries_in": query_language,
            "documents_in": {CODES.get(k, k): v for k, v in Counter(doc_lang.values()).most_common()},
            "messages": len(messages), "test": n_test, "train": len(messages) - n_test}
    (out / "SOURCE.txt").write_text(
        "Built by bench/multilingual_set.py from the translations the django wheel ships "
        f"(BSD licence): {json.dumps(info)}\n", encoding="utf-8")
    return info


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/data/django-bitext")
    ap.add_argument("--query-language", default="de", help="gettext code of the queries' language (or en)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    logging.disable(logging.WARNING)  # babel's notes on plural forms some catalogues declare oddly
    print(json.dumps(build(Path(args.out), args.query_language, seed=args.seed)))

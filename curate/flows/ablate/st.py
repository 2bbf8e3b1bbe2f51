"""The ``st`` stage: sentence-transformers' ``mine_hard_negatives`` for a baseline arm, written in
the layout an export writes (``data/train-*.parquet``, listed in its report), so ``fit`` reads
every arm's rows one way.

``positives: all`` (default) gives the miner every labelled positive of a query, so it knows
them all as curate does; ``rows: one`` (default) keeps the row of each query's own positive (the
most relevant one, as ``curate mine`` picks), so every arm trains on the same pairs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from curate.core.errors import CurateError
from curate.core.stage import Stage

FORMAT = "sentence-transformers"
ROWS = "data/train-00000-of-00001.parquet"


@dataclass
class StOptions:
    data: str  # the BEIR folder
    qrels: str  # the training queries
    out: str
    split: str = "train"
    student: str | None = None  # the model that mines (the grid's student)
    st: dict[str, Any] = field(default_factory=dict)  # the arm's options: the miner's, and positives / rows
    cache: str | None = field(default=None, metadata={"fingerprint": False})  # the miner's embeddings


def st_pairs(data: str, split: str, qrels: str, positives: str
             ) -> tuple[list[str], list[str], dict[str, str], list[str]]:
    """(queries, positives) rows for the miner, each query's own positive, and the corpus texts.

    The query's own positive is the one ``curate mine`` makes the record's positive (most
    relevant first, then qrels order), so both kinds of arm train on the same pairs."""
    from curate.mine.inputs import load_beir_input

    inp = load_beir_input(data, split, qrels)
    texts = inp.corpus.texts
    queries, docs, own = [], [], {}
    for it in inp.items:
        if it.query in own:  # two ids with one text: one query, as both miners treat it
            continue
        own[it.query] = texts[it.positives[0]]
        for j in it.positives if positives == "all" else it.positives[:1]:
            queries.append(it.query)
            docs.append(texts[j])
    return queries, docs, own, texts


def run(opts: StOptions, run) -> dict[str, Any]:
    import datasets
    from sentence_transformers.util import mine_hard_negatives

    from curate.train.fit import load_student

    options = {k: v for k, v in opts.st.items() if k not in ("positives", "rows")}
    positives, rows = opts.st.get("positives", "all"), opts.st.get("rows", "one")
    queries, docs, own, corpus = st_pairs(opts.data, opts.split, opts.qrels, positives)
    pairs = datasets.Dataset.from_dict({"anchor": queries, "positive": docs})
    mined = mine_hard_negatives(pairs, load_student(opts.student), corpus=corpus, output_format="n-tuple",
                                verbose=False, cache_folder=opts.cache, **options)
    if rows == "one":
        mined = mined.filter(lambda r: own.get(r["anchor"]) == r["positive"])
    if len(mined) == 0:
        raise CurateError("sentence-transformers mined no rows with these options")
    run.path(ROWS).parent.mkdir(parents=True, exist_ok=True)
    mined.to_parquet(str(run.path(ROWS)))
    run.counts.update({"rows": len(mined)})
    return {"rows": len(mined), "outputs": {FORMAT: [ROWS]}}


@functools.cache
def st_stage() -> Stage:
    return Stage("st", StOptions, run, reads=("data", "qrels"))

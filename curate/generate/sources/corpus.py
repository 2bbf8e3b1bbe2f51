"""``--from-corpus``: the user's documents, cut into passages; the model writes a query for each
sampled passage, which is its positive (``curate.generate.from_corpus``). The passages are
written as ``OUT/corpus.jsonl``, the corpus filter and mine search."""

from __future__ import annotations

from pathlib import Path

from curate.generate import from_corpus
from curate.generate.from_corpus import CORPUS
from curate.generate.source import Source, register_source


def _read(path: str, opts):
    from curate.datasets.documents import read_documents

    docs = read_documents(path)
    docs.check_target(Path(opts.out) / CORPUS)
    return docs


def _items(spec, docs, tasks, planning, stats, out: Path):
    docs.write_corpus(out / CORPUS)  # the corpus filter --corpus and mine --corpus take
    stats.extra["passages"] = len(docs.passages)
    from_corpus.report_reading(docs, stats)
    return from_corpus.corpus_items(spec, docs, tasks, planning, stats)


register_source(Source("corpus", from_corpus.FAMILY, "--from-corpus", _read, _items, from_corpus.check_spec))

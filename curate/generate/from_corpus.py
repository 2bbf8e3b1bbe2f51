"""Queries for passages of the user's own documents (``curate generate --from-corpus DOCS``).

Users often have documents and no labelled queries. The documents are cut into passages by
``curate.datasets.documents.read_documents``; a seeded sample of them becomes items of the
``generate`` loop whose positive is fixed (``Item.given``), so the model writes only the query.
The positive is the passage exactly as a corpus reader joins it (title, then text), and the
record carries the passage id as ``positive_id``: the corpus written next to the records
(``OUT/corpus.jsonl``) then finds it verbatim under that id, which the ``round_trip`` filter and
mining rely on. An item's id follows from the family, its task, the passage and the seed, so a
re-run resumes, and a larger ``-n`` extends the same sample instead of drawing a new one.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Sequence

from curate.core.errors import CurateError
from curate.core.records import Record, Task, stable_id
from curate.datasets.documents import Documents, Passage
from curate.core.progress import RunStats
from curate.llm.taskspec import TaskSpec

from curate.generate.examples import Item, Planning, make_item

FAMILY = "from-corpus"
CORPUS = "corpus.jsonl"  # the passages, as the run writes them for the stages that search them


def sample_passages(docs: Documents, n: int | None, seed: int) -> list[Passage]:
    """``n`` passages without replacement (all without ``n``). A seeded shuffle, cut to ``n``:
    the first ``n`` of a larger sample are the same passages, so ``-n`` can grow a run."""
    passages = list(docs.passages)
    random.Random(seed).shuffle(passages)
    return passages if n is None else passages[:n]


def check_spec(spec: TaskSpec) -> None:
    """A corpus gives the positive only, so the spec must take exactly that (as an input, or as an
    optional one: ``TaskSpec.taking``) and ask for the query."""
    if spec.inputs != ["positive"] and (spec.inputs or "positive" not in spec.optional_inputs):
        raise CurateError(f"--from-corpus needs a spec whose 'inputs' (or 'optional_inputs') are [positive] "
                          f"({spec.family} has {spec.inputs or 'none'})")


def passage_task(passage: Passage, tasks: Sequence[Task]) -> Task:
    """One of ``tasks`` picked by the passage id, not its place in the sample."""
    if not tasks:
        raise CurateError("--from-corpus: no task instruction (give --tasks-file or a spec with fixed_tasks)")
    return tasks[int(stable_id(passage.id), 16) % len(tasks)]


def report_reading(docs: Documents, stats: RunStats) -> None:
    """What the reader did goes into the stage's report (every skipped file and replaced byte,
    by name) and, when it skipped or mended anything, a line each on stderr naming the first
    few: a user should not have to guess which of their files never became passages."""
    from curate.core.progress import console

    stats.extra["documents"] = docs.report()
    for line in docs.notes(report="report.json"):
        console.print(f"curate: warning: {line}", markup=False, highlight=False, soft_wrap=True)


def corpus_items(spec: TaskSpec, docs: Documents, tasks: Sequence[Task], planning: Planning,
                 stats: RunStats) -> list[Item]:
    """The items ``generate`` runs for ``--from-corpus``: one per sampled passage (``planning.n``
    of them, drawn with its seed), its text as the positive. With the spec's ``bundle`` each item
    also brings the passage's nearest neighbours (``curate.generate.bundles``): the template gets
    all of them as ``passages`` and the record keeps the others as further positives. The
    query's language is drawn per item from the planning's pool (the passage stays as it is)."""
    check_spec(spec)
    seed = planning.seed
    passages = sample_passages(docs, planning.n, seed)
    bundles = {}
    if spec.bundle:
        from curate.generate.bundles import passage_bundles

        bundles = passage_bundles(docs.passages, passages, spec.bundle, seed)
    items = []
    for p in passages:
        text = p.joined()
        meta = {"passage": {"id": p.id, "doc_id": p.doc_id, "source": p.source, "k": p.k}}
        given = {"positive": text, "positive_id": p.id, **({"positive_title": p.title} if p.title else {})}
        key: tuple = ("passage", p.id, text)
        if spec.bundle:
            others = bundles[p.id][1:]
            given["positives"] = [{"text": o.joined(), "doc_id": o.id, **({"title": o.title} if o.title else {})}
                                  for o in others]
            given["passages"] = [text, *(o.joined() for o in others)]
            meta["bundle"] = [p.id, *(o.id for o in others)]
            key += tuple(o.id for o in others)
        items.append(make_item(spec, passage_task(p, tasks), key, planning, given=given, meta=meta))
    stats.extra["passages_sampled"] = len(items)
    if spec.bundle:
        stats.extra["bundle_sizes"] = dict(sorted(Counter(len(b) for b in bundles.values()).items()))
    return items


EXTRACTED = ("title", "first-sentence")  # queries taken from the passage itself, no LLM
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\"'])")


def first_sentence(text: str, max_words: int = 40) -> str:
    """The passage's first sentence, cut to ``max_words`` (a query, not a paragraph)."""
    head = _SENTENCE_END.split(text.strip(), maxsplit=1)[0]
    return " ".join(head.split()[:max_words])


def extracted_query(p: Passage, how: str) -> str:
    """The query a user with no LLM would write down: the title (else the first sentence)."""
    if how == "title" and p.title.strip():
        return " ".join(p.title.split())
    return first_sentence(p.text or p.title)


def extracted_records(passages: Sequence[Passage], how: str, task: str) -> list[Record]:
    """Records with a query taken from each passage (``EXTRACTED``): the baseline the
    LLM-written queries must beat, shaped like ``generate --from-corpus`` records so the same
    filters, mining and export take them."""
    if how not in EXTRACTED:
        raise CurateError(f"extracted queries are one of {', '.join(EXTRACTED)} (got {how!r})")
    out = []
    for p in passages:
        query = extracted_query(p, how)
        if not query:
            continue
        out.append(Record(id=stable_id(FAMILY, how, p.id), task_type=FAMILY, task=task, query=query,
                          positive=p.joined(), positive_id=p.id, positive_title=p.title or None,
                          meta={"passage": {"id": p.id, "doc_id": p.doc_id, "source": p.source, "k": p.k},
                                "query_from": how}))
    return out

"""Helpers every format writer shares: atomic files, splits, negative filling, document ids.

Writers only lay rows out; anything more than a layout (which texts fill a short negative
list, which id a document gets) is decided here once, so the formats agree with each other.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from curate.core.errors import CurateError
from curate.core.jsonl import FILE_MODE
from curate.export.copies import same_text
from curate.export.rows import ExportRow
from curate.core.records import stable_id

# A reader of one of our files should never meet a half-written one: each file is written
# under a temporary name in its own folder, then renamed (atomic on one file system).


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it into place when the block succeeds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def split_indices(rows: list[ExportRow]) -> dict[str, list[int]]:
    """Row positions grouped by split: splits in order of first appearance, rows in given order."""
    out: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        out.setdefault(row.split, []).append(i)
    if not out:
        raise CurateError("nothing to export: no rows left after the export's selection")
    for split in out:
        if not re.fullmatch(r"\w+", split):
            raise CurateError(f"split name {split!r} is not a plain word (letters, digits, _)")
    return out


def by_split(rows: list[ExportRow]) -> dict[str, list[ExportRow]]:
    return {split: [rows[i] for i in idx] for split, idx in split_indices(rows).items()}


def safe_name(text: str) -> str:
    """A file-name-safe form of a task type (families are already safe; user ones may not be)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "task"


def raw_document(row: ExportRow, text: str) -> str:
    """A document without the instruction the export put on it (symmetric tasks only).

    Prompt-aware consumers (FlagEmbedding) and evaluation corpora (BEIR) want the bare text.
    """
    if row.symmetric and row.instruction and text.startswith(row.instruction):
        return text[len(row.instruction):]
    return text


def split_title(row: ExportRow, text: str) -> tuple[str, str]:
    """(title, body) of a document as the row carries it, for formats with a title field.

    Documents are one text, the title first (``curate.datasets.corpus.doc_text``); the reader of such a
    format joins them again with a space, so the text it encodes is the one curate trained and
    mined with. A document with no known title, or with an instruction in front, stays whole."""
    title = row.titles.get(text)
    if title and text.startswith(title + " "):
        return title, text[len(title) + 1:]
    return "", text


def require_negatives(rows: list[ExportRow], fmt: str) -> None:
    """Refuse a format whose trainer needs a negative on every row when no row has one.

    One row without negatives borrows from its batch (``fill_negatives``); when none has any
    there is nothing to borrow, and ``"neg": []`` is a file its trainer rejects."""
    if rows and not any(r.negatives for r in rows):
        raise CurateError(f"--format {fmt}: no record has a negative, and its trainer needs one on every row; "
                          "mine negatives first (curate mine --in FILE --corpus DOCS) or export pairs with "
                          "--format sentence-transformers or hf (in-batch negatives)")


def fill_negatives(rows: list[ExportRow], texts: list[list[str]], n: int,
                   pad_short: bool = True) -> tuple[list[list[str]], int]:
    """Negative lists for a trainer that cannot take the rows' own (``texts[i]``: row i's
    negatives as this format writes them). Returns the lists and how many rows were filled.

    Why: sentence-transformers needs the same number ``n`` of negative columns in every row
    (``pad_short``); FlagEmbedding, Tevatron and NeMo sample their own but fail on a row with
    none. A short row repeats its own negatives in order (NeMo's convention); a row with none
    borrows the negatives of the other rows of its batch (else of its nearest row with any).
    Under an in-batch loss those texts are already candidates for every query of the batch, so
    the loss only counts one of them twice. A positive is never borrowed: it would become a
    false negative of its own row's query; neither is a negative of another row that is one of
    this row's own positives (``relabel`` moves documents from negatives to positives per query),
    whitespace aside (``curate.export.copies.same_text``).
    """
    pools = _borrow_pools(rows, texts)
    out: list[list[str]] = []
    filled = 0
    for row, own, pool in zip(rows, texts, pools):
        source = own or pool
        if not source and n and any(texts):
            raise CurateError(f"record {row.record_id}: its row has no negative and none to borrow: "
                              "every negative of the export is one of its own positives")
        if source and n and (len(own) < n if pad_short else not own):
            filled += 1
            own = [source[j % len(source)] for j in range(n)]
        out.append(own[:n] if pad_short else list(own))
    return out, filled


def _borrow_pools(rows: list[ExportRow], texts: list[list[str]]) -> list[list[str]]:
    """For each row without negatives: those of its batch, else of its nearest row having some."""
    pools: list[list[str]] = [[] for _ in rows]
    needy = [i for i, t in enumerate(texts) if not t]
    if not needy or len(needy) == len(rows):
        return pools
    batches: dict[tuple[str, int], list[int]] = {}
    splits: dict[str, list[int]] = {}
    for j, r in enumerate(rows):
        batches.setdefault((r.split, r.batch), []).append(j)
        splits.setdefault(r.split, []).append(j)
    nearest = _nearest_having(texts, list(range(len(rows))))
    for idxs in splits.values():
        nearest.update(_nearest_having(texts, idxs))  # the same split wins over another one
    for i in needy:
        own = _own_positives(rows[i])
        batch = [t for j in batches[(rows[i].split, rows[i].batch)] for t in texts[j]
                 if not _is_own(rows[i], t, own)]
        near = [t for t in texts[nearest[i]] if not _is_own(rows[i], t, own)] if i in nearest else []
        pools[i] = list(dict.fromkeys(batch or near or [t for ts in texts for t in ts if not _is_own(rows[i], t, own)]))
    return pools


def _own_positives(row: ExportRow) -> set[str]:
    """The row's positives as ``same_text`` compares them (the export's copies check does the same)."""
    return {same_text(t) for t in (row.positive, raw_document(row, row.positive), *(t for t, _ in row.more_positives))}


def _is_own(row: ExportRow, text: str, own: set[str]) -> bool:
    return same_text(text) in own or same_text(raw_document(row, text)) in own


def _nearest_having(texts: list[list[str]], idxs: list[int]) -> dict[int, int]:
    """For each index in ``idxs``, the closest index of that list with negatives (ties: the earlier)."""
    before: list[int | None] = []
    last = None
    for i in idxs:
        last = i if texts[i] else last
        before.append(last)
    out: dict[int, int] = {}
    after = None
    for k in range(len(idxs) - 1, -1, -1):
        i = idxs[k]
        after = i if texts[i] else after
        options = [j for j in (before[k], after) if j is not None]
        if options:
            out[i] = min(options, key=lambda j: (abs(j - i), j))
    return out


# FlagEmbedding's default student --temperature; its distillation scores are the teacher's cosine / this
SCORE_TEMPERATURE = 0.02


def teacher_scores(row: ExportRow, negs: list[str]) -> tuple[float, list[float]] | None:
    """The teacher's score of the row's positive and of each negative written (``negs``: the row's
    own, as a format writes them), or None when any is unknown: borrowed negatives, a row no
    teacher scored. Distillation readers (FlagEmbedding, Tevatron) need a score on every passage
    of a file, so a writer keeps scores only in files where every row has them all."""
    neg_scores = list(row.negative_scores)
    if (row.positive_score is None or len(neg_scores) != len(negs) or len(negs) != len(row.negatives)
            or any(s is None for s in neg_scores)):
        return None
    return float(row.positive_score), [float(s) for s in neg_scores]


class IdTable:
    """Ids for deduplicated texts: a given id when it is free, else a stable hash of the text.

    Inputs from two corpora can reuse the same id for different texts (both number their
    documents from 1); the second text then gets a hashed id instead of a wrong qrel. Documents
    keep one id a text (a corpus entry each); queries keep every id their sources gave, so the
    same question from two datasets stays traceable to both. Texts that differ only in
    whitespace are one text (``same_text``), written as first seen: two entries would make one
    a non-relevant copy of the other, a false negative for every query the other answers.
    """

    def __init__(self, kind: str, ids_per_text: str = "one"):
        self.kind = kind
        self.ids_per_text = ids_per_text  # "one": a text keeps the first id it got; "given": every given id
        self.by_text: dict[str, str] = {}  # same_text(text) -> its id
        self.by_id: dict[str, str] = {}  # id -> the text as first seen

    def assign(self, text: str, preferred: str | None = None) -> str:
        given = None if preferred in (None, "") else str(preferred)
        key = same_text(text)
        if self.ids_per_text == "given" and given is not None and not self._taken(given, key):
            self.by_id.setdefault(given, text)  # two sources asking the same question keep both their ids
            self.by_text.setdefault(key, given)
            return given
        if key in self.by_text:
            return self.by_text[key]
        ident = str(preferred) if preferred not in (None, "") else stable_id(self.kind, text)
        if self._taken(ident, key):
            ident = stable_id(self.kind, text)
        self.by_text[key] = ident
        self.by_id[ident] = text
        return ident

    def _taken(self, ident: str, key: str) -> bool:
        """``ident`` already names another text (``key``: this text's ``same_text``); the held
        text is normalised only when there is one."""
        held = self.by_id.get(ident)
        return held is not None and same_text(held) != key

    def items(self) -> list[tuple[str, str]]:
        """(id, text) in first-seen order."""
        return list(self.by_id.items())


def doc_ids(row: ExportRow, table: IdTable) -> tuple[str, list[str]]:
    """Ids of the row's positive and negatives (given corpus ids reused when free)."""
    pos = table.assign(raw_document(row, row.positive), row.positive_id)
    given = list(row.negative_ids) + [None] * (len(row.negatives) - len(row.negative_ids))
    negs = [table.assign(raw_document(row, t), given[k]) for k, t in enumerate(row.negatives)]
    return pos, negs


def id_tables(rows: list[ExportRow]) -> tuple[IdTable, IdTable]:
    """Document and query id tables with every id the sources gave claimed first, so a text
    seen once without an id (a generated row) and once with one (a mined row) keeps the real id."""
    docs, queries = IdTable("doc"), IdTable("query", ids_per_text="given")
    for row in rows:
        given = [(raw_document(row, row.positive), row.positive_id)]
        given += [(raw_document(row, t), g) for t, g in zip(row.negatives, row.negative_ids)]
        for text, ident in given + row.more_positives:
            if ident not in (None, ""):
                docs.assign(text, ident)
        qid = row.meta.get("query_id") if isinstance(row.meta, dict) else None
        if qid not in (None, ""):
            queries.assign(row.query, qid)
    return docs, queries


def query_id(row: ExportRow, table: IdTable) -> str:
    """The row's query id: the source's own (``meta["query_id"]``) when free, else a hash."""
    given = row.meta.get("query_id") if isinstance(row.meta, dict) else None
    return table.assign(row.query, given)

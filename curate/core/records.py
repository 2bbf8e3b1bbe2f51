"""The record schema every stage reads and writes.

One dataclass for a training example (query, positive, graded negatives) and one for a
brainstormed task. Later stages add their numbers to ``Negative`` (a negative's own teacher score
and rank, mine's rank, the judges' verdicts) / ``Record.teacher`` / ``Record.scores`` /
``Record.meta`` rather than inventing new shapes. Whatever is known of one negative lives on that
negative, so a step that drops or reorders negatives takes their facts with them
(``Record.keep_negatives``) and no list elsewhere has to be kept in line.

Reading checks every field's type and that the texts are not blank, so a bad line stops the
stage that reads it with one line naming file and line, instead of reaching an export or
crashing a later step. Version 4 moves the facts about one negative onto it (its teacher rank,
was ``teacher.negative_ranks``; mine's rank and teacher, were ``meta.mine.ranks``/``teachers``
beside ``meta.mine.doc_ids``; the judges' verdicts, were ``scores.judges.CHECK.negatives``).
Version 3 keeps a record's further positives in ``positives`` (text
and corpus id), its own positive's id in ``positive_id`` and the teacher's numbers in one typed
``teacher`` (``TeacherScores``); version 2 gave each mined negative
its corpus ``doc_id``. Older files (version 2: ``meta.positives``/``meta.positive_ids``/``scores.teacher``; version
1: ids in ``meta.mine.doc_ids``, matched by position; 3: the per-negative lists above) are
upgraded as they are read, and so are relabel's verdicts kept in ``meta.relabel`` (now each on its
negative, ``judges.relabel``; read for one release).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from curate.core.errors import CurateError

SCHEMA_VERSION = 4
# The task families the shipped specs cover; a user may add more with a template and a spec.
FAMILIES = ("short-long", "long-short", "short-short", "long-long", "sts", "bitext")


def stable_id(*parts: Any, length: int = 16) -> str:
    """A short, stable id from the parts that define an item (same inputs, same id, any run)."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:length]


# Titles: a document read from a corpus with titles is one text, the title first (BEIR's
# convention, what every stage encodes and compares). Its title is kept beside that text too, so
# a format with a title field (Tevatron's passages, a BEIR corpus) can give it back apart.


@dataclass
class Negative:
    """One negative; ``level`` 1 is the hardest (closest to the query), 4 the easiest."""

    text: str
    level: int | None = None
    score: float | None = None  # the generator's own relevance/relatedness score (1-10)
    answerable: bool | None = None  # does this text answer the query, per the generator
    teacher_score: float | None = None  # filled by teacher-based stages
    source: str = "llm"  # "llm" for generated, "mined" for retrieved from a corpus
    doc_id: str | None = None  # the corpus id of a mined negative
    title: str | None = None  # its document's title, which ``text`` begins with (titles: see above)
    # 1 + documents of the record's teacher pool scoring strictly higher; with ``teacher_score``
    # it belongs to ``Record.teacher`` (filter's teacher steps write both)
    teacher_rank: int | None = None
    mine_rank: int | None = None  # its rank in mine's search (1 = the closest document)
    mined_by: str | None = None  # mine with several teachers: the one whose search found it
    judges: dict[str, Any] | None = None  # filter's judges: each check's verdicts, by judge name

    # written only when known, so a plain negative stays as short as it was
    OPTIONAL = ("title", "teacher_rank", "mine_rank", "mined_by", "judges")

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__
                if name not in self.OPTIONAL or getattr(self, name) is not None}

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "negative") -> Negative:
        if not isinstance(d, dict):
            raise ValueError(f"{where} must be an object with a 'text'")
        _text(d, "text", where)
        level = d.get("level")
        if level is not None and (not _is_int(level) or not 1 <= level <= 4):
            raise ValueError(f"{where} 'level' must be 1, 2, 3 or 4 (got {level!r})")
        for key in ("score", "teacher_score"):
            _number(d, key, where)
        _typed(d, "answerable", bool, "true or false", where)
        _typed(d, "source", str, "a string", where)
        if d.get("doc_id") is not None and not isinstance(d["doc_id"], (str, int)):
            raise ValueError(f"{where} 'doc_id' must be a string")
        _safe_id(d, "doc_id", where)
        _typed(d, "title", str, "a string", where)
        for key in ("teacher_rank", "mine_rank"):
            if d.get(key) is not None and not (_is_int(d[key]) and d[key] >= 1):
                raise ValueError(f"{where} '{key}' must be a whole number of at least 1 (got {d[key]!r})")
        _typed(d, "mined_by", str, "a string", where)
        _typed(d, "judges", dict, "an object", where)
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        if known.get("doc_id") is not None:
            known["doc_id"] = str(known["doc_id"])
        if known.get("source") is None:
            known.pop("source", None)
        return cls(**known)


@dataclass
class Positive:
    """A further labelled positive of a record (mined records carry every relevant document)."""

    text: str
    doc_id: str | None = None  # the corpus id, for a positive that came from a corpus
    title: str | None = None  # its document's title, which ``text`` begins with (titles: see above)

    @classmethod
    def from_dict(cls, d: Any, where: str = "positive") -> Positive:
        if not isinstance(d, dict):
            raise ValueError(f"{where} must be an object with a 'text'")
        _text(d, "text", where)
        _doc_id(d, "doc_id", where)
        _typed(d, "title", str, "a string", where)
        return cls(d["text"], None if d.get("doc_id") is None else str(d["doc_id"]), d.get("title"))

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "doc_id": self.doc_id, **({"title": self.title} if self.title is not None else {})}


@dataclass
class TeacherScores:
    """What a teacher model made of a record, in one shape whichever stage wrote it (``mine`` or
    filter's teacher steps). ``positive`` is the score margins are measured from: the record's
    positive for filter, the lowest of the query's labelled positives for mine (the anchor of its
    positive-aware threshold)."""

    model: str
    positive: float | None = None
    positive_rank: int | None = None  # 1 + documents of the pool scoring strictly higher
    margin: float | None = None  # positive - the hardest negative's score
    pool: int | None = None  # how many documents were ranked (each negative's rank: ``Negative.teacher_rank``)
    positives: list[float] | None = None  # mine: each labelled positive's score, the record's own first
    stage: str | None = None  # "mine" when mine wrote it
    retriever: str | None = None  # mine with a rescorer: the model that retrieved the candidates
    teachers: dict[str, dict[str, float]] | None = None  # mine with several teachers: each one's positive

    def own_positive(self) -> float | None:
        """The teacher's score of the record's own positive."""
        return self.positives[0] if self.positives else self.positive

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, d: Any, where: str = "record 'teacher'") -> TeacherScores:
        if not isinstance(d, dict):
            raise ValueError(f"{where} must be an object")
        if not isinstance(d.get("model"), str):
            raise ValueError(f"{where} needs its 'model' (a string)")
        for key in ("positive", "margin"):
            _number(d, key, where)
        for key in ("positive_rank", "pool"):
            if d.get(key) is not None and not _is_int(d[key]):
                raise ValueError(f"{where} '{key}' must be an integer")
        for key, ok, says in (("negative_ranks", _is_int, "integers"), ("positives", _is_number, "numbers")):
            v = d.get(key)
            if v is not None and (not isinstance(v, list) or not all(ok(x) for x in v)):
                raise ValueError(f"{where} '{key}' must be a list of {says}")  # negative_ranks: version 3
        for key in ("stage", "retriever"):
            _typed(d, key, str, "a string", where)
        _typed(d, "teachers", dict, "an object", where)
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


@dataclass
class Record:
    """One training example, the unit that flows from generate to export."""

    id: str
    task_type: str
    task: str
    query: str
    positive: str
    positive_id: str | None = None  # the corpus id of ``positive``, when it came from a corpus
    positive_title: str | None = None  # its document's title, which ``positive`` begins with (titles: see above)
    # The language the query was asked in (an ISO 639 code; generate --languages), and that of the
    # positive and negatives too unless ``positive_language`` gives theirs (bitext's target).
    language: str | None = None
    positive_language: str | None = None
    positives: list[Positive] = field(default_factory=list)  # further labelled positives (never negatives)
    negatives: list[Negative] = field(default_factory=list)
    positive_score: float | None = None
    positive_answerable: bool | None = None
    teacher: TeacherScores | None = None  # the teacher's scores and ranks (mine, filter's teacher steps)
    scores: dict[str, Any] = field(default_factory=dict)  # other stage-computed numbers (judges' verdicts)
    meta: dict[str, Any] = field(default_factory=dict)  # provenance: model, template, seed, ...
    schema_version: int = SCHEMA_VERSION

    def keep_negatives(self, keep: Sequence[int]) -> None:
        """Keep the negatives at indices ``keep``, in that order. Each carries its own facts, so only
        the record-level number that depends on the set is measured again: the margin of a teacher
        that ranked every negative (filter's; mine's margin stays the one its search measured)."""
        ranked = bool(self.negatives) and all(n.teacher_rank is not None for n in self.negatives)
        self.negatives = [self.negatives[i] for i in keep]
        t = self.teacher
        scores = [n.teacher_score for n in self.negatives]
        if ranked and t is not None and t.positive is not None and all(s is not None for s in scores):
            t.margin = margin_of(t.positive, scores)

    def all_positives(self) -> list[Positive]:
        """This record's positive and any further ones, with their corpus ids when known."""
        return [Positive(self.positive, self.positive_id), *self.positives]

    def to_dict(self) -> dict[str, Any]:
        """A plain dict in field order. Built directly: ``asdict`` deep-copies every nested
        value, a cost that shows when thousands of records a second are written."""
        d = {name: getattr(self, name) for name in self.__dataclass_fields__}
        for name in ("positive_title", "language", "positive_language"):  # left out when unknown
            if d[name] is None:
                del d[name]
        d["positives"] = [p.to_dict() for p in self.positives]
        d["negatives"] = [n.to_dict() for n in self.negatives]
        d["teacher"] = self.teacher.to_dict() if self.teacher is not None else None
        d["scores"], d["meta"] = dict(self.scores), dict(self.meta)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Record:
        if not isinstance(d, dict):
            raise ValueError("a record must be a JSON object")
        missing = [k for k in ("id", "task_type", "task", "query", "positive") if k not in d]
        if missing:
            raise ValueError(f"record lacks {', '.join(missing)}")
        for k in ("id", "task_type", "task"):
            if not isinstance(d[k], str):
                raise ValueError(f"record field '{k}' must be a string")
        for k in ("id", "query", "positive"):
            _text(d, k, "record")
        _safe_id(d, "id", "record")
        negs = d.get("negatives")
        if negs is None:
            negs = []
        if not isinstance(negs, list):
            raise ValueError("record field 'negatives' must be a list")
        _number(d, "positive_score", "record")
        _typed(d, "positive_answerable", bool, "true or false", "record")
        for k in ("scores", "meta"):
            _typed(d, k, dict, "an object", "record")
        if isinstance(d.get("meta"), dict):  # the source's query id, which exports write (BEIR, Tevatron)
            _safe_id(d["meta"], "query_id", "record 'meta'")
        _doc_id(d, "positive_id", "record")
        _typed(d, "positive_title", str, "a string", "record")
        for k in ("language", "positive_language"):
            _language(d, k)
        positives = d.get("positives") or []
        if not isinstance(positives, list):
            raise ValueError("record field 'positives' must be a list")
        version = d.get("schema_version", 1)
        if not _is_int(version) or not 1 <= version <= SCHEMA_VERSION:
            raise ValueError(f"record 'schema_version' {version!r} is not one this curate reads (1-{SCHEMA_VERSION})")
        known = {k: d[k] for k in cls.__dataclass_fields__
                 if k in d and k not in ("negatives", "positives", "teacher") and d[k] is not None}
        if d.get("teacher") is not None:
            known["teacher"] = TeacherScores.from_dict(d["teacher"])
        if known.get("positive_id") is not None:
            known["positive_id"] = str(known["positive_id"])
        rec = cls(**known, positives=[Positive.from_dict(p, f"positive {i + 2}") for i, p in enumerate(positives)],
                  negatives=[Negative.from_dict(n, f"negative {i + 1}") for i, n in enumerate(negs)])
        if version < 2:
            _upgrade_v1(rec)
        if version < 3:
            _upgrade_v2(rec)
        if version < 4:  # the teacher's negative ranks: under teacher (version 3) or scores.teacher (2)
            teacher = d.get("teacher") or (d.get("scores") or {}).get("teacher")
            _upgrade_v3(rec, teacher.get("negative_ranks") if isinstance(teacher, dict) else None)
        if "relabel" in rec.meta:
            _upgrade_relabel(rec)
        rec.schema_version = SCHEMA_VERSION
        return rec


def _upgrade_v1(rec: Record) -> None:
    """Version 1 kept mined negatives' corpus ids in ``meta.mine.doc_ids``, in the order of the
    mined negatives; a step that pruned negatives broke the match (then no id is given)."""
    doc_ids = (rec.meta.get("mine") or {}).get("doc_ids") if isinstance(rec.meta.get("mine"), dict) else None
    mined = [n for n in rec.negatives if n.source == "mined"]
    if isinstance(doc_ids, list) and len(doc_ids) == len(mined):
        for neg, doc_id in zip(mined, doc_ids):
            if neg.doc_id is None and doc_id is not None:
                neg.doc_id = str(doc_id)


def _upgrade_v2(rec: Record) -> None:
    """Version 2 kept further positives in ``meta.positives``, the corpus ids of all positives
    (the record's own first) in ``meta.positive_ids`` (ids are kept only when they line up) and
    the teacher's numbers in ``scores.teacher``."""
    extra = rec.meta.pop("positives", None)
    ids = rec.meta.pop("positive_ids", None)
    if extra is not None and (not isinstance(extra, list) or not all(isinstance(t, str) for t in extra)):
        raise ValueError("record 'meta.positives' must be a list of strings")
    if ids is not None and (not isinstance(ids, list) or not all(isinstance(i, (str, int)) for i in ids)):
        raise ValueError("record 'meta.positive_ids' must be a list of corpus ids")
    extra, ids = extra or [], [str(i) for i in ids or []]
    block = rec.scores.get("teacher")
    if isinstance(block, dict) and rec.teacher is None:
        rec.teacher = TeacherScores.from_dict(block, "record 'scores.teacher'")
        rec.scores = {k: v for k, v in rec.scores.items() if k != "teacher"}
    if ids and rec.positive_id is None:
        rec.positive_id = ids[0]
    extra_ids = ids[1:] if len(ids) == len(extra) + 1 else [None] * len(extra)
    rec.positives = rec.positives or [Positive(t, i) for t, i in zip(extra, extra_ids) if t.strip()]


def _upgrade_v3(rec: Record, ranks: list[int] | None) -> None:
    """Version 3 kept facts about each negative in lists beside the negatives: the teacher's ranks
    (``teacher.negative_ranks``, in list order), mine's ranks, ids and teachers (``meta.mine``, in
    the order of the mined negatives) and each judge check's verdicts (``scores.judges.CHECK
    .negatives``, in list order). A list that no longer lines up says nothing (it is dropped)."""
    negs = rec.negatives
    if isinstance(ranks, list) and len(ranks) == len(negs):
        for n, r in zip(negs, ranks):
            n.teacher_rank = r if r >= 1 else None
    mine = rec.meta.get("mine")
    if isinstance(mine, dict):
        mine = rec.meta["mine"] = dict(mine)
        lists = {key: mine.pop(key, None) for key in ("ranks", "doc_ids", "teachers")}
        mined = [n for n in negs if n.source == "mined"]
        for key, attr in (("ranks", "mine_rank"), ("teachers", "mined_by")):
            v = lists[key]
            if isinstance(v, list) and len(v) == len(mined):
                for n, x in zip(mined, v):
                    ok = (_is_int(x) and x >= 1) if attr == "mine_rank" else isinstance(x, str)
                    setattr(n, attr, x if ok else None)
    judges = rec.scores.get("judges")
    if isinstance(judges, dict):
        rec.scores = {**rec.scores, "judges": {check: dict(v) if isinstance(v, dict) else v for check, v in judges.items()}}
        for check, judged in rec.scores["judges"].items():
            verdicts = judged.pop("negatives", None) if isinstance(judged, dict) else None
            if isinstance(verdicts, list) and len(verdicts) == len(negs):
                for n, v in zip(negs, verdicts):
                    if isinstance(v, dict):
                        n.judges = {**(n.judges or {}), check: v}


# A one-release reader (remove after the next release): relabel kept every candidate's verdict in
# ``meta.relabel`` ({index, doc_id, verdict, tier[, error]}, index into the negatives before the
# promoted and unsure ones left); the verdicts now sit on the negatives, as ``judges.relabel``.
_RELABEL_STAYS = ("not_relevant", "unjudged")  # the verdicts that left the negative in place


def _upgrade_relabel(rec: Record) -> None:
    """Move ``meta.relabel``'s verdicts onto the negatives they name: by position (the index less
    the candidates that left before it), checked against the doc_id where there is one, else by
    doc_id alone. A verdict that names no negative any more (a later step dropped it) is dropped,
    so counting verdicts can no longer vouch for a negative nobody judged."""
    entries = rec.meta.get("relabel")
    rec.meta = {k: v for k, v in rec.meta.items() if k != "relabel"}
    if not isinstance(entries, list):
        return
    entries = [e for e in entries if isinstance(e, dict) and _is_int(e.get("index"))]
    gone = [e["index"] for e in entries if e.get("verdict") not in _RELABEL_STAYS]
    negs = rec.negatives
    for e in entries:
        if e.get("verdict") not in _RELABEL_STAYS:
            continue
        pos = e["index"] - sum(g < e["index"] for g in gone)
        doc_id = None if e.get("doc_id") is None else str(e["doc_id"])
        if not (0 <= pos < len(negs) and doc_id in (None, negs[pos].doc_id)):
            same = [k for k, n in enumerate(negs) if doc_id is not None and n.doc_id == doc_id]
            if len(same) != 1:
                continue
            pos = same[0]
        negs[pos].judges = {**(negs[pos].judges or {}), "relabel": {
            k: e[k] for k in ("verdict", "tier", "error") if k in e}}


def margin_of(positive: float, neg_scores: Sequence[float]) -> float | None:
    """The teacher's margin: the positive's score minus the hardest negative's (None without negatives)."""
    return float(positive - max(neg_scores)) if len(neg_scores) else None


def _doc_id(d: dict[str, Any], key: str, where: str) -> None:
    if d.get(key) is not None and (not isinstance(d[key], (str, int)) or isinstance(d[key], bool)):
        raise ValueError(f"{where} '{key}' must be a corpus id (a string)")
    _safe_id(d, key, where)


# What an id may not hold: C0 and C1 control characters (TAB, line feed, carriage return, NEL, ...)
# and the Unicode line and paragraph separators. A regex character range, so a reader that makes ids
# (``curate.datasets.documents.safe_name``) escapes exactly what is refused here.
UNSAFE_ID_CHARS = "\x00-\x1f\x7f-\x9f\u2028\u2029"
_UNSAFE_ID = re.compile(f"[{UNSAFE_ID_CHARS}]")


def _safe_id(d: dict[str, Any], key: str, where: str) -> None:
    """Refuse an id holding a control character or a line separator.

    Ids are written as fields of line- and tab-separated files (BEIR's ``qrels/*.tsv``, one id
    per line in others): a TAB or a line break there splits one entry into broken ones that a
    reader then refuses or misreads. Such an id cannot be written safely in every format, and
    changing it would break its link to its source, so it is refused on read, where the file
    and line are known, before any stage builds on it."""
    v = d.get(key)
    if isinstance(v, str):
        bad = _UNSAFE_ID.search(v)
        if bad:
            raise ValueError(f"{where} '{key}' {v!r} holds a control character or line break "
                             f"(U+{ord(bad.group()):04X}); ids must be plain text on one line: fix the id where it was made")


LANGUAGE_CODE = re.compile(r"[a-z]{2,3}")  # ISO 639-1, else 639-3, no region


def _language(d: dict[str, Any], key: str) -> None:
    v = d.get(key)
    if v is not None and not (isinstance(v, str) and LANGUAGE_CODE.fullmatch(v)):
        raise ValueError(f"record '{key}' must be a language code (ISO 639: two or three lower-case letters "
                         f"such as en, de or yue), got {v!r}")


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _text(d: dict[str, Any], key: str, where: str) -> None:
    v = d.get(key)
    if not isinstance(v, str):
        raise ValueError(f"{where} '{key}' must be a string")
    if not v.strip():
        raise ValueError(f"{where} '{key}' is empty")


def _number(d: dict[str, Any], key: str, where: str) -> None:
    v = d.get(key)
    if v is not None and not _is_number(v):
        raise ValueError(f"{where} '{key}' must be a number (got {v!r})")


def _typed(d: dict[str, Any], key: str, kind: type, says: str, where: str) -> None:
    v = d.get(key)
    if v is not None and not isinstance(v, kind):
        raise ValueError(f"{where} '{key}' must be {says} (got {type(v).__name__})")


@dataclass
class Task:
    """A brainstormed (or fixed) task instruction for one family."""

    id: str
    task_type: str
    task: str
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Task:
        if not isinstance(d, dict) or not isinstance(d.get("task"), str):
            raise ValueError("a task must be an object with a string 'task'")
        if not d["task"].strip():  # a blank instruction would become records that teach nothing
            raise ValueError("a task needs a non-blank 'task' text")
        task_type = d.get("task_type", "")
        return cls(
            id=d.get("id") or stable_id(task_type, d["task"]),
            task_type=task_type,
            task=d["task"],
            meta=d.get("meta") or {},
        )


def read_records(path) -> list[Record]:
    """Read a JSONL file of records; a bad line is a one-line error naming file and line."""
    from curate.core.jsonl import read_jsonl

    out = []
    for lineno, obj in read_jsonl(path):
        try:
            out.append(Record.from_dict(obj))
        except (ValueError, TypeError) as e:
            raise CurateError(f"{path}:{lineno}: not a curate record: {e}") from None
    return out


def first_of_each_id(records: Iterable[Record], seen: set[str] | None = None) -> tuple[list[Record], list[Record]]:
    """(the first record of each id, the later ones), in input order.

    Stages key their work and outputs by record id, so a second record under an id (the same
    example twice, or two examples given one name) would be kept twice or overwrite the first
    by chance; every stage keeps the first copy and reports the others. ``seen``: ids already
    taken (by an earlier input), updated in place."""
    seen = set() if seen is None else seen
    kept, repeats = [], []
    for rec in records:
        if rec.id in seen:
            repeats.append(rec)
        else:
            seen.add(rec.id)
            kept.append(rec)
    return kept, repeats

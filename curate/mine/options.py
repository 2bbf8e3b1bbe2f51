"""What ``curate mine`` takes, declared once: the CLI reads its defaults and ranges (the fields'
metadata, as in ``curate.core.params``) from here, and the search loop (``SearchSettings``) and
the presets (``Knobs``) declare their own parts."""

from __future__ import annotations

from dataclasses import dataclass, field

from curate.core.executor import Executor
from curate.negatives.knobs import Knobs


@dataclass(kw_only=True)
class SearchSettings:
    """How the loop searches and chooses; ``MineOptions`` builds on this same list."""

    k: int = field(default=4, metadata={"min": 1})  # negatives per query
    sample: str = "top"  # how the k are chosen among the valid candidates (mine.sampling)
    pool: int = field(default=10, metadata={"min": 1})  # sampling pool: the first N valid candidates
    temperature: float = field(default=0.05, metadata={"min": 0.0, "min_open": True})  # softmax / top1+ temperature
    seed: int = 0  # seed of the per-query generators
    # candidates retrieved first; queries short of valid ones are searched deeper
    depth: int = field(default=100, metadata={"min": 1})
    max_depth: int | None = field(default=None, metadata={"min": 1})  # deepest search (None: the whole corpus)
    positive_choice: str = "first"  # or "teacher": the tied top-relevance positive the teacher scores highest
    # The positive-aware threshold's positive: "lowest" of all the query's labelled positives
    # (safe for each of them), or the "record"'s own positive, the one it trains on (as
    # sentence-transformers does per pair); labelled positives are excluded by id either way.
    anchor: str = "lowest"


DEFAULT_TASK = "Given a query, retrieve relevant documents."


@dataclass(kw_only=True)
class MineOptions(SearchSettings, Knobs):
    """Everything ``curate mine`` takes. The search settings (``SearchSettings``) and the
    preset's knobs (``Knobs``) are declared once, where they are used, and inherited here."""

    out: str
    # input (exactly one of data / pairs / records / hf)
    data: str | None = None
    split: str = "train"
    qrels: str | None = None
    min_relevance: int = 1
    pairs: str | None = None
    records: str | None = None
    hf: str | None = None
    hf_split: str = "train"
    hf_config: str | None = None
    query_column: str | None = None
    positive_column: str | None = None
    id_column: str | None = None
    corpus: str | None = None
    limit: int | None = field(default=None, metadata={"min": 1})
    # teachers
    teachers: tuple[str, ...] = ()
    query_prompt: str | None = None
    doc_prompt: str | None = None
    batch_size: int = field(default=64, metadata={"min": 1})
    ensemble: str | None = None
    ensemble_dedup: bool = False
    cross_assign: str = "hash"
    cross_encoder: str | None = None
    # method (its knobs: Knobs) and search (SearchSettings)
    method: str = "percpos"
    preset_modules: tuple[str, ...] = ()
    index: str = "flat"
    nprobe: int = field(default=16, metadata={"min": 1})  # ivf: lists visited
    ef_search: int = field(default=128, metadata={"min": 1})  # hnsw: efSearch
    # output
    task_text: str = DEFAULT_TASK
    levels: bool = False
    min_negatives: int | None = field(default=None, metadata={"min": 0})
    # >0: drop queries whose own positive the teacher ranks below this (Linq used 10)
    positive_top: int = field(default=0, metadata={"min": 0})
    check_qrels: str | None = None
    plots: bool = True
    executor: Executor = field(default_factory=Executor)  # where teachers encode; on Ray, one corpus shard a worker

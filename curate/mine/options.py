"""What ``curate mine`` takes, declared once: the CLI reads its defaults and ranges (the fields'
metadata, as in ``curate.core.params``) from here, and the search loop (``SearchSettings``) and
the presets (``Knobs``) declare their own parts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from curate.core.executor import Executor
from curate.negatives.knobs import Knobs


@dataclass(kw_only=True)
class SearchSettings:
    """How the loop searches and chooses; ``MineOptions`` builds on this same list."""

    k: int = field(default=4, metadata={  # negatives per query
        "flag": "--num-negatives", "short": "-k", "min": 1, "help": "Negatives per query."})
    # how the k are chosen among the valid candidates (mine.sampling)
    sample: Literal["top", "uniform", "softmax", "top1+"] = field(default="top", metadata={
        "help": "How the k negatives are chosen among the valid candidates."})
    pool: int = field(default=10, metadata={  # sampling pool: the first N valid candidates
        "min": 1, "help": "Sampling pool: the first N valid candidates."})
    temperature: float = field(default=0.05, metadata={  # softmax / top1+ temperature
        "min": 0.0, "min_open": True, "help": "softmax / top1+ temperature."})
    seed: int = field(default=0, metadata={"help": "Seed of the per-query generators."})
    # candidates retrieved first; queries short of valid ones are searched deeper
    depth: int = field(default=100, metadata={
        "min": 1, "help": "Candidates retrieved first; queries short of valid ones are searched deeper."})
    max_depth: int | None = field(default=None, metadata={  # deepest search (None: the whole corpus)
        "min": 1, "help": "Deepest search (default: the whole corpus)."})
    # or "teacher": the tied top-relevance positive the teacher scores highest
    positive_choice: Literal["first", "teacher"] = field(default="first", metadata={
        "help": "The record's positive among a query's equally relevant ones: the first listed, or the one "
                "the teacher scores highest."})
    # The positive-aware threshold's positive: "lowest" of all the query's labelled positives
    # (safe for each of them; sentence-transformers' mine_hard_negatives takes it too), or the
    # "record"'s own positive, the one it trains on; labelled positives are excluded by id either way.
    anchor: Literal["lowest", "record"] = field(default="lowest", metadata={
        "help": "The positive score percpos/marginpos thresholds use: the query's lowest labelled positive, "
                "or the record's own positive."})
    # CADET's positive for LLM-written queries: a query written from a passage is often answered
    # better by another document; the teacher's clear favourite then trains as the positive. Only
    # records with ``meta.passage`` (generate --from-corpus): a labelled positive is never replaced.
    promote_top: float | None = field(default=None, metadata={
        "min": 0.0, "fingerprint": "if-set",
        "help": "Queries an LLM wrote from a passage: when the teacher scores its first other document above the "
                "source passage by more than this relative margin (0.05: 5%), that document becomes the "
                "record's positive and the source a second positive. Off by default."})


DEFAULT_TASK = "Given a query, retrieve relevant documents."


@dataclass(kw_only=True)
class MineOptions(SearchSettings, Knobs):
    """Everything ``curate mine`` takes. The search settings (``SearchSettings``) and the
    preset's knobs (``Knobs``) are declared once, where they are used, and inherited here."""

    out: str = field(metadata={"path": "dir", "help": "Folder for mined.jsonl, report.json, run.json and plots."})
    # input (exactly one of data / pairs / records / hf)
    data: str | None = field(default=None, metadata={
        "path": "dir", "help": "BEIR folder (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv)."})
    split: str = field(default="train", metadata={"help": "Qrels split of --data."})
    qrels: str | None = field(default=None, metadata={
        "help": "Qrels file to use with --data instead of qrels/SPLIT.tsv."})
    min_relevance: int = field(default=1, metadata={"help": "Qrels relevance that makes a document a positive."})
    pairs: str | None = field(default=None, metadata={
        "path": "file",
        "help": 'JSONL of {"query": ..., "positive": text or [texts]}; same query text = one query.'})
    records: str | None = field(default=None, metadata={
        "flag": "--in", "path": "file", "help": "curate records: mined negatives are added to the ones they have."})
    hf: str | None = field(default=None, metadata={
        "help": "Hugging Face dataset: hub name, save_to_disk folder or local data file."})
    hf_split: str = field(default="train", metadata={"help": "Split of --hf."})
    hf_config: str | None = field(default=None, metadata={"help": "Dataset configuration name."})
    query_column: str | None = field(default=None, metadata={"help": "Query column of --hf (default: the first)."})
    positive_column: str | None = field(default=None, metadata={
        "help": "Positive column of --hf, text or list (default: the second)."})
    id_column: str | None = field(default=None, metadata={"help": "Query id column of --hf (for --check-qrels)."})
    corpus: str | None = field(default=None, metadata={
        "path": "file",
        "help": "Documents to mine from (JSONL with 'text'; BEIR corpus.jsonl works). Default: the positives."})
    limit: int | None = field(default=None, metadata={"min": 1, "help": "Mine only the first N queries."})
    # teachers
    teachers: tuple[str, ...] = field(default=(), metadata={
        "flag": "--teacher",
        "help": "Embedding model (sentence-transformers name or path, or openai:MODEL served at "
                "--teacher-base-url); repeat for an ensemble. Default: the bundled all-MiniLM-L6-v2."})
    query_prompt: str | None = field(default=None, metadata={"help": "Prefix for queries given to the teacher(s)."})
    doc_prompt: str | None = field(default=None, metadata={"help": "Prefix for documents given to the teacher(s)."})
    batch_size: int = field(default=64, metadata={"min": 1, "help": "Texts the teachers encode at a time."})
    ensemble: Literal["intra", "cross"] | None = field(default=None, metadata={
        "help": "Combine several teachers: intra = one negative per teacher in turn; cross = one teacher per "
                "query."})
    ensemble_dedup: bool = field(default=False, metadata={
        "flag": "--ensemble-dedup/--no-ensemble-dedup", "help": "intra: skip a document another teacher already gave."})
    cross_assign: Literal["hash", "roundrobin"] = field(default="hash", metadata={
        "help": "cross: how queries are dealt to the teachers."})
    cross_encoder: str | None = field(default=None, metadata={
        "help": "Rescore candidates with this CrossEncoder before thresholds."})
    # what the records' scores are (the export's `label`, levels, the report); the teacher still picks
    scores: Literal["teacher", "hybrid"] = field(default="teacher", metadata={
        "fingerprint": "if-set",  # runs from before the option keep their fingerprint
        "help": "Scores written for the positive and each negative: teacher (its cosine) or hybrid (BM25 mixed "
                "with the teacher, BM25's weight chosen by how well it ranks the queries' own positives). The "
                "teacher picks the negatives either way."})
    # method (its knobs: Knobs) and search (SearchSettings)
    method: str = field(default="percpos", metadata={
        "help_names": {"presets": "curate.negatives.presets:PRESETS"},
        "help": "Mining preset: {presets}, or one from --preset-module."})
    preset_modules: tuple[str, ...] = field(default=(), metadata={
        "flag": "--preset-module", "path": "file",
        "help": "Python file of @preset functions (curate.negatives.presets) to add mining methods."})
    index: Literal["flat", "ivf", "hnsw"] = field(default="flat", metadata={
        "help": "FAISS index: flat is exact; ivf and hnsw are approximate, for large corpora."})
    nprobe: int = field(default=16, metadata={"min": 1, "help": "ivf: lists visited."})
    ef_search: int = field(default=128, metadata={"min": 1, "help": "hnsw: efSearch."})
    # output
    task_text: str = field(default=DEFAULT_TASK, metadata={"help": "Task instruction of new records."})
    levels: bool = field(default=False, metadata={
        "flag": "--levels/--no-levels", "help": "Give mined negatives levels 1-4 by position (hardest first)."})
    min_negatives: int | None = field(default=None, metadata={
        "min": 0, "help": "Write only queries with at least this many mined negatives (default 1; 0 with --in)."})
    # >0: drop queries whose own positive the teacher ranks below this (Linq used 10)
    positive_top: int = field(default=0, metadata={
        "min": 0, "help": "Drop queries whose own positive the teacher ranks below this rank (Linq's teacher "
                          "filter; 0: no gate)."})
    check_qrels: str | None = field(default=None, metadata={
        "help": "BEIR qrels the miner did not see: report the share of negatives they call relevant."})
    plots: bool = True
    # where teachers encode; on Ray, one corpus shard a worker
    executor: Executor = field(default_factory=Executor, metadata={
        "help_vars": {"what": "the teachers' encoding and the search (one shard of the corpus a worker)",
                      "unit": "shards"}})

